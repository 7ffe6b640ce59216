#include "draft_tree.h"

#include "core/error.h"

#include <algorithm>

namespace specula::internal {

void DraftTree::reset(int32_t root_token) {
    tokens_.assign(1, root_token);
    parents_.assign(1, -1);
    depths_.assign(1, 0);
    children_.assign(1, {});
    child_q_.assign(1, {});
}

int32_t DraftTree::max_depth() const {
    int32_t d = 0;
    for (int32_t x : depths_) d = std::max(d, x);
    return d;
}

int32_t DraftTree::find_child(int32_t parent, int32_t token) const {
    for (int32_t c : children_[size_t(parent)])
        if (tokens_[size_t(c)] == token) return c;
    return -1;
}

int32_t DraftTree::add(int32_t parent, int32_t token) {
    require(parent >= 0 && parent < size(), SPECULA_ERR_INTERNAL, "draft tree: parent index out of range");
    const int32_t existing = find_child(parent, token);
    if (existing >= 0) return existing;
    const int32_t node = size();
    tokens_.push_back(token);
    parents_.push_back(parent);
    depths_.push_back(depths_[size_t(parent)] + 1);
    children_.emplace_back();
    child_q_.emplace_back();
    children_[size_t(parent)].push_back(node);
    return node;
}

void DraftTree::ancestor_mask(std::vector<uint8_t> &mask) const { ancestor_mask_rows(0, size(), mask); }

void DraftTree::ancestor_mask_rows(int32_t first, int32_t count, std::vector<uint8_t> &mask) const {
    const int32_t cols = first + count;
    mask.assign(size_t(count) * size_t(cols), 0);
    for (int32_t r = 0; r < count; ++r)
        for (int32_t j = first + r; j >= 0; j = parents_[size_t(j)]) mask[size_t(r) * size_t(cols) + size_t(j)] = 1;
}

void DraftTree::set_child_distribution(int32_t parent, std::vector<float> q) { child_q_[size_t(parent)] = std::move(q); }

}  // namespace specula::internal
