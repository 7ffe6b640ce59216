#include "attention_kernels.h"

#include "cpu_isa.h"
#include "formats/half.h"
#include "formats/rounding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SPECULA_ATTENTION_AVX2 1
// GCC 12's avx512fintrin.h starts some 512-bit intrinsics from _mm512_undefined_ps() and then warns that its own
// placeholder "__Y" is used uninitialized wherever they inline (GCC bug 105593, fixed in 13): not our variables.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace specula::internal {
namespace {

// An element of a key or value row as a float: F32 as stored, F16 converted (exactly: every half is a float), so
// the F16 kernels below compute what the F32 ones compute on the converted rows, bit for bit.
inline float elem(const float *p, size_t i) { return p[i]; }
inline float elem(const uint16_t *p, size_t i) { return half_to_float(p[i]); }

// The reference: per key, eight lane sums over the first hd & ~7 elements (lane l takes elements l, l + 8, ...) each
// a chain of fused multiply-adds, the tail into lane 0, then the pairwise reduction; per output element, one fused
// multiply-add per key in key order. Fused, because a multiply-add is one instruction where a multiply and an add
// are two, and attention at long contexts is bound by them; std::fma is exact on every machine, so this stays the
// reference for the SIMD copies bit for bit.
// The pairwise reduction of eight lane sums, the one every kernel ends with.
inline float reduce_lanes(const float *s) { return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); }

template <class T> float score_scalar(const float *q, int32_t hd, const T *kt) {
    float sum[8] = {};
    int32_t i = 0;
    for (; i + 8 <= hd; i += 8)
        for (int l = 0; l < 8; ++l) sum[l] = std::fma(elem(kt, size_t(i + l)), q[i + l], sum[l]);
    for (; i < hd; ++i) sum[0] = std::fma(elem(kt, size_t(i)), q[i], sum[0]);
    return reduce_lanes(sum);
}

template <class T>
void scores_scalar(const float *const *q, int32_t rows, int32_t hd, float scale, const T *k, size_t stride, int32_t n, float *scores,
                   size_t ld) {
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t t = 0; t < n; ++t) scores[size_t(r) * ld + size_t(t)] = score_scalar(q[r], hd, k + size_t(t) * stride) * scale;
}

template <class T>
void accumulate_scalar(float *const *out, int32_t rows, int32_t hd, const float *weights, size_t ld, const T *v, size_t stride, int32_t n) {
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t t = 0; t < n; ++t) {
            const float w = weights[size_t(r) * ld + size_t(t)];
            const T *vt = v + size_t(t) * stride;
            for (int32_t j = 0; j < hd; ++j) out[r][j] = std::fma(w, elem(vt, j), out[r][j]);
        }
}

// The 512-bit kernels (and AVX-512VL's 32 registers for the 256-bit ones): SIMD level avx512 and above.
bool use_avx512() {
#ifdef SPECULA_ATTENTION_AVX2
    return active_cpu_isa() >= CpuIsa::Avx512Vnni;
#else
    return false;
#endif
}

// exp(x) for x <= 0 (Cephes expf): x = n ln2 + r, |r| <= ln2 / 2, exp(r) by a degree-7 polynomial, times 2^n.
// Every step is one IEEE multiply or add (no FMA), so the AVX2 copy below computes the same bits lane by lane.
constexpr float kExpLow = -87.0f;  // below: 0 (2^n would leave the normal range)
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

float exp_nonpositive(float x) {
    if (!(x >= kExpLow)) return 0.0f;
    const float n = std::nearbyint(x * kLog2e);
    float r = x - n * kLn2Hi;
    r = r - n * kLn2Lo;
    const float z = r * r;
    float p = kP0 * r + kP1;
    p = p * r + kP2;
    p = p * r + kP3;
    p = p * r + kP4;
    p = p * r + kP5;
    const float y = p * z + r + 1.0f;
    // n outside int32 (x = +inf or absurdly large: scores that are not finite, from a model or a restored KV cache
    // holding inf) made int32_t(n) undefined (found by fuzzing: tests/fuzz/regressions/snapshot_load/
    // kv-inf-exp-int-conversion). Converted as _mm256_cvtps_epi32 does (0x80000000, "integer indefinite"), so this
    // stays the AVX2 lane's result bit for bit (NaN for +inf).
    const int32_t ni = int32_indefinite(n);
    const uint32_t bits = uint32_t(ni + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, 4);
    return y * scale;
}

