// Long prompt batches through cuBLAS. A prompt of thousands of tokens is GEMM-bound, and cuBLAS's kernels (tuned
// tile shapes, pipelined loads) beat our batch-invariant WMMA GEMM there by a wide margin. cuBLAS is not
// batch-invariant (it picks kernels by shape), so it is used only where that cannot change a generated token:
// causal prompt batches of at least kMinRows rows (never a decoded token, never a tree verification), and the
// session prefills the same batches whether it speculates or not (TargetRunner::prompt_batches_are_invariant:
// the last prompt token is decoded alone, as the speculative session evaluates it as a tree root). docs/cuda.md
// ("Prefill through cuBLAS") gives the whole argument.
#pragma once

#include "backends/cuda/cuda_namespace.h"

#include "backends/cuda/cublas_library.h"
#include "backends/cuda/kernels/kernels.h"

#include <memory>
#include <string>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

class PrefillGemm {
public:
    static constexpr int32_t kMinRows = 64;

    // cuBLAS on `stream`, or nullptr with the reason in *why (no cuBLAS library, or SPECULA_CUDA_CUBLAS=0).
    // Throws Error(INTERNAL) when the library is there but refuses a handle.
    static std::unique_ptr<PrefillGemm> create(cudaStream_t stream, std::string *why);
    ~PrefillGemm();
    PrefillGemm(const PrefillGemm &) = delete;
    PrefillGemm &operator=(const PrefillGemm &) = delete;

    // gemm()'s contract (kernels.h: Y[t][r] = sum_k W[r][k] X[t][k]) through cublasGemmEx: F16 weights with
    // activations rounded to F16 (F32 accumulation), F32 weights in F32. Scratch: gemm_scratch_bytes(w, n).
    void gemm(const DeviceMatrix &w, const float *x, int32_t n, float *y, void *scratch, cudaStream_t stream) const;
    const std::string &library() const { return lib_->name; }

private:
    PrefillGemm(const CublasLibrary *lib, cublasHandle_t handle) : lib_(lib), handle_(handle) {}
    const CublasLibrary *lib_;
    cublasHandle_t handle_;
};

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
