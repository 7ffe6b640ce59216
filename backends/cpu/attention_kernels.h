// The two inner loops of attention, one call per run of contiguous keys (and per few query rows) instead of one per key:
//   attention_scores     scores[t] = dot(q, k_t) * scale: eight lane sums over the first hd & ~7 elements (lane l
//                        takes elements l, l + 8, ...), each a chain of fused multiply-adds, the tail into lane 0,
//                        then the pairwise reduction ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
//   accumulate_weighted  out[j] = fma(w_t, v_t[j], out[j]) over the keys, element by element in key order.
// The row forms take several query rows against the same keys (a KV group's query heads, a tree's rows): each key
// and value row is loaded, and an F16 one converted, once for all of them, while each row's arithmetic is exactly
// what it is alone, so a row's result never depends on which rows share the call. An AVX2 + FMA version (SIMD
// level avx2 and above, see cpu_isa.h) is bit-identical to the scalar reference loops (tested).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

// The rows the SIMD kernels take in one pass over the keys (more are done in passes of this many).
constexpr int32_t kAttentionRowsAtOnce = 4;

// Row forms: row r's query is q[r] and its scores are scores[r * ld + t]; its output is out[r] and its weights
// weights[r * ld + t].
void attention_scores(const float *const *q, int32_t rows, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores,
                      size_t ld);
void attention_scores(const float *const *q, int32_t rows, int32_t hd, float scale, const uint16_t *k, size_t stride, int32_t n,
                      float *scores, size_t ld);
void accumulate_weighted(float *const *out, int32_t rows, int32_t hd, const float *weights, size_t ld, const float *v, size_t stride,
                         int32_t n);
void accumulate_weighted(float *const *out, int32_t rows, int32_t hd, const float *weights, size_t ld, const uint16_t *v, size_t stride,
                         int32_t n);

// Many rows against the same keys (a tree's rows and a group's query heads: 64 per task when verifying 16 nodes):
// the keys are transposed once into kt (element i of key t at kt[i * ldk + t], F32, lanes from n up to the next
// multiple of 16 zeroed), and the scores then run 16 keys per register, each lane sum a register over 16 keys:
// no horizontal reduction, one load of the keys for every two rows' multiply-adds. The same lane sums in the same
// order, the same pairwise reduction: bit for bit attention_scores (tested). transpose_keys needs ldk >= n rounded
// up to 16; attention_transposed_pays() says whether this machine has the 512-bit registers that make it faster.
bool attention_transposed_pays();
void transpose_keys(const float *k, size_t stride, int32_t n, int32_t hd, float *kt, size_t ldk);
void transpose_keys(const uint16_t *k, size_t stride, int32_t n, int32_t hd, float *kt, size_t ldk);
void attention_scores_transposed(const float *const *q, int32_t rows, int32_t hd, float scale, const float *kt, size_t ldk, int32_t n,
                                 float *scores, size_t ld);

// keys t = 0..n-1 at k + t * stride (floats, or halves read in place: the same bits as on the converted floats).
void attention_scores(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores);
void attention_scores(const float *q, int32_t hd, float scale, const uint16_t *k, size_t stride, int32_t n, float *scores);

// out[0..hd) += weights[t] * v[t * stride + j] for t = 0..n-1, in order (v: floats, or halves read in place).
void accumulate_weighted(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n);
void accumulate_weighted(float *out, int32_t hd, const float *weights, const uint16_t *v, size_t stride, int32_t n);

// The online softmax's weights of one block: scores[t] = exp(scores[t] - max) for t < n (scores[t] <= max), and
// returns their sum. exp is a Cephes-style polynomial with plain multiplies and adds (about 1 ulp; arguments below
// -87 give 0), the sum runs in eight lane sums by t % 8 reduced pairwise; the AVX2 and AVX-512 copies are bit-identical.
float exp_weights(float *scores, int32_t n, float max);

// The largest of scores[0..n), n >= 1 (where a score is NaN, the result depends on the SIMD level, never on the
// rows in the batch: decoding and tree verification call the same function on a row's same scores).
float scores_max(const float *scores, int32_t n);

// The scalar reference loops, for the bit-identity test.
namespace attention_kernels_testing {
float exp_weights_reference(float *scores, int32_t n, float max);
void scores_reference(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores);
void accumulate_reference(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n);
}  // namespace attention_kernels_testing

}  // namespace specula::internal
