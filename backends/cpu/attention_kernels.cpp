#include "attention_kernels.h"

#include "cpu_isa.h"
#include "formats/half.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SPECULA_ATTENTION_AVX2 1
#endif

namespace specula::internal {
namespace {

// An element of a key or value row as a float: F32 as stored, F16 converted (exactly: every half is a float), so
// the F16 kernels below compute what the F32 ones compute on the converted rows, bit for bit.
inline float elem(const float *p, int32_t i) { return p[i]; }
inline float elem(const uint16_t *p, int32_t i) { return half_to_float(p[i]); }

// The reference: f32_vec_dot(hd, k_t, q) * scale per key, and the key-ordered weighted sum.
template <class T> void scores_scalar(const float *q, int32_t hd, float scale, const T *k, size_t stride, int32_t n, float *scores) {
    for (int32_t t = 0; t < n; ++t) {
        const T *kt = k + size_t(t) * stride;
        float sum[8] = {};
        int32_t i = 0;
        for (; i + 8 <= hd; i += 8)
            for (int l = 0; l < 8; ++l) sum[l] += elem(kt, i + l) * q[i + l];
        for (; i < hd; ++i) sum[0] += elem(kt, i) * q[i];
        scores[t] = (((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]))) * scale;
    }
}

template <class T> void accumulate_scalar(float *out, int32_t hd, const float *weights, const T *v, size_t stride, int32_t n) {
    for (int32_t t = 0; t < n; ++t) {
        const float w = weights[t];
        const T *vt = v + size_t(t) * stride;
        for (int32_t j = 0; j < hd; ++j) out[j] += w * elem(vt, j);
    }
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
    const int32_t ni = n >= -2147483648.0f && n < 2147483648.0f ? int32_t(n) : INT32_MIN;
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
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
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
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Eight elements of a key or value row as floats (F16: converted exactly, in the register).
__attribute__((target("avx2,f16c"))) inline __m256 load8(const float *p) { return _mm256_loadu_ps(p); }
__attribute__((target("avx2,f16c"))) inline __m256 load8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

// One 8-lane register holds exactly the reference's sum[0..7]: lane l accumulates k[i + l] * q[i + l] with a
// separate multiply and add (no FMA, as the reference under -ffp-contract=off). Four keys at a time for
// independent dependency chains; the tail and the reduction are the reference's, lane by lane.
template <class T>
__attribute__((target("avx2,f16c"))) float reduce8(__m256 acc, const T *kt, const float *q, int32_t from, int32_t hd) {
    alignas(32) float s[8];
    _mm256_store_ps(s, acc);
    for (int32_t i = from; i < hd; ++i) s[0] += elem(kt, i) * q[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

template <class T>
__attribute__((target("avx2,f16c"))) void scores_avx2(const float *q, int32_t hd, float scale, const T *k, size_t stride, int32_t n,
                                                       float *scores) {
    const int32_t body = hd & ~7;
    int32_t t = 0;
    for (; t + 4 <= n; t += 4) {
        const T *k0 = k + size_t(t) * stride, *k1 = k0 + stride, *k2 = k1 + stride, *k3 = k2 + stride;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int32_t i = 0; i < body; i += 8) {
            const __m256 qv = _mm256_loadu_ps(q + i);
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(load8(k0 + i), qv));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(load8(k1 + i), qv));
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(load8(k2 + i), qv));
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(load8(k3 + i), qv));
        }
        scores[t] = reduce8(a0, k0, q, body, hd) * scale;
        scores[t + 1] = reduce8(a1, k1, q, body, hd) * scale;
        scores[t + 2] = reduce8(a2, k2, q, body, hd) * scale;
        scores[t + 3] = reduce8(a3, k3, q, body, hd) * scale;
    }
    for (; t < n; ++t) {
        const T *kt = k + size_t(t) * stride;
        __m256 a = _mm256_setzero_ps();
        for (int32_t i = 0; i < body; i += 8) a = _mm256_add_ps(a, _mm256_mul_ps(load8(kt + i), _mm256_loadu_ps(q + i)));
        scores[t] = reduce8(a, kt, q, body, hd) * scale;
    }
}