float exp_weights_scalar(float *scores, int32_t n, float max) {
    float lane[8] = {};
    for (int32_t t = 0; t < n; ++t) {
        scores[t] = exp_nonpositive(scores[t] - max);
        lane[t % 8] += scores[t];
    }
    return reduce_lanes(lane);
}

#ifdef SPECULA_ATTENTION_AVX2
__attribute__((target("avx2"))) __m256 exp_nonpositive8(__m256 x) {
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLow), _CMP_GE_OQ);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
    const __m256 z = _mm256_mul_ps(r, r);
    __m256 p = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(kP0), r), _mm256_set1_ps(kP1));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kP5));
    const __m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, z), r), _mm256_set1_ps(1.0f));
    // n + 127 >= 1 wherever keep is set; elsewhere the lane is masked to 0 below.
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), keep);
}

__attribute__((target("avx2"))) float exp_weights_avx2(float *scores, int32_t n, float max) {
    const __m256 m = _mm256_set1_ps(max);
    __m256 acc = _mm256_setzero_ps();
    int32_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const __m256 w = exp_nonpositive8(_mm256_sub_ps(_mm256_loadu_ps(scores + t), m));
        _mm256_storeu_ps(scores + t, w);
        acc = _mm256_add_ps(acc, w);
    }
    alignas(32) float lane[8];
    _mm256_store_ps(lane, acc);
    for (; t < n; ++t) {  // the tail lane by lane, as the scalar loop (t % 8 == t - (n & ~7))
        scores[t] = exp_nonpositive(scores[t] - max);
        lane[t % 8] += scores[t];
    }
    return reduce_lanes(lane);
}

// The same steps on 16 lanes (AVX-512): each lane's arithmetic is exp_nonpositive8's, so the bits are the same.
__attribute__((target("avx512f"))) __m512 exp_nonpositive16(__m512 x) {
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLow), _CMP_GE_OQ);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(kLn2Hi)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(kLn2Lo)));
    const __m512 z = _mm512_mul_ps(r, r);
    __m512 p = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(kP0), r), _mm512_set1_ps(kP1));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kP5));
    const __m512 y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, z), r), _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(y, _mm512_castsi512_ps(e)));
}

// 16 weights per step; the eight lane sums take the low then the high half, so every lane adds its keys in the
// order the 8-wide loop does (t, t + 8, t + 16, ...).
__attribute__((target("avx512f,avx2"))) float exp_weights_avx512(float *scores, int32_t n, float max) {
    const __m512 m = _mm512_set1_ps(max);
    __m256 acc = _mm256_setzero_ps();
    int32_t t = 0;
    for (; t + 16 <= n; t += 16) {
        const __m512 w = exp_nonpositive16(_mm512_sub_ps(_mm512_loadu_ps(scores + t), m));
        _mm512_storeu_ps(scores + t, w);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(w));
        acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1)));
    }
    if (t + 8 <= n) {
        const __m256 w = exp_nonpositive8(_mm256_sub_ps(_mm256_loadu_ps(scores + t), _mm256_set1_ps(max)));
        _mm256_storeu_ps(scores + t, w);
        acc = _mm256_add_ps(acc, w);
        t += 8;
    }
    alignas(32) float lane[8];
    _mm256_store_ps(lane, acc);
    for (; t < n; ++t) {
        scores[t] = exp_nonpositive(scores[t] - max);
        lane[t % 8] += scores[t];
    }
    return reduce_lanes(lane);
}

// The largest of n >= 1 scores, 16 at a time (the scalar loop's result wherever no score is NaN).
__attribute__((target("avx512f"))) float max_avx512(const float *scores, int32_t n) {
    __m512 m = _mm512_set1_ps(scores[0]);
    int32_t t = 0;
    for (; t + 16 <= n; t += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(scores + t));
    float best = _mm512_reduce_max_ps(m);
    for (; t < n; ++t) best = std::max(best, scores[t]);
    return best;
}

// Eight elements of a key or value row as floats (F16: converted exactly, in the register).
__attribute__((target("avx2,f16c"))) inline __m256 load8(const float *p) { return _mm256_loadu_ps(p); }
__attribute__((target("avx2,f16c"))) inline __m256 load8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

