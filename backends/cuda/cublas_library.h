// cuBLAS, found at run time. The prefill path (prefill_gemm.h) multiplies long prompt batches with cublasGemmEx;
// everything else in the backend is our own kernels. cuBLAS is opened with dlopen instead of linked so that
// libspecula.so keeps loading on machines without the CUDA toolkit's libraries (as it does without a driver, through
// the static CUDA runtime): there the prefill simply stays on our kernels, and cublas_library() says why.
// In the emulated build (tests/cuda/emulation) the same table points at the emulator's host stand-in.
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include <cublas_v2.h>

#include <string>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

struct CublasLibrary {
    cublasStatus_t (*create)(cublasHandle_t *handle) = nullptr;
    cublasStatus_t (*destroy)(cublasHandle_t handle) = nullptr;
    cublasStatus_t (*set_stream)(cublasHandle_t handle, cudaStream_t stream) = nullptr;
    cublasStatus_t (*gemm_ex)(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void *alpha,
                              const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                              void *C, cudaDataType Ctype, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo) = nullptr;
    const char *(*status_string)(cublasStatus_t status) = nullptr;
    std::string name;  // the file it came from ("libcublas.so.13"), or "emulator"
};

// The process's cuBLAS (opened once, never closed), or nullptr with the reason in *why.
const CublasLibrary *cublas_library(std::string *why);

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
