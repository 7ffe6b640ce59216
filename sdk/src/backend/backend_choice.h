// Which backend runs a session's target, and the fallback when the one asked for cannot: with AUTO, each GPU kind
// the C ABI knows in turn (CUDA, then Vulkan; built ones through the registry, backend/backend_registry.h), then the
// CPU; every refusal's reason, a GPU kind this build lacks included, is recorded for the caller.
#pragma once

#include "backend/backend_registry.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace specula::internal {

struct BackendChoice {
    BackendKind kind = BackendKind::Auto;
    int32_t device = 0;          // device index for GPU backends
    bool allow_fallback = true;  // false: a backend that cannot be used is an error, not a CPU fallback
    std::optional<KvType> kv_type;  // the target's KV element type; unset: the backend's default (F16 everywhere)
};

// Creates the runner (its CPU work on `pool`, which must outlive it). When the requested backend (or, for Auto,
// every GPU backend) cannot be used and fallback is allowed, returns a CPU runner and sets `note` to why, each
// refusal's reason joined by "; " (e.g. "CUDA: no CUDA device found; Vulkan: this build has no Vulkan backend (...);
// running on the CPU"); otherwise note is empty. Throws Error(UNSUPPORTED /
// OUT_OF_MEMORY / INVALID_ARGUMENT) with the reason when fallback is not allowed.
std::unique_ptr<TargetRunner> make_target_runner(std::shared_ptr<const Model> model, int32_t n_ctx, ThreadPool &pool,
                                                 const BackendChoice &choice, std::string &note);

// The runner of an independent draft model for a session whose target runs on `target`: on the target's backend
// when it can hold the draft (TargetRunner::make_draft_runner), else on the CPU with the session's threads.
std::unique_ptr<TargetRunner> make_draft_model_runner(TargetRunner &target, std::shared_ptr<const Model> draft, ThreadPool &pool);

}  // namespace specula::internal