// The reference's reduction ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) of eight keys' lane sums at once, in
// key order: hadd adds adjacent lanes (s0 + s1, s2 + s3 per 128-bit half), a second hadd the pairs, and the halves'
// sums are added last, so every key's score takes exactly the reference's additions.
__attribute__((target("avx2"))) inline __m256 reduce_8x8(const __m256 *a) {
    const __m256 q0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));  // keys 0-3: s0..s3 low, s4..s7 high
    const __m256 q4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(q0123, q4567, 0x20), _mm256_permute2f128_ps(q0123, q4567, 0x31));
}

// R rows' scores of n keys: keys two at a time, each loaded (and converted) once for all R rows, one 8-lane
// register per row and key holding exactly the reference's lane sums; every eight keys' sums are reduced in
// registers. The tail elements (hd % 8) go into lane 0 as in the reference.
// KEYS keys per pass: 2 with AVX2's 16 registers (8 accumulators for 4 rows), 4 where AVX-512VL gives 256-bit
// operations 32 registers: 16 independent chains instead of 8 hide the multiply-add latency. The keys per pass do
// not change any key's arithmetic.
template <class T, int R, int KEYS>
[[gnu::always_inline]] inline __attribute__((target("avx2,fma,f16c"))) void scores_body(const float *const *q, int32_t hd, float scale, const T *k,
                                                                                         size_t stride, int32_t n, float *scores, size_t ld) {
    const int32_t body = hd & ~7;
    const __m256 vscale = _mm256_set1_ps(scale);
    alignas(32) float lanes[R][8][8];
    for (int32_t t0 = 0; t0 < n; t0 += 8) {
        const int32_t m = std::min<int32_t>(8, n - t0);
        for (int32_t p = 0; p < m; p += KEYS) {
            const T *kp[KEYS];
            for (int c = 0; c < KEYS; ++c) kp[c] = k + size_t(t0 + std::min(p + c, m - 1)) * stride;  // past the last key: it again, not kept
            __m256 a[KEYS][R];
            for (int c = 0; c < KEYS; ++c)
                for (int r = 0; r < R; ++r) a[c][r] = _mm256_setzero_ps();
            for (int32_t i = 0; i < body; i += 8) {
                __m256 x[KEYS];
                for (int c = 0; c < KEYS; ++c) x[c] = load8(kp[c] + i);
                for (int r = 0; r < R; ++r) {
                    const __m256 qv = _mm256_loadu_ps(q[r] + i);
                    for (int c = 0; c < KEYS; ++c) a[c][r] = _mm256_fmadd_ps(x[c], qv, a[c][r]);
                }
            }
            for (int c = 0; c < KEYS; ++c)
                if (p + c < m)
                    for (int r = 0; r < R; ++r) _mm256_store_ps(lanes[r][p + c], a[c][r]);
        }
        if (body < hd)
            for (int r = 0; r < R; ++r)
                for (int32_t p = 0; p < m; ++p) {
                    const T *kt = k + size_t(t0 + p) * stride;
                    for (int32_t i = body; i < hd; ++i) lanes[r][p][0] = std::fma(elem(kt, i), q[r][i], lanes[r][p][0]);
                }
        for (int r = 0; r < R; ++r) {
            float *out = scores + size_t(r) * ld + size_t(t0);
            if (m == 8) {
                __m256 a[8];
                for (int p = 0; p < 8; ++p) a[p] = _mm256_load_ps(lanes[r][p]);
                _mm256_storeu_ps(out, _mm256_mul_ps(reduce_8x8(a), vscale));
            } else {
                for (int32_t p = 0; p < m; ++p) out[p] = reduce_lanes(lanes[r][p]) * scale;
            }
        }
    }
}

template <class T, int R>
__attribute__((target("avx2,fma,f16c"))) void scores_avx2(const float *const *q, int32_t hd, float scale, const T *k, size_t stride, int32_t n,
                                                           float *scores, size_t ld) {
    scores_body<T, R, 2>(q, hd, scale, k, stride, n, scores, ld);
}

template <class T, int R>
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"))) void scores_avx512vl(const float *const *q, int32_t hd, float scale, const T *k,
                                                                                 size_t stride, int32_t n, float *scores, size_t ld) {
    scores_body<T, R, 4>(q, hd, scale, k, stride, n, scores, ld);
}

