// The CUDA backend's entry points for the rest of the library (sdk/src/backend/backend_choice.cpp). Only compiled
// when the build has CUDA (SPECULA_HAVE_CUDA); this header itself needs no CUDA headers.
#pragma once

#include "backend/target_runner.h"

#include <memory>

namespace specula::internal {
class Model;
}

namespace specula::internal::cuda {

// A runner for `model` on `device`. Throws Error with the reason it cannot (no device, not enough memory, ...).
std::unique_ptr<TargetRunner> make_cuda_runner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads, int device);

}  // namespace specula::internal::cuda
