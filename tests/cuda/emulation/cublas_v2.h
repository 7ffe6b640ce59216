// Emulated <cublas_v2.h>: the slice of cuBLAS the CUDA backend's prefill path calls (backends/cuda/cublas_library.h),
// with the real header's names and values. The stand-in (emulated_cublas.cpp) computes what cublasGemmEx computes,
// as one emulated launch on the handle's stream (so it is ordered with the kernels and captured like them), but
// with its own summation (in double, rounded once): its bits differ from the backend's batch-invariant kernels, as
// real cuBLAS's do, so the emulated tests show that losslessness does not depend on the prefill's rounding.
#pragma once
#include "cuda_emulation.h"

#include <cstdint>

#define CUBLAS_VER_MAJOR 13

struct cublasContext;
using cublasHandle_t = cublasContext *;
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2 };
using cudaDataType = cudaDataType_t;
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle);
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo);
const char *cublasGetStatusString(cublasStatus_t status);

namespace cuda_emulation {
// cublasGemmEx calls so far (tests check that the prefill path really went through cuBLAS).
uint64_t cublas_gemm_calls();
}  // namespace cuda_emulation
