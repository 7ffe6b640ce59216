// The CUDA backend's registry entry (backends/registry.cpp) and its runner factory. Only compiled when the build
// has CUDA (SPECULA_HAVE_CUDA); this header itself needs no CUDA headers.
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backend/backend_registry.h"

#include <memory>

namespace specula::internal {
class Model;
}

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

BackendDesc cuda_backend();

// A runner for `model` on `device`. Throws Error with the reason it cannot (no device, not enough memory, ...).
std::unique_ptr<TargetRunner> make_cuda_runner(std::shared_ptr<const Model> model, int32_t n_ctx, int device,
                                               std::shared_ptr<const Graph> graph = nullptr);

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
