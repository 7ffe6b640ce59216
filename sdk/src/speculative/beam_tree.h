// LongSpec's dynamic beam tree: level by level, the children kept are the `width` (parent, token) pairs with the
// highest cumulative draft log-probability over ALL nodes of the previous level (a global top-k over
// parents x vocabulary), so confident branches grow deep and doubtful ones die. Level widths come from the
// request's shape ([4,16,16,16,16] by default); a width-1 shape is a greedy chain.
//
// When the target samples (request.sampler set) and the shape is a chain, the chain is instead *sampled* from
// the drafter's distribution q (the session's sampler chain applied to the draft logits) and q is recorded for
// the Leviathan rule: the classic speculative sampling of an independent draft model.
#pragma once

#include "speculative/drafter.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace specula::internal {

// Evaluates tree nodes [first, first + count) (a whole level; level 0 is the root alone) and writes count
// rows of `row_stride` raw draft logits into logits.
using ScoreLevelFn = std::function<void(const DraftTree &tree, int32_t first, int32_t count, float *logits)>;

// Optional: evaluates the same rows but returns only each row's candidates: the k best (log-prob, id) pairs of
// its log-softmax over the first n_vocab logits, sorted by log-prob descending, equal log-probs by the lowest id
// (logp at logp[r * k + j], ids at ids[r * k + j]; ids past the vocabulary are -1 with logp -inf), the log-probs
// computed as x - (max + float(log(sum exp(double(x - max)))))  (beam_tree.cpp's log_softmax; the sum's order may
// differ). Returns false when it cannot (then the level is scored with ScoreLevelFn). A device drafter uses it to
// copy count x k candidates instead of count x n_vocab logits.
using ScoreTopkFn = std::function<bool(const DraftTree &tree, int32_t first, int32_t count, int32_t k, float *logp, int32_t *ids)>;

// Grows `tree` (reset to the root) by at most request.shape.depth() levels within request.node_budget.
// n_vocab: ids the drafter may propose (min of draft and target vocabularies); row_stride: floats per logits
// row (the draft's vocabulary size); target_vocab: length of the recorded q distributions.
// score_topk (may be empty) is used for a level when nothing needs the full logits: no request.process_logits and
// no sampled chain. The pool, the global top-width and its tie rules are the same either way, so the same
// log-probs give the same tree.
void build_beam_tree(const DraftRequest &request, DraftTree &tree, int32_t n_vocab, int32_t row_stride, int32_t target_vocab,
                     const ScoreLevelFn &score_level, const ScoreTopkFn &score_topk = {});

}  // namespace specula::internal