// out[j] += w_t * v_t[j], keys in order, with 64 outputs held in registers across all keys.
template <class T>
__attribute__((target("avx2,f16c"))) void accumulate_avx2(float *out, int32_t hd, const float *weights, const T *v, size_t stride,
                                                           int32_t n) {
    int32_t j0 = 0;
    for (; j0 + 64 <= hd; j0 += 64) {
        __m256 o[8];
        for (int r = 0; r < 8; ++r) o[r] = _mm256_loadu_ps(out + j0 + 8 * r);
        for (int32_t t = 0; t < n; ++t) {
            const __m256 w = _mm256_set1_ps(weights[t]);
            const T *vt = v + size_t(t) * stride + j0;
            for (int r = 0; r < 8; ++r) o[r] = _mm256_add_ps(o[r], _mm256_mul_ps(w, load8(vt + 8 * r)));
        }
        for (int r = 0; r < 8; ++r) _mm256_storeu_ps(out + j0 + 8 * r, o[r]);
    }
    for (; j0 + 8 <= hd; j0 += 8) {
        __m256 o = _mm256_loadu_ps(out + j0);
        for (int32_t t = 0; t < n; ++t)
            o = _mm256_add_ps(o, _mm256_mul_ps(_mm256_set1_ps(weights[t]), load8(v + size_t(t) * stride + j0)));
        _mm256_storeu_ps(out + j0, o);
    }
    if (j0 < hd) {
        for (int32_t t = 0; t < n; ++t) {
            const T *vt = v + size_t(t) * stride;
            for (int32_t j = j0; j < hd; ++j) out[j] += weights[t] * elem(vt, j);
        }
    }
}
#endif

bool use_avx2() {
#ifdef SPECULA_ATTENTION_AVX2
    return active_cpu_isa() >= CpuIsa::Avx2;
#else
    return false;
#endif
}

}  // namespace

void attention_scores(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx2()) return scores_avx2(q, hd, scale, k, stride, n, scores);
#endif
    scores_scalar(q, hd, scale, k, stride, n, scores);
}

void attention_scores(const float *q, int32_t hd, float scale, const uint16_t *k, size_t stride, int32_t n, float *scores) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx2()) return scores_avx2(q, hd, scale, k, stride, n, scores);
#endif
    scores_scalar(q, hd, scale, k, stride, n, scores);
}

float exp_weights(float *scores, int32_t n, float max) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx2()) return exp_weights_avx2(scores, n, max);
#endif
    return exp_weights_scalar(scores, n, max);
}

void accumulate_weighted(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx2()) return accumulate_avx2(out, hd, weights, v, stride, n);
#endif
    accumulate_scalar(out, hd, weights, v, stride, n);
}

void accumulate_weighted(float *out, int32_t hd, const float *weights, const uint16_t *v, size_t stride, int32_t n) {
#ifdef SPECULA_ATTENTION_AVX2
    if (use_avx2()) return accumulate_avx2(out, hd, weights, v, stride, n);
#endif
    accumulate_scalar(out, hd, weights, v, stride, n);
}

namespace attention_kernels_testing {
float exp_weights_reference(float *scores, int32_t n, float max) { return exp_weights_scalar(scores, n, max); }
void scores_reference(const float *q, int32_t hd, float scale, const float *k, size_t stride, int32_t n, float *scores) {
    scores_scalar(q, hd, scale, k, stride, n, scores);
}
void accumulate_reference(float *out, int32_t hd, const float *weights, const float *v, size_t stride, int32_t n) {
    accumulate_scalar(out, hd, weights, v, stride, n);
}
}  // namespace attention_kernels_testing

}  // namespace specula::internal