// R rows' out[j] = fma(w_t, v_t[j], out[j]), keys in order: 8 x SLAB outputs of every row held in registers across
// the keys (SLAB 2 with AVX2's 16 registers, 4 with AVX-512VL's 32: 16 independent chains), each value row loaded
// (and converted) once for all R rows. The slab width does not change any element's arithmetic.
template <class T, int R, int SLAB>
[[gnu::always_inline]] inline __attribute__((target("avx2,fma,f16c"))) void accumulate_body(float *const *out, int32_t hd, const float *weights,
                                                                                             size_t ld, const T *v, size_t stride, int32_t n) {
    int32_t j0 = 0;
    for (; j0 + 8 * SLAB <= hd; j0 += 8 * SLAB) {
        __m256 o[SLAB][R];
        for (int c = 0; c < SLAB; ++c)
            for (int r = 0; r < R; ++r) o[c][r] = _mm256_loadu_ps(out[r] + j0 + 8 * c);
        const T *vt = v + j0;
        for (int32_t t = 0; t < n; ++t, vt += stride) {
            __m256 x[SLAB];
            for (int c = 0; c < SLAB; ++c) x[c] = load8(vt + 8 * c);
            for (int r = 0; r < R; ++r) {
                const __m256 w = _mm256_broadcast_ss(weights + size_t(r) * ld + size_t(t));
                for (int c = 0; c < SLAB; ++c) o[c][r] = _mm256_fmadd_ps(w, x[c], o[c][r]);
            }
        }
        for (int c = 0; c < SLAB; ++c)
            for (int r = 0; r < R; ++r) _mm256_storeu_ps(out[r] + j0 + 8 * c, o[c][r]);
    }
    for (; j0 + 8 <= hd; j0 += 8) {
        __m256 o[R];
        for (int r = 0; r < R; ++r) o[r] = _mm256_loadu_ps(out[r] + j0);
        for (int32_t t = 0; t < n; ++t) {
            const __m256 x = load8(v + size_t(t) * stride + j0);
            for (int r = 0; r < R; ++r) o[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(weights + size_t(r) * ld + size_t(t)), x, o[r]);
        }
        for (int r = 0; r < R; ++r) _mm256_storeu_ps(out[r] + j0, o[r]);
    }
    if (j0 < hd)
        for (int r = 0; r < R; ++r)
            for (int32_t t = 0; t < n; ++t) {
                const float w = weights[size_t(r) * ld + size_t(t)];
                const T *vt = v + size_t(t) * stride;
                for (int32_t j = j0; j < hd; ++j) out[r][j] = std::fma(w, elem(vt, j), out[r][j]);
            }
}


template <class T, int R>
__attribute__((target("avx2,fma,f16c"))) void accumulate_avx2(float *const *out, int32_t hd, const float *weights, size_t ld, const T *v,
                                                               size_t stride, int32_t n) {
    accumulate_body<T, R, 2>(out, hd, weights, ld, v, stride, n);
}

template <class T, int R>
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl"))) void accumulate_avx512vl(float *const *out, int32_t hd, const float *weights, size_t ld,
                                                                                    const T *v, size_t stride, int32_t n) {
    accumulate_body<T, R, 4>(out, hd, weights, ld, v, stride, n);
}

// Calls f(std::integral_constant<int, R>, r0) for each pass of R <= kAttentionRowsAtOnce rows from row r0 on.
template <class F> void for_row_passes(int32_t rows, F &&f) {
    for (int32_t r0 = 0; r0 < rows; r0 += kAttentionRowsAtOnce) {
        switch (std::min(rows - r0, kAttentionRowsAtOnce)) {
        case 1: f(std::integral_constant<int, 1>{}, r0); break;
        case 2: f(std::integral_constant<int, 2>{}, r0); break;
        case 3: f(std::integral_constant<int, 3>{}, r0); break;
        default: f(std::integral_constant<int, 4>{}, r0); break;
        }
    }
}

template <class T>
void scores_avx2_rows(const float *const *q, int32_t rows, int32_t hd, float scale, const T *k, size_t stride, int32_t n, float *scores,
                      size_t ld) {
    const bool vl = use_avx512();
    for_row_passes(rows, [&](auto r, int32_t r0) {
        if (vl) scores_avx512vl<T, r>(q + r0, hd, scale, k, stride, n, scores + size_t(r0) * ld, ld);
        else scores_avx2<T, r>(q + r0, hd, scale, k, stride, n, scores + size_t(r0) * ld, ld);
    });
}

