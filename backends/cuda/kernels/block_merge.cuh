// One round of a block's merge of per-thread sorted lists, shared by row_topk (topk.cu) and sample_chain_rows
// (sampling.cu): each thread offers the head of its list, (value, id), an empty list offering (-inf, INT32_MAX);
// every thread gets back the block's best by (value descending, then lowest id): warp butterfly, then the warps'
// winners through shared memory. The caller advances the winner's list and must __syncthreads() before the next
// round (warp_v / warp_i are rewritten).
#pragma once

#include <cstdint>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {

__device__ __forceinline__ bool ranks_before(float av, int32_t ai, float bv, int32_t bi) {
    return av > bv || (av == bv && ai < bi);
}

template <int kWarps> __device__ __forceinline__ void block_best_head(float &bv, int32_t &bi, float *warp_v, int32_t *warp_i) {
    for (int off = 16; off > 0; off /= 2) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (ranks_before(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    if ((threadIdx.x & 31) == 0) {
        warp_v[threadIdx.x / 32] = bv;
        warp_i[threadIdx.x / 32] = bi;
    }
    __syncthreads();
    bv = warp_v[0];
    bi = warp_i[0];
    for (int w = 1; w < kWarps; ++w)
        if (ranks_before(warp_v[w], warp_i[w], bv, bi)) {
            bv = warp_v[w];
            bi = warp_i[w];
        }
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
