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

// Rows in lanes (AVX-512): kLaneRows query rows side by side, lane r of every register holding row r, for the rows
// of a tree (and a group's query heads) that share a block. The queries are transposed once per call (qt[i * 16 + r]
// = q[r][i]) instead of the keys once per block, each key element is one broadcast multiplied into 16 rows, and the
// softmax's steps (block max, rescale, exp weights and their eight lane sums, weighted values) run down the lanes with
// no horizontal reduction. Per lane every operation is the reference's in the reference's order, so a row's bits are
// those it gets alone (tested). Lanes outside `mask` (rows that do not reach the block, or padding) change nothing.
constexpr int32_t kLaneRows = 16;
constexpr int32_t kLaneScoreSlack = 2;
bool attention_lanes_available();
// qt[i * 16 + r] = q[r][i] for r < rows, zeros in the lanes from rows on.
void lanes_transpose_queries(const float *const *q, int32_t rows, int32_t hd, float *qt);
// st[t * 16 + r] = row r's score of key t (keys F32 at k + t * stride); st has room for kLaneScoreSlack more keys.
void lanes_scores(const float *qt, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *st);
// The same from F16 keys read in place, converting the keys into kf and the values into vf (rows hd apart) on the way.
void lanes_scores(const float *qt, int32_t hd, float scale, const uint16_t *k, const uint16_t *v, size_t stride, int32_t n, float *st, float *kf,
                  float *vf);
// One block into the online softmax of the lanes in mask: the block's max per lane, the rescale of what was summed
// under the old max (by std::exp, as fold does it), then st becomes the weights exp(st - max) and l += their sum.
void lanes_softmax(float *st, int32_t n, uint32_t mask, float *m, float *l, float *ot, int32_t hd);
// ot[j * 16 + r] = fma(wt[t * 16 + r], v_t[j], ot[j * 16 + r]) over the keys in order, for the lanes in mask.
void lanes_accumulate(float *ot, int32_t hd, const float *wt, const float *v, size_t stride, int32_t n, uint32_t mask);

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