template <class T>
void accumulate_avx2_rows(float *const *out, int32_t rows, int32_t hd, const float *weights, size_t ld, const T *v, size_t stride, int32_t n) {
    const bool vl = use_avx512();
    for_row_passes(rows, [&](auto r, int32_t r0) {
        if (vl) accumulate_avx512vl<T, r>(out + r0, hd, weights + size_t(r0) * ld, ld, v, stride, n);
        else accumulate_avx2<T, r>(out + r0, hd, weights + size_t(r0) * ld, ld, v, stride, n);
    });
}
#endif

#ifdef SPECULA_ATTENTION_AVX2
// Rows in lanes: KEYS keys per pass, each key's eight lane sums eight registers of 16 rows (24 accumulators for 3
// keys), the queries' element i loaded once for the KEYS keys, each key element a broadcast folded into its
// multiply-add. The tail elements (hd % 8) go into lane sum 0, the reduction is the reference's, then the scale.
// F16 rows (H non-null) are converted on the way, keys into kf and values into vf (rows hd apart), a few keys at a
// time between the multiply-adds: one streaming pass over the cache, and the rows later chunks read as F32.
__attribute__((target("avx512f,avx2,f16c"))) inline void halves_row(const uint16_t *src, int32_t hd, float *dst) {
    int32_t i = 0;
    for (; i + 16 <= hd; i += 16) _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + i))));
    for (; i < hd; ++i) dst[i] = half_to_float(src[i]);
}

template <class H>
__attribute__((target("avx512f,avx2,f16c"))) void lanes_scores_avx512(const float *qt, int32_t hd, float scale, const float *k, size_t stride,
                                                                       int32_t n, float *st, const H *k16, const H *v16, float *kf, float *vf) {
    constexpr int KEYS = 3;
    static_assert(KEYS - 1 <= kLaneScoreSlack, "every pass stores KEYS scores");
    const int32_t body = hd & ~7;
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int32_t t0 = 0; t0 < n; t0 += KEYS) {
        const int32_t m = std::min<int32_t>(KEYS, n - t0);
        if constexpr (!std::is_same_v<H, float>)
            for (int c = 0; c < m; ++c) {
                // The next block's rows (the cache is head-major: they follow): fetched while this one computes.
                const size_t ahead = size_t(t0 + c + n) * stride;
                for (int32_t b = 0; b < hd * 2; b += 64) {
                    _mm_prefetch(reinterpret_cast<const char *>(k16 + ahead) + b, _MM_HINT_T0);
                    _mm_prefetch(reinterpret_cast<const char *>(v16 + ahead) + b, _MM_HINT_T0);
                }
                halves_row(k16 + size_t(t0 + c) * stride, hd, kf + size_t(t0 + c) * size_t(hd));
                halves_row(v16 + size_t(t0 + c) * stride, hd, vf + size_t(t0 + c) * size_t(hd));
            }
        const float *keys = std::is_same_v<H, float> ? k : kf;
        const size_t kstride = std::is_same_v<H, float> ? stride : size_t(hd);
        const float *kp[KEYS];
        for (int c = 0; c < KEYS; ++c) kp[c] = keys + size_t(t0 + std::min(c, m - 1)) * kstride;  // past the last key: it again, not kept
        __m512 a[KEYS][8];
        for (int c = 0; c < KEYS; ++c)
            for (int l = 0; l < 8; ++l) a[c][l] = _mm512_setzero_ps();
        for (int32_t i = 0; i < body; i += 8)
            for (int l = 0; l < 8; ++l) {
                __m512 x = _mm512_loadu_ps(qt + size_t(i + l) * kLaneRows);
                asm("" : "+v"(x));  // once in a register for the KEYS keys (as a memory operand it would be loaded KEYS times)
                for (int c = 0; c < KEYS; ++c) a[c][l] = _mm512_fmadd_ps(_mm512_set1_ps(kp[c][i + l]), x, a[c][l]);
            }
        for (int32_t i = body; i < hd; ++i) {
            const __m512 x = _mm512_loadu_ps(qt + size_t(i) * kLaneRows);
            for (int c = 0; c < KEYS; ++c) a[c][0] = _mm512_fmadd_ps(_mm512_set1_ps(kp[c][i]), x, a[c][0]);
        }
        // Every pass reduces and stores all KEYS keys (st has room for KEYS - 1 more; those past n are rewritten or
        // unused): a reduction over a run-time count would index the accumulators at run time and keep them in memory.
        for (int c = 0; c < KEYS; ++c) {
            const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[c][0], a[c][1]), _mm512_add_ps(a[c][2], a[c][3])),
                                           _mm512_add_ps(_mm512_add_ps(a[c][4], a[c][5]), _mm512_add_ps(a[c][6], a[c][7])));
            _mm512_storeu_ps(st + size_t(t0 + c) * kLaneRows, _mm512_mul_ps(s, vscale));
        }
    }
}

