#include "backends/cuda/prefill_gemm.h"

#include "core/error.h"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

void check_cublas(const CublasLibrary &lib, cublasStatus_t status, const char *what) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    throw Error(SPECULA_ERR_INTERNAL, std::string("cuBLAS: ") + what + " failed: " + lib.status_string(status));
}

}  // namespace

std::unique_ptr<PrefillGemm> PrefillGemm::create(cudaStream_t stream, std::string *why) {
    if (const char *env = std::getenv("SPECULA_CUDA_CUBLAS"); env != nullptr && std::strcmp(env, "0") == 0) {
        if (why) *why = "cuBLAS prefill turned off (SPECULA_CUDA_CUBLAS=0)";
        return nullptr;
    }
    const CublasLibrary *lib = cublas_library(why);
    if (lib == nullptr) return nullptr;
    cublasHandle_t handle = nullptr;
    check_cublas(*lib, lib->create(&handle), "cublasCreate");
    const cublasStatus_t st = lib->set_stream(handle, stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        lib->destroy(handle);
        check_cublas(*lib, st, "cublasSetStream");
    }
    return std::unique_ptr<PrefillGemm>(new PrefillGemm(lib, handle));
}

PrefillGemm::~PrefillGemm() { lib_->destroy(handle_); }

void PrefillGemm::gemm(const DeviceMatrix &w, const float *x, int32_t n, float *y, void *scratch, cudaStream_t stream) const {
    if (n <= 0) return;
    require(w.rows <= std::numeric_limits<int>::max() && w.ld <= std::numeric_limits<int>::max(), SPECULA_ERR_UNSUPPORTED,
            "cuBLAS prefill: matrix too large for a 32-bit GEMM");
    // Row-major Y (n x rows) is column-major rows x n: Y = W · X^T with W row-major (rows x ld) read transposed.
    const int m = int(w.rows), k = int(w.cols), lda = int(w.ld);
    const float alpha = 1.0f, beta = 0.0f;
    const void *b = x;
    cudaDataType type = CUDA_R_32F;
    if (w.type == MatType::F16) {
        __half *xh = static_cast<__half *>(scratch);  // n x cols halves: within gemm_scratch_bytes(w, n)
        round_to_half(x, n, w.cols, xh, stream);
        b = xh;
        type = CUDA_R_16F;
    }
    check_cublas(*lib_, lib_->set_stream(handle_, stream), "cublasSetStream");
    check_cublas(*lib_,
                 lib_->gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.data, type, lda, b, type, k, &beta, y, CUDA_R_32F, m,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
