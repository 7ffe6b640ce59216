// What a backend needs to verify a speculation tree on its own device (TargetRunner::verify_tree_on_device), so that
// only the accepted tokens come back instead of a vocabulary-sized logits row per visited node: the tree, the session
// sampler's chain as flat numbers, each node's penalty edits (its history is the context plus its ancestors), and
// the keys the host verifier would draw with. The device then does what speculative/verifier.cpp does for
// deterministic children: at each visited node the chain's distribution, one draw, descend or stop with the bonus.
// Same distribution, same random numbers, the same walk: the host verifier stays the reference (and the fallback).
// The plan is made by speculative/tree_sampling_plan.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specula::internal {

struct TreeSamplingPlan {
    // The tree: node i's parent (parents[0] = -1: the root) and token; parents precede children.
    std::span<const int32_t> parents, tokens;
    // The chain, step by step as Sampler builds it (sampler.cpp): penalties, contextual penalty, then greedy: the
    // best token; else top-k (0: off), top-p (< 1), min-p (> 0), temperature.
    bool greedy = true;
    bool penalties = false;
    float repeat = 1.0f, frequency = 0.0f, presence = 0.0f;
    bool contextual = false;
    float theta = 1.0f;
    int32_t top_k = 0;  // already at most n_vocab
    float top_p = 1.0f, min_p = 0.0f, temperature = 1.0f;
    // Node i's edited ids: edit_ids[edit_first[i] .. edit_first[i + 1]), ascending, each with its count in the
    // penalties' window of the node's history (0: not in it) and whether it is in the contextual penalty's window.
    std::vector<int32_t> edit_first, edit_ids, edit_counts;
    std::vector<uint8_t> edit_in_context;
    // keys[d]: the key of the draw at depth d (the walk visits one node per depth; sampling/race_draw.h); empty when
    // greedy. The sampler's generator has not moved: the caller skips as many draws as the walk used
    // (Sampler::skip_draws).
    std::vector<uint64_t> keys;

    int32_t size() const { return int32_t(parents.size()); }
};

// A verified round: the accepted nodes (root excluded), root to leaf, and the target's own token after the last.
struct VerifyOutcome {
    std::vector<int32_t> path;
    int32_t bonus = -1;
};

}  // namespace specula::internal
