// The emulator's stand-in for the cuBLAS calls of backends/cuda/cublas_library.h (see cublas_v2.h here).
#include "cublas_v2.h"

#include <atomic>

struct cublasContext {
    cudaStream_t stream = nullptr;
};

namespace cuda_emulation {
namespace {
std::atomic<uint64_t> gemm_calls{0};

double element(const void *base, cudaDataType type, size_t index) {
    return type == CUDA_R_16F ? double(__half2float(static_cast<const __half *>(base)[index])) : double(static_cast<const float *>(base)[index]);
}
}  // namespace
uint64_t cublas_gemm_calls() { return gemm_calls.load(); }
}  // namespace cuda_emulation

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
    if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasContext();
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

// Column-major, as cuBLAS: C (m x n, ldc) = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t) {
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || A == nullptr || B == nullptr || C == nullptr || alpha == nullptr || beta == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (Ctype != CUDA_R_32F || computeType != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (lda < (transa == CUBLAS_OP_N ? m : k) || ldb < (transb == CUBLAS_OP_N ? k : n) || ldc < m) return CUBLAS_STATUS_INVALID_VALUE;
    ++cuda_emulation::gemm_calls;
    const float a_scale = *static_cast<const float *>(alpha), b_scale = *static_cast<const float *>(beta);
    // One emulated thread does the whole product, in stream order (or into the stream's capture).
    cuda_emulation::launch(dim3(1), dim3(1), 0, handle->stream, [=]() {
        float *c = static_cast<float *>(C);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
                double s = 0.0;
                for (int p = 0; p < k; ++p) {
                    const size_t ai = transa == CUBLAS_OP_N ? size_t(p) * size_t(lda) + size_t(i) : size_t(i) * size_t(lda) + size_t(p);
                    const size_t bi = transb == CUBLAS_OP_N ? size_t(j) * size_t(ldb) + size_t(p) : size_t(p) * size_t(ldb) + size_t(j);
                    s += cuda_emulation::element(A, Atype, ai) * cuda_emulation::element(B, Btype, bi);
                }
                float &out = c[size_t(j) * size_t(ldc) + size_t(i)];
                out = float(double(a_scale) * s) + (b_scale != 0.0f ? b_scale * out : 0.0f);
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}
