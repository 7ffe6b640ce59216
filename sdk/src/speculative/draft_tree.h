// A speculation tree: node 0 is the root, the last token of the context, generated but not yet evaluated by the
// target; every other node is a drafted continuation of its parent. Nodes are stored in insertion order with
// parents before children (so BFS order for beam trees), and no two children of a node carry the same token,
// which is what lets verification descend by matching a sampled token against the children.
//
// A node at depth d sits at position (root position + d) and, in the target's verification batch, attends to
// the committed prefix plus itself and its ancestors (its "ancestor mask" row).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

class DraftTree {
public:
    // Clears the tree to the root alone.
    void reset(int32_t root_token);

    int32_t size() const { return int32_t(tokens_.size()); }
    int32_t token(int32_t node) const { return tokens_[size_t(node)]; }
    int32_t parent(int32_t node) const { return parents_[size_t(node)]; }
    int32_t depth(int32_t node) const { return depths_[size_t(node)]; }
    int32_t max_depth() const;
    const std::vector<int32_t> &tokens() const { return tokens_; }
    const std::vector<int32_t> &depths() const { return depths_; }
    const std::vector<int32_t> &parents() const { return parents_; }  // parents()[0] is the root's: -1

    // The child of `parent` carrying `token`, or -1.
    int32_t find_child(int32_t parent, int32_t token) const;
    bool is_leaf(int32_t node) const { return children_[size_t(node)].empty(); }
    // The first child added under `node` (-1: none). A beam tree adds each parent's children best first
    // (build_beam_tree), so this is the draft's best token there, the one a chain would draft.
    int32_t first_child(int32_t node) const { return children_[size_t(node)].empty() ? -1 : children_[size_t(node)].front(); }
    // Adds `token` under `parent` unless that child exists already; returns the child's index either way.
    int32_t add(int32_t parent, int32_t token);

    // Row-major n x n: mask[i * n + j] = 1 when node j is node i or one of its ancestors.
    void ancestor_mask(std::vector<uint8_t> &mask) const;
    // Rows [first, first + count) of the ancestor mask restricted to columns [0, first + count): the layout
    // a level-by-level draft forward needs (CpuRunner::eval_tree with tree_offset = first).
    void ancestor_mask_rows(int32_t first, int32_t count, std::vector<uint8_t> &mask) const;

    // Sampled chains (the Leviathan rule): when a drafter *sampled* node c from a distribution q over the
    // vocabulary (rather than choosing it deterministically), it records q here for c's parent. The verifier
    // then accepts c with probability min(1, p(c)/q(c)) and on rejection samples norm(max(0, p - q)). A node
    // with a recorded q must have exactly one child. Dense, n_vocab floats; empty for deterministic nodes.
    void set_child_distribution(int32_t parent, std::vector<float> q);
    const std::vector<float> &child_distribution(int32_t node) const { return child_q_[size_t(node)]; }
    bool has_child_distribution(int32_t node) const { return !child_q_[size_t(node)].empty(); }

private:
    std::vector<int32_t> tokens_, parents_, depths_;
    std::vector<std::vector<int32_t>> children_;
    std::vector<std::vector<float>> child_q_;
};

}  // namespace specula::internal