__attribute__((target("avx512f"))) void lanes_softmax_avx512(float *st, int32_t n, uint32_t mask, float *m, float *l, float *ot, int32_t hd) {
    const __mmask16 keep = __mmask16(mask);
    // The block's max per lane (fold's scores_max: the same value wherever no score is NaN).
    __m512 bm = _mm512_loadu_ps(st);
    for (int32_t t = 1; t < n; ++t) bm = _mm512_max_ps(bm, _mm512_loadu_ps(st + size_t(t) * kLaneRows));
    const __m512 old = _mm512_loadu_ps(m);
    const __mmask16 raise = _mm512_mask_cmp_ps_mask(keep, bm, old, _CMP_GT_OQ);
    if (raise) {
        alignas(64) float mv[16], bv[16], rv[16];
        _mm512_store_ps(mv, old);
        _mm512_store_ps(bv, bm);
        bool rescale = false;
        for (int r = 0; r < 16; ++r) {
            rv[r] = 1.0f;
            if ((raise >> r & 1) && mv[r] != -INFINITY) rv[r] = std::exp(mv[r] - bv[r]), rescale = true;
        }
        if (rescale) {
            const __m512 rr = _mm512_load_ps(rv);
            for (int32_t j = 0; j < hd; ++j) _mm512_storeu_ps(ot + size_t(j) * kLaneRows, _mm512_mul_ps(_mm512_loadu_ps(ot + size_t(j) * kLaneRows), rr));
            _mm512_storeu_ps(l, _mm512_mul_ps(_mm512_loadu_ps(l), rr));
        }
        _mm512_storeu_ps(m, _mm512_mask_mov_ps(old, raise, bm));
    }
    // The weights and their eight lane sums by t % 8, reduced pairwise, as exp_weights.
    const __m512 mx = _mm512_loadu_ps(m);
    __m512 s[8];
    for (int c = 0; c < 8; ++c) s[c] = _mm512_setzero_ps();
    for (int32_t t = 0; t < n; ++t) {
        const __m512 w = exp_nonpositive16(_mm512_sub_ps(_mm512_loadu_ps(st + size_t(t) * kLaneRows), mx));
        _mm512_storeu_ps(st + size_t(t) * kLaneRows, w);
        s[t % 8] = _mm512_add_ps(s[t % 8], w);
    }
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])),
                                     _mm512_add_ps(_mm512_add_ps(s[4], s[5]), _mm512_add_ps(s[6], s[7])));
    const __m512 lv = _mm512_loadu_ps(l);
    _mm512_storeu_ps(l, _mm512_mask_add_ps(lv, keep, lv, sum));
}

// J outputs per pass held in registers across the keys, each value element a broadcast into 16 rows' multiply-add.
template <int J>
__attribute__((target("avx512f"))) void lanes_accumulate_j(float *ot, const float *wt, const float *v, size_t stride, int32_t n, __mmask16 keep) {
    __m512 o[J];
    for (int c = 0; c < J; ++c) o[c] = _mm512_loadu_ps(ot + size_t(c) * kLaneRows);
    for (int32_t t = 0; t < n; ++t) {
        __m512 w = _mm512_loadu_ps(wt + size_t(t) * kLaneRows);
        asm("" : "+v"(w));
        const float *vt = v + size_t(t) * stride;
        // Unmasked, so each value element is a broadcast folded into the multiply-add (a masked one takes a
        // separate broadcast); the lanes outside keep are not stored back.
        for (int c = 0; c < J; ++c) o[c] = _mm512_fmadd_ps(w, _mm512_set1_ps(vt[c]), o[c]);
    }
    for (int c = 0; c < J; ++c) _mm512_mask_storeu_ps(ot + size_t(c) * kLaneRows, keep, o[c]);
}

