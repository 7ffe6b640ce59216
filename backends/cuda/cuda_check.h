// Turns CUDA runtime errors into the library's Error (nothing in the backend aborts or prints).
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "core/error.h"

#include <cuda_runtime.h>

#include <string>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

// Throws Error(OUT_OF_MEMORY) for allocation failures and Error(INTERNAL) for every other CUDA error, naming the
// call that failed.
inline void check(cudaError_t status, const char *what) {
    if (status == cudaSuccess) return;
    (void)cudaGetLastError();  // clear the sticky-free error state so the next call starts clean
    const specula_status code = status == cudaErrorMemoryAllocation ? SPECULA_ERR_OUT_OF_MEMORY : SPECULA_ERR_INTERNAL;
    throw Error(code, std::string("CUDA: ") + what + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
