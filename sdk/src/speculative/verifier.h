// Exact (lossless) verification of a speculation tree against the target's distributions.
//
// At each node the target's distribution p is the session sampler's full chain applied to the target logits of
// that node, with the history the token would really have (context + accepted path). Then:
//  * deterministic children (beam search, n-grams, greedy drafts, and chains sampled by the coupled rule): draw
//    y from p with the key of its output position (Sampler::sample: one key per emitted token); if a child carries
//    y, accept it and descend, else y is the bonus token and the round ends. Every emitted token is the draw plain
//    sampling makes at that position with that key, whatever was drafted: for a seed, the text is plain
//    sampling's, with any drafter, tree shape, thread count or tuner decision (drafter-invariant). Greedy (T = 0)
//    is the special case where y is the argmax, so the accepted path is the deepest one whose every node matches
//    the target's argmax.
//  * the coupled rule for sampled drafts (SampledDraftRule::kCoupled, the default): a drafter samples its chain
//    with the keys the target will draw the same positions with (DraftRequest::draw_keys; Sampler::draw(q, key),
//    an exponential race), so its token is the target's whenever the two races have the same winner; the chain is
//    then verified as deterministic children above.
//  * the Leviathan rule (SampledDraftRule::kLeviathan): a child c ~ q drawn with the session's own generator
//    (DraftTree::child_distribution): accept with probability min(1, p(c) / q(c)); on rejection draw the bonus from
//    norm(max(0, p - q)). (LongSpec's reference code draws from p here, which is biased; see the negative control in
//    the tests.) Exact in distribution, but how many random words a round uses depends on the draft, so a seed fixes
//    the text only for a fixed drafter and tree.
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
// How chains drafted by sampling (T > 0) are drawn and verified (see above).
enum class SampledDraftRule { kCoupled, kLeviathan };

// logits: tree.size() rows of n_vocab target logits, row i computed after node i. history: the context ending
// with the root; accepted tokens are appended while descending and removed again before returning.
VerifyOutcome verify_tree(const DraftTree &tree, const float *logits, int32_t n_vocab, Sampler &sampler,
                          std::vector<int32_t> &history, ResidualRule rule = ResidualRule::kExact);
// The same walk with the target's logits computed on demand: row(node) returns node's n_vocab logits. Only the
// visited nodes' rows (at most depth + 1) are asked for.
VerifyOutcome verify_tree(const DraftTree &tree, const std::function<const float *(int32_t node)> &row, int32_t n_vocab,
                          Sampler &sampler, std::vector<int32_t> &history, ResidualRule rule = ResidualRule::kExact);

}  // namespace specula::internal
