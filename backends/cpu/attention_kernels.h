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

// keys t = 0..n-1 at k + t * stride (floats, or halves read in place: the same bits as on the converted floats).
void attention_scores(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores);
void attention_scores(const float *q, int32_t hd, float scale, const uint16_t *k, size_t stride, int32_t n, float *scores);

// out[0..hd) += weights[t] * v[t * stride + j] for t = 0..n-1, in order (v: floats, or halves read in place).
void accumulate_weighted(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n);
void accumulate_weighted(float *out, int32_t hd, const float *weights, const uint16_t *v, size_t stride, int32_t n);

// The online softmax's weights of one block: scores[t] = exp(scores[t] - max) for t < n (scores[t] <= max), and
// returns their sum. exp is a Cephes-style polynomial with plain multiplies and adds (about 1 ulp; arguments below
// -87 give 0), the sum runs in eight lane sums by t % 8 reduced pairwise; the AVX2 copy is bit-identical.
float exp_weights(float *scores, int32_t n, float max);

// The scalar reference loops, for the bit-identity test.
namespace attention_kernels_testing {
float exp_weights_reference(float *scores, int32_t n, float max);
void scores_reference(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores);
void accumulate_reference(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n);
}  // namespace attention_kernels_testing

}  // namespace specula::internal
