// An independent small draft model (any GGUF of the llama family whose vocabulary matches the target's, e.g.
// a smaller sibling): classic speculative decoding. It keeps its own KV cache of the committed context
// (catching up on new tokens each round) and drafts with the same beam tree as LongSpec; as a chain at T > 0
// it samples its drafts, so the verifier applies the Leviathan rule with the residual.
#pragma once

#include "model/model.h"
#include "speculative/drafter.h"

#include <memory>

namespace specula::internal {

class TargetRunner;

// Throws Error(INCOMPATIBLE) when the vocabularies differ (vocab_compat.h). `runner` evaluates the draft model
// (TargetRunner::make_draft_runner: on the target's backend and threads, since it only runs between the target's
// passes); its n_ctx bounds the context the drafter follows.
std::unique_ptr<Drafter> make_model_drafter(std::shared_ptr<const Model> draft, const Model &target, std::unique_ptr<TargetRunner> runner);

// The primary drafter's tree, then the secondary's candidates merged into it (shared prefixes become one
// branch) up to the node budget: LongSpec or a draft model plus n-gram reuse in one verification pass.
// primary_budget caps the primary's nodes (root included). The primary drafts deterministically (no sampled
// chains), since a sampled node must be its parent's only child.
std::unique_ptr<Drafter> make_merged_drafter(std::unique_ptr<Drafter> primary, std::unique_ptr<Drafter> secondary, int32_t primary_budget);

}  // namespace specula::internal