__attribute__((target("avx512f"))) void lanes_accumulate_avx512(float *ot, int32_t hd, const float *wt, const float *v, size_t stride, int32_t n,
                                                                 uint32_t mask) {
    const __mmask16 keep = __mmask16(mask);
    int32_t j = 0;
    for (; j + 16 <= hd; j += 16) lanes_accumulate_j<16>(ot + size_t(j) * kLaneRows, wt, v + j, stride, n, keep);
    for (; j + 4 <= hd; j += 4) lanes_accumulate_j<4>(ot + size_t(j) * kLaneRows, wt, v + j, stride, n, keep);
    for (; j < hd; ++j) lanes_accumulate_j<1>(ot + size_t(j) * kLaneRows, wt, v + j, stride, n, keep);
}
#endif

bool use_avx2() {
#ifdef SPECULA_ATTENTION_AVX2
    return active_cpu_isa() >= CpuIsa::Avx2;
#else
    return false;
#endif
}

template <class T>
void scores_rows(const float *const *q, int32_t rows, int32_t hd, float scale, const T *k, size_t stride, int32_t n, float *scores,
                 size_t ld) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx2()) return scores_avx2_rows(q, rows, hd, scale, k, stride, n, scores, ld);
#endif
    scores_scalar(q, rows, hd, scale, k, stride, n, scores, ld);
}

template <class T>
void accumulate_rows(float *const *out, int32_t rows, int32_t hd, const float *weights, size_t ld, const T *v, size_t stride, int32_t n) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx2()) return accumulate_avx2_rows(out, rows, hd, weights, ld, v, stride, n);
#endif
    accumulate_scalar(out, rows, hd, weights, ld, v, stride, n);
}

}  // namespace

void attention_scores(const float *const *q, int32_t rows, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores,
                      size_t ld) {
    scores_rows(q, rows, hd, scale, k, stride, n, scores, ld);
}
void attention_scores(const float *const *q, int32_t rows, int32_t hd, float scale, const uint16_t *k, size_t stride, int32_t n,
                      float *scores, size_t ld) {
    scores_rows(q, rows, hd, scale, k, stride, n, scores, ld);
}
void accumulate_weighted(float *const *out, int32_t rows, int32_t hd, const float *weights, size_t ld, const float *v, size_t stride,
                         int32_t n) {
    accumulate_rows(out, rows, hd, weights, ld, v, stride, n);
}
void accumulate_weighted(float *const *out, int32_t rows, int32_t hd, const float *weights, size_t ld, const uint16_t *v, size_t stride,
                         int32_t n) {
    accumulate_rows(out, rows, hd, weights, ld, v, stride, n);
}

bool attention_lanes_available() { return use_avx512(); }

void lanes_transpose_queries(const float *const *q, int32_t rows, int32_t hd, float *qt) {
    for (int32_t i = 0; i < hd; ++i)
        for (int32_t r = 0; r < kLaneRows; ++r) qt[size_t(i) * kLaneRows + size_t(r)] = r < rows ? q[r][i] : 0.0f;
}

// Without AVX-512 the lanes are plain loops over the rows: the reference's arithmetic, lane by lane.
void lanes_scores(const float *qt, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *st) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx512()) return lanes_scores_avx512<float>(qt, hd, scale, k, stride, n, st, nullptr, nullptr, nullptr, nullptr);
#endif
    const int32_t body = hd & ~7;
    for (int32_t r = 0; r < kLaneRows; ++r)
        for (int32_t t = 0; t < n; ++t) {
            const float *kt = k + size_t(t) * stride;
            float sum[8] = {};
            for (int32_t i = 0; i < hd; ++i) {
                float &acc = sum[i < body ? i % 8 : 0];
                acc = std::fma(kt[i], qt[size_t(i) * kLaneRows + size_t(r)], acc);
            }
            st[size_t(t) * kLaneRows + size_t(r)] = reduce_lanes(sum) * scale;
        }
}
void lanes_scores(const float *qt, int32_t hd, float scale, const uint16_t *k, const uint16_t *v, size_t stride, int32_t n, float *st, float *kf,
                  float *vf) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx512()) return lanes_scores_avx512<uint16_t>(qt, hd, scale, nullptr, stride, n, st, k, v, kf, vf);
