#include "graph/batch_rows.h"

#include <algorithm>

namespace specula::internal {

void BatchRows::reset(int32_t rows) {
    n = rows;
    ints.assign(2 * size_t(rows), 0);
    lists.clear();
    stores.clear();
    mask = nullptr;
    mask_width = 0;
    first_tree_slot = 0;
}

// A list with each row's tail start and length (zeros), its slots to follow.
KeyList &BatchRows::open_list(int32_t n_prefix, bool invariant) {
    KeyList l;
    l.n_prefix = n_prefix;
    l.invariant = invariant;
    l.start_at = ints.size();
    ints.resize(ints.size() + 2 * size_t(n), 0);
    l.len_at = l.start_at + size_t(n);
    l.slots_at = ints.size();
    lists.push_back(l);
    return lists.back();
}

void BatchRows::add_causal_list(int32_t n_prefix) {
    KeyList &l = open_list(n_prefix, true);
    l.causal = true;
    for (int32_t i = 0; i < n; ++i) ints[l.len_at + size_t(i)] = i + 1;
    l.max_keys = n_prefix + n;
}

void BatchRows::add_prefix_list(int32_t n_prefix, bool invariant) {
    KeyList l;
    l.n_prefix = n_prefix;
    l.tails = false;
    l.start_at = l.len_at = l.slots_at = ints.size();
    l.max_keys = n_prefix;
    l.invariant = invariant;
    lists.push_back(l);
}

void BatchRows::begin_list(int32_t n_prefix, bool invariant) { open_list(n_prefix, invariant); }

void BatchRows::push_slot(int32_t row, int32_t slot) {
    const KeyList &l = lists.back();
    ints.push_back(slot);
    ++ints[l.len_at + size_t(row)];
}

void BatchRows::end_list() {
    KeyList &l = lists.back();
    int32_t at = 0, longest = 0;
    for (int32_t i = 0; i < n; ++i) {
        ints[l.start_at + size_t(i)] = at;
        at += ints[l.len_at + size_t(i)];
        longest = std::max(longest, ints[l.len_at + size_t(i)]);
    }
    l.max_keys = l.n_prefix + longest;
}

namespace {

// Makes the last list a window's: each row's first slot (ints grow by n, after the list's own arrays), and no row
// sees more than `window` keys.
void add_window(BatchRows &rows, int32_t window) {
    const size_t at = rows.ints.size();
    rows.ints.resize(at + size_t(rows.n));
    KeyList &l = rows.lists.back();
    l.window = window;
    l.from_at = at;
    l.max_keys = std::min(l.max_keys, window);
    for (int32_t i = 0; i < rows.n; ++i) rows.ints[at + size_t(i)] = std::max(0, rows.positions()[i] - window + 1);
}

}  // namespace

void plan_causal_rows(BatchRows &rows, const int32_t *tokens, int32_t n, int32_t n_past, int32_t window) {
    rows.reset(n);
    std::copy(tokens, tokens + n, rows.tokens_mut());
    for (int32_t i = 0; i < n; ++i) rows.positions_mut()[i] = n_past + i;
    rows.add_causal_list(n_past);
    if (window > 0) {
        rows.add_causal_list(n_past);
        add_window(rows, window);
    }
    rows.stores.push_back(StoreRun{0, n_past, n});
}

void plan_tree_rows(BatchRows &rows, const int32_t *tokens, int32_t n, int32_t n_past, int32_t offset, const int32_t *positions,
                    const uint8_t *mask, int32_t mask_stride, int32_t window) {
    rows.reset(n);
    std::copy(tokens, tokens + n, rows.tokens_mut());
    std::copy(positions, positions + n, rows.positions_mut());
    // Slots are pushed row by row, in slot order: end_list() finds each row's start by counting.
    rows.begin_list(n_past, true);
    for (int32_t i = 0; i < n; ++i) {
        const uint8_t *m = mask + size_t(i) * size_t(mask_stride);
        for (int32_t j = 0; j < mask_stride; ++j)
            if (m[j]) rows.push_slot(i, n_past + j);
    }
    rows.end_list();
    if (window > 0) {
        // The path's last `window` nodes (itself included: its ancestors are one position apart), after the
        // committed slots from positions[i] - window + 1 on.
        rows.begin_list(n_past, true);
        for (int32_t i = 0; i < n; ++i) {
            const uint8_t *m = mask + size_t(i) * size_t(mask_stride);
            int32_t path = 0;
            for (int32_t j = 0; j < mask_stride; ++j) path += m[j] != 0;
            for (int32_t j = 0, k = 0; j < mask_stride; ++j)
                if (m[j] && path - k++ <= window) rows.push_slot(i, n_past + j);
        }
        rows.end_list();
        add_window(rows, window);
    }
    rows.stores.push_back(StoreRun{0, n_past + offset, n});
    rows.mask = mask;
    rows.mask_width = mask_stride;
    rows.first_tree_slot = n_past;
}

}  // namespace specula::internal
