// Which backend runs a session's target, and the fallback when the one asked for cannot: the CUDA backend when
// built in and a usable device has room, else the CPU reference, with the reason recorded for the caller.
#pragma once

#include "backend/target_runner.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace specula::internal {

class Model;

enum class BackendKind { Auto, Cpu, Cuda };

struct BackendChoice {
    BackendKind kind = BackendKind::Auto;
    int32_t device = 0;          // device index for GPU backends
    bool allow_fallback = true;  // false: a backend that cannot be used is an error, not a CPU fallback
    std::optional<KvType> kv_type;  // the target's KV element type; unset: the backend's default (F16 everywhere)
};

// Creates the runner. When the requested backend (or, for Auto, CUDA) cannot be used and fallback is allowed,
// returns a CPU runner and sets `note` to why (e.g. "CUDA: no CUDA device found"); otherwise note is empty.
// Throws Error(UNSUPPORTED / OUT_OF_MEMORY / INVALID_ARGUMENT) with the reason when fallback is not allowed.
std::unique_ptr<TargetRunner> make_target_runner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads,
                                                 const BackendChoice &choice, std::string &note);

// GPU devices a backend can use now (CPU: none listed here). `reason` says why the list is empty.
struct GpuDevice {
    int32_t index = 0;
    std::string name;
    size_t total_memory = 0, free_memory = 0;
    int32_t compute_major = 0, compute_minor = 0, multiprocessors = 0;
    double peak_bandwidth_gbs = 0;
};
std::vector<GpuDevice> list_gpu_devices(BackendKind kind, std::string *reason);
// Whether this build has the CUDA backend compiled in.
bool built_with_cuda();

}  // namespace specula::internal
