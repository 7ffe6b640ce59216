// Exact (lossless) verification of a speculation tree against the target's distributions.
//
// At each node the target's distribution p is the session sampler's full chain applied to the target logits of
// that node, with the history the token would really have (context + accepted path). Then:
//  * deterministic children (beam search, n-grams, greedy drafts): sample y ~ p once; if a child carries y,
//    accept it and descend, else y is the bonus token and the round ends. Each emitted token is therefore a
//    draw from p itself: the output distribution is exactly the target's, at any temperature. Greedy (T = 0)
//    is the special case where y is the argmax, so the accepted path is the deepest one whose every node
//    matches the target's argmax.
//  * a sampled child c ~ q (a chain drafted by sampling; DraftTree::child_distribution): Leviathan et al.'s rule:
//    accept with probability min(1, p(c) / q(c)); on rejection draw the bonus from norm(max(0, p - q)).
//    (LongSpec's reference code draws from p here, which is biased; see the negative control in the tests.)
// Consecutive tokens of one round consume the sampler's random numbers in order, so runs are reproducible.
#pragma once

#include "backend/tree_verification.h"  // VerifyOutcome
#include "sampling/sampler.h"
#include "speculative/draft_tree.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace specula::internal {

// How a rejected sampled draft is replaced. Only kExact is lossless; kTargetResample reproduces the
// reference LongSpec bug and exists so that tests can show the statistical test detects it.
enum class ResidualRule { kExact, kTargetResample };

// logits: tree.size() rows of n_vocab target logits, row i computed after node i. history: the context ending
// with the root; accepted tokens are appended while descending and removed again before returning.
VerifyOutcome verify_tree(const DraftTree &tree, const float *logits, int32_t n_vocab, Sampler &sampler,
                          std::vector<int32_t> &history, ResidualRule rule = ResidualRule::kExact);
// The same walk with the target's logits computed on demand: row(node) returns node's n_vocab logits. Only the
// visited nodes' rows (at most depth + 1) are asked for.
VerifyOutcome verify_tree(const DraftTree &tree, const std::function<const float *(int32_t node)> &row, int32_t n_vocab,
                          Sampler &sampler, std::vector<int32_t> &history, ResidualRule rule = ResidualRule::kExact);

}  // namespace specula::internal