#endif
    for (int32_t t = 0; t < n; ++t)
        for (int32_t i = 0; i < hd; ++i) {
            kf[size_t(t) * size_t(hd) + size_t(i)] = half_to_float(k[size_t(t) * stride + size_t(i)]);
            vf[size_t(t) * size_t(hd) + size_t(i)] = half_to_float(v[size_t(t) * stride + size_t(i)]);
        }
    lanes_scores(qt, hd, scale, kf, size_t(hd), n, st);
}
void lanes_softmax(float *st, int32_t n, uint32_t mask, float *m, float *l, float *ot, int32_t hd) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx512()) return lanes_softmax_avx512(st, n, mask, m, l, ot, hd);
#endif
    for (int32_t r = 0; r < kLaneRows; ++r) {
        const bool keep = mask >> r & 1;
        float bm = st[size_t(r)];
        for (int32_t t = 1; t < n; ++t) bm = std::max(bm, st[size_t(t) * kLaneRows + size_t(r)]);
        if (keep && bm > m[r]) {
            if (m[r] != -INFINITY) {
                const float rr = std::exp(m[r] - bm);
                for (int32_t j = 0; j < hd; ++j) ot[size_t(j) * kLaneRows + size_t(r)] *= rr;
                l[r] *= rr;
            }
            m[r] = bm;
        }
        float lane[8] = {};
        for (int32_t t = 0; t < n; ++t) {
            float &w = st[size_t(t) * kLaneRows + size_t(r)];
            w = exp_nonpositive(w - m[r]);
            lane[t % 8] += w;
        }
        if (keep) l[r] += reduce_lanes(lane);
    }
}
void lanes_accumulate(float *ot, int32_t hd, const float *wt, const float *v, size_t stride, int32_t n, uint32_t mask) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx512()) return lanes_accumulate_avx512(ot, hd, wt, v, stride, n, mask);
#endif
    for (int32_t r = 0; r < kLaneRows; ++r) {
        if (!(mask >> r & 1)) continue;
        for (int32_t t = 0; t < n; ++t)
            for (int32_t j = 0; j < hd; ++j) {
                float &o = ot[size_t(j) * kLaneRows + size_t(r)];
                o = std::fma(wt[size_t(t) * kLaneRows + size_t(r)], v[size_t(t) * stride + size_t(j)], o);
            }
    }
}

void attention_scores(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores) {
    attention_scores(&q, 1, hd, scale, k, stride, n, scores, size_t(n));
}
void attention_scores(const float *q, int32_t hd, float scale, const uint16_t *k, size_t stride, int32_t n, float *scores) {
    attention_scores(&q, 1, hd, scale, k, stride, n, scores, size_t(n));
}
void accumulate_weighted(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n) {
    accumulate_weighted(&out, 1, hd, weights, size_t(n), v, stride, n);
}
void accumulate_weighted(float *out, int32_t hd, const float *weights, const uint16_t *v, size_t stride, int32_t n) {
    accumulate_weighted(&out, 1, hd, weights, size_t(n), v, stride, n);
}

float exp_weights(float *scores, int32_t n, float max) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx512()) return exp_weights_avx512(scores, n, max);
    if (use_avx2()) return exp_weights_avx2(scores, n, max);
#endif
    return exp_weights_scalar(scores, n, max);
}

float scores_max(const float *scores, int32_t n) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx512()) return max_avx512(scores, n);
#endif
    float best = scores[0];
    for (int32_t t = 1; t < n; ++t) best = std::max(best, scores[t]);
    return best;
}

namespace attention_kernels_testing {
float exp_weights_reference(float *scores, int32_t n, float max) { return exp_weights_scalar(scores, n, max); }
void scores_reference(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores) {
    scores_scalar(&q, 1, hd, scale, k, stride, n, scores, size_t(n));
}
void accumulate_reference(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n) {
    accumulate_scalar(&out, 1, hd, weights, size_t(n), v, stride, n);
}
}  // namespace attention_kernels_testing

}  // namespace specula::internal
