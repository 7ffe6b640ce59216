// What a graph's rows need beyond their values, for one batch: each row's token and position, the key lists its
// attention reads, and where its key and value rows are stored. Planned once here for every backend (the CPU reads
// it in place; a GPU uploads `ints` in one copy), so that the rules of which slots a row sees are written once.
//
// A key list of row i is the committed prefix, slots [0, n_prefix) of the store, followed by the row's tail: for a
// causal batch the batch rows up to its own (slots n_prefix .. n_prefix + i), otherwise an explicit list of slots
// (a tree node: its ancestors and itself; LongSpec's layer: the visible ring slots in position order, then its
// visible ancestors). Its logical key j is prefix slot j for j < n_prefix, else tail entry j - n_prefix: the same
// keys in the same order a token sees when it is decoded alone, which is what batch-invariant attention needs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

struct KeyList {
    int32_t n_prefix = 0;   // slots [0, n_prefix) come first for every row
    bool tails = true;      // false: the prefix alone (LongSpec's cross-attention onto the target's cache)
    bool causal = false;    // row i's tail is slots n_prefix .. n_prefix + i (no slot list)
    // Offsets into BatchRows::ints of tail_start[n], tail_len[n] and the slots (tail_start[i] indexes the slots);
    // set when tails && !causal (a causal list keeps tail_len too, i + 1).
    size_t start_at = 0, len_at = 0, slots_at = 0;
    int32_t max_keys = 0;   // the longest row's keys (prefix + tail)
    // Whether a row's result must not depend on the list's length beyond its own keys (the target's rows: a node
    // must get decoding's bits). A backend may split a list that is not (the draft's cross-attention) to suit its
    // length, e.g. into a fixed number of chunks.
    bool invariant = true;
    // A sliding window (gemma3's local layers): row i's run starts at slot ints[from_at + i] instead of 0, and its
    // listed slots are only those within the window. 0: no window.
    int32_t window = 0;
    size_t from_at = 0;
};

// The key list a graph's sliding-window layers read (the runners add it when Graph::sliding_window > 0); list 0 is
// the full one.
constexpr int32_t kSlidingKeys = 1;

// A run of rows whose keys and values go to consecutive slots of the store: rows [row, row + count) to slots
// [slot, slot + count).
struct StoreRun {
    int32_t row = 0, slot = 0, count = 0;
};

struct BatchRows {
    int32_t n = 0;
    // tokens[n], positions[n], then each key list's arrays: one block for a GPU to upload.
    std::vector<int32_t> ints;
    std::vector<KeyList> lists;
    std::vector<StoreRun> stores;
    // A tree batch's mask, for backends that can run LongSpec's split form of tree attention instead (prefix once,
    // then the masked tree part, merged by log-sum-exp): row i sees tree slots first_tree_slot + j with
    // mask[i * mask_width + j] != 0. Null otherwise. Points into the caller's memory for the batch's lifetime.
    const uint8_t *mask = nullptr;
    int32_t mask_width = 0;
    int32_t first_tree_slot = 0;

    const int32_t *tokens() const { return ints.data(); }
    const int32_t *positions() const { return ints.data() + n; }
    const int32_t *tail_start(const KeyList &l) const { return ints.data() + l.start_at; }
    const int32_t *tail_len(const KeyList &l) const { return ints.data() + l.len_at; }
    const int32_t *tail_slots(const KeyList &l) const { return ints.data() + l.slots_at; }
    // Row i's contiguous run of slots from 0 and its further slots (the CPU's form of a key list).
    int32_t run_of(const KeyList &l, int32_t i) const { return l.causal ? l.n_prefix + i + 1 : l.n_prefix; }
    // The first slot of row i's run (its window's start; 0 without a window). May equal run_of: an empty run.
    int32_t run_from(const KeyList &l, int32_t i) const { return l.window > 0 ? ints[l.from_at + size_t(i)] : 0; }
    int32_t n_extra(const KeyList &l, int32_t i) const { return l.tails && !l.causal ? tail_len(l)[i] : 0; }
    // Row i's keys as logical positions end at key_end (a window that starts past the run keeps only its listed
    // slots, from run_from on): what a GPU kernel that cuts keys at fixed logical positions needs.
    int32_t key_end(const KeyList &l, int32_t i) const { return l.causal ? run_of(l, i) : std::max(run_from(l, i), l.n_prefix) + n_extra(l, i); }
    const int32_t *extra(const KeyList &l, int32_t i) const { return tail_slots(l) + tail_start(l)[i]; }

    // Starts a batch of n rows: tokens and positions are to be filled (tokens_mut / positions_mut).
    void reset(int32_t rows);
    int32_t *tokens_mut() { return ints.data(); }
    int32_t *positions_mut() { return ints.data() + n; }
    // Adds a list: the prefix, then a causal tail per row (slots n_prefix .. n_prefix + i).
    void add_causal_list(int32_t n_prefix);
    // Adds a list whose rows see the prefix alone.
    void add_prefix_list(int32_t n_prefix, bool invariant);
    // Adds a list with explicit tails: begin_list(), then push_slot(row, slot) for each slot of each row, rows in
    // order (0 first), then end_list().
    void begin_list(int32_t n_prefix, bool invariant);
    void push_slot(int32_t row, int32_t slot);
    void end_list();

private:
    KeyList &open_list(int32_t n_prefix, bool invariant);
};

// The target's batches: n tokens at slots and positions n_past + i, causal. With window > 0 a second list
// (kSlidingKeys) restricts each row to the positions (p - window, p]: the target's slot s holds position s.
void plan_causal_rows(BatchRows &rows, const int32_t *tokens, int32_t n, int32_t n_past, int32_t window = 0);
// n tree nodes at slots n_past + offset + i and positions[i]; node i sees the committed slots [0, n_past) and the
// tree slots n_past + j with mask[i * mask_stride + j] != 0 (j < mask_stride: itself and its ancestors, which sit
// at positions positions[i] - 1, - 2, ...: a path). With window > 0, list kSlidingKeys holds the same keys within
// (positions[i] - window, positions[i]], the keys decoding that path would see in a sliding layer.
void plan_tree_rows(BatchRows &rows, const int32_t *tokens, int32_t n, int32_t n_past, int32_t offset, const int32_t *positions,
                    const uint8_t *mask, int32_t mask_stride, int32_t window = 0);

}  // namespace specula::internal
