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

// Grows `tree` (reset to the root) by at most request.shape.depth() levels within request.node_budget.
// n_vocab: ids the drafter may propose (min of draft and target vocabularies); row_stride: floats per logits
// row (the draft's vocabulary size); target_vocab: length of the recorded q distributions.
void build_beam_tree(const DraftRequest &request, DraftTree &tree, int32_t n_vocab, int32_t row_stride, int32_t target_vocab,
                     const ScoreLevelFn &score_level);

}  // namespace specula::internal
