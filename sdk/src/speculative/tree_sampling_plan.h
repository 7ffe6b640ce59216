// Makes the plan a backend verifies a speculation tree with on its own device (backend/tree_verification.h): the
// session sampler's chain as flat numbers, each node's penalty edits and the keys the host verifier would draw with.
#pragma once

#include "backend/tree_verification.h"
#include "sampling/sampler.h"
#include "speculative/draft_tree.h"

#include <cstdint>
#include <span>
#include <vector>

namespace specula::internal {

// The longest history window (tokens) a plan carries per node; a longer one (or a whole long context, window -1)
// leaves the verification on the host.
inline constexpr int32_t kMaxPlanWindow = 4096;

// Fills `plan` for verifying `tree` with `sampler` after `tokens` (the context, ending with the root). False when
// the host must verify: a chain sampled under the Leviathan rule (it needs the draft's q) or a window above kMaxPlanWindow.
bool plan_tree_sampling(const DraftTree &tree, const Sampler &sampler, std::span<const int32_t> tokens, int32_t n_vocab,
                        TreeSamplingPlan &plan);

}  // namespace specula::internal
