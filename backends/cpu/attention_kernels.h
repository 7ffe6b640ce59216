// The two inner loops of attention, one call per query and run of contiguous keys instead of one call per key:
//   attention_scores     scores[t] = dot(q, k_t) * scale, with exactly f32_vec_dot's arithmetic (eight partial sums
//                        over the first hd & ~7 elements, the tail into sum[0], then the same pairwise reduction),
//                        so every caller's scores are bit-identical to what the per-key F32 dot gave;
//   accumulate_weighted  out[j] += w_t * v_t[j] over the keys, element by element in key order (no reassociation).
// An AVX2 version (used at SIMD level avx2 and above, see cpu_isa.h) keeps the reference's eight partial sums in
// one register and multiplies and adds separately, so it is bit-identical to the scalar loops (tested).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

// keys t = 0..n-1 at k + t * stride (floats).
void attention_scores(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores);

// out[0..hd) += weights[t] * v[t * stride + j] for t = 0..n-1, in order.
void accumulate_weighted(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n);

// The scalar reference loops, for the bit-identity test.
namespace attention_kernels_testing {
void scores_reference(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores);
void accumulate_reference(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n);
}  // namespace attention_kernels_testing

}  // namespace specula::internal
