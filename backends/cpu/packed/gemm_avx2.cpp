// The packed kernels for AVX2 (compiled with -mavx2 -mfma -mf16c): a 16-row group is processed as two halves of
// eight rows, one 256-bit lane per row. VPDPBUSD is emulated with PMADDUBSW + PMADDWD, exact here because every
// unsigned operand is small (4- and 6-bit weights) or, for Q8_0, made so with the sign trick (|w| times x with
// w's sign). Same arithmetic, lane by lane, as the scalar references, so results are bit-identical.
// Only <immintrin.h> and plain structs here: see packed_gemm.h for why.
#include "packed_gemm.h"

#include "gguf/tensor_type.h"  // an enum and declarations only: safe here

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

namespace specula::internal {
namespace {

inline __m256i bcast4(const int8_t *p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
inline __m256i load(const uint8_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
inline __m256 load_halfs(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }
inline __m256i bytes_to_i32(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))); }
inline __m256i sbytes_to_i32(const int8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p))); }
// acc + sum over each 4 bytes of u (unsigned) * s (signed); exact while no pair of products exceeds 32767.
inline __m256i dot4(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

inline void store_rows(float *y, int valid, __m256 v) {
    if (valid >= 8) {
        _mm256_storeu_ps(y, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    for (int i = 0; i < valid; ++i) y[i] = tmp[i];
}

struct Tile {
    const uint8_t *grp;
    const PackedView *w;
    const PackedActs *x;
    int64_t m0;
    float *y;
    int64_t ldy;
    int valid;  // rows of this half that exist
    int half;   // 0: rows 0-7 of the group, 1: rows 8-15
};

template <int NX> void tile_q8_0(const Tile &t) {
    const int64_t kb = t.w->cols / 32;
    const uint16_t *dw = reinterpret_cast<const uint16_t *>(t.grp + t.w->region[0]) + 8 * t.half;
    const uint8_t *qs = t.grp + t.w->region[1] + 32 * t.half;
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    const ActQ8_0 *xb[NX];
    __m256 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_0 *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < kb; ++k) {
        const __m256 dwv = load_halfs(dw + k * 16);
        __m256i w[8], wabs[8];
        for (int q = 0; q < 8; ++q) {
            w[q] = _mm256_xor_si256(load(qs + (k * 8 + q) * 64), flip);  // stored as w + 128
            wabs[q] = _mm256_abs_epi8(w[q]);
        }
        for (int j = 0; j < NX; ++j) {
            const int8_t *xq = xb[j][k].qs;
            __m256i isum = _mm256_setzero_si256();
            for (int q = 0; q < 8; ++q) isum = dot4(isum, wabs[q], _mm256_sign_epi8(bcast4(xq + 4 * q), w[q]));
            const __m256 dprod = _mm256_mul_ps(dwv, _mm256_set1_ps(_cvtsh_ss(xb[j][k].d)));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dprod, acc[j]);
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

template <int NX> void tile_q4_0(const Tile &t) {
    const int64_t kb = t.w->cols / 32;
    const uint16_t *dw = reinterpret_cast<const uint16_t *>(t.grp + t.w->region[0]) + 8 * t.half;
    const uint8_t *qs = t.grp + t.w->region[1] + 32 * t.half;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const ActQ8_0 *xb[NX];
    const int32_t *xs[NX];
    __m256 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_0 *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        xs[j] = t.x->block_sums + (t.m0 + j) * t.x->sums_per_row;
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < kb; ++k) {
        const __m256 dwv = load_halfs(dw + k * 16);
        __m256i lo[4], hi[4];
        for (int q = 0; q < 4; ++q) {
            const __m256i v = load(qs + (k * 4 + q) * 64);
            lo[q] = _mm256_and_si256(v, low4);
            hi[q] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        }
        for (int j = 0; j < NX; ++j) {
            const int8_t *xq = xb[j][k].qs;
            __m256i s = _mm256_setzero_si256();
            for (int q = 0; q < 4; ++q) {
                s = dot4(s, lo[q], bcast4(xq + 4 * q));
                s = dot4(s, hi[q], bcast4(xq + 16 + 4 * q));
            }
            const __m256i isum = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * xs[j][k]));
            const __m256 dprod = _mm256_mul_ps(dwv, _mm256_set1_ps(_cvtsh_ss(xb[j][k].d)));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dprod, acc[j]);
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

// Q4_K, and Q5_K (kFive: each q with its fifth bit, 16) as gemm_avx512.cpp's tile_q45_k.
// Q5_K's fifth bits of quant vector j (0-3) of a high vector's four, moved to bit 4 of each byte (as gemm_avx512.cpp).
template <bool kHigh> inline __m256i fifth_bits(__m256i h, int j) {
    switch (2 * j + (kHigh ? 1 : 0)) {
    case 0: return _mm256_slli_epi16(h, 4);
    case 1: return _mm256_slli_epi16(h, 3);
    case 2: return _mm256_slli_epi16(h, 2);
    case 3: return _mm256_slli_epi16(h, 1);
    case 4: return h;
    case 5: return _mm256_srli_epi16(h, 1);
    case 6: return _mm256_srli_epi16(h, 2);
    default: return _mm256_srli_epi16(h, 3);
    }
}

template <int NX, bool kFive = false> void tile_q45_k(const Tile &t) {
    const int64_t nsb = t.w->cols / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
    const ActQ8_K *xb[NX];
    __m256 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_K *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t *sb = t.grp + size_t(s) * (kFive ? kQ5KSuperBytes : kQ4KSuperBytes);
        __m256i scaled[NX];
        for (int j = 0; j < NX; ++j) scaled[j] = _mm256_setzero_si256();
        for (int p = 0; p < 4; ++p) {
            __m256i slo[NX], shi[NX];
            for (int j = 0; j < NX; ++j) slo[j] = shi[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) {  // unrolled: the fifth bits' shifts are immediates
                const __m256i v = load(sb + kQ4KQuants + (p * 8 + q) * 64 + 32 * t.half);
                __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
                if constexpr (kFive) {
                    const __m256i h = load(sb + kQ5KHigh + (p * 2 + q / 4) * 64 + 32 * t.half);
                    lo = _mm256_or_si256(lo, _mm256_and_si256(fifth_bits<false>(h, q % 4), bit4));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(fifth_bits<true>(h, q % 4), bit4));
                }
                for (int j = 0; j < NX; ++j) {
                    const int8_t *xq = xb[j][s].qs + 64 * p + 4 * q;
                    slo[j] = dot4(slo[j], lo, bcast4(xq));
                    shi[j] = dot4(shi[j], hi, bcast4(xq + 32));
                }
            }
            const __m256i sc_lo = bytes_to_i32(sb + kQ4KScales + (2 * p) * 16 + 8 * t.half);
            const __m256i sc_hi = bytes_to_i32(sb + kQ4KScales + (2 * p + 1) * 16 + 8 * t.half);
            for (int j = 0; j < NX; ++j)
                scaled[j] = _mm256_add_epi32(scaled[j], _mm256_add_epi32(_mm256_mullo_epi32(sc_lo, slo[j]), _mm256_mullo_epi32(sc_hi, shi[j])));
        }
        const __m256 dwv = load_halfs(reinterpret_cast<const uint16_t *>(sb) + 8 * t.half);
        const __m256 dmv = load_halfs(reinterpret_cast<const uint16_t *>(sb + kQ4KDmin) + 8 * t.half);
        __m256i mins[4];  // per pair of sub-blocks: 8 rows x (min, min) as 16-bit values
        for (int p = 0; p < 4; ++p)
            mins[p] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(sb + kQ4KMins + p * 32 + 16 * t.half)));
        for (int j = 0; j < NX; ++j) {
            __m256i msum = _mm256_setzero_si256();
            for (int p = 0; p < 4; ++p) {
                const int16_t *bs = xb[j][s].bsums + 4 * p;
                const uint32_t pair = uint32_t(uint16_t(bs[0] + bs[1])) | (uint32_t(uint16_t(bs[2] + bs[3])) << 16);
                msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mins[p], _mm256_set1_epi32(int32_t(pair))));
            }
            const __m256 dx = _mm256_set1_ps(xb[j][s].d);
            const __m256 a = _mm256_mul_ps(_mm256_mul_ps(dwv, dx), _mm256_cvtepi32_ps(scaled[j]));
            const __m256 b = _mm256_mul_ps(_mm256_mul_ps(dmv, dx), _mm256_cvtepi32_ps(msum));
            acc[j] = _mm256_add_ps(acc[j], _mm256_sub_ps(a, b));
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

template <int NX> void tile_q6_k(const Tile &t) {
    const int64_t nsb = t.w->cols / 256;
    const uint16_t *dw = reinterpret_cast<const uint16_t *>(t.grp + t.w->region[0]) + 8 * t.half;
    const int8_t *scales = reinterpret_cast<const int8_t *>(t.grp + t.w->region[1]) + 8 * t.half;
    const uint8_t *qv = t.grp + t.w->region[2] + 32 * t.half;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    const ActQ8_K *xb[NX];
    __m256 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_K *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t s = 0; s < nsb; ++s) {
        __m256i scaled[NX];
        for (int j = 0; j < NX; ++j) scaled[j] = _mm256_setzero_si256();
        for (int sub = 0; sub < 16; ++sub) {
            const uint8_t *base = qv + (s * 16 + sub) * 192;
            const __m256i ql0 = load(base), ql1 = load(base + 64), qh = load(base + 128);
            const __m256i a = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
            const __m256i b = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                              _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
            const __m256i c = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(qh, bits45));
            const __m256i d = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                              _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
            const __m256i sc = sbytes_to_i32(scales + (s * 16 + sub) * 16);
            for (int j = 0; j < NX; ++j) {
                const int8_t *xq = xb[j][s].qs + 16 * sub;
                __m256i dot = dot4(_mm256_setzero_si256(), a, bcast4(xq));
                dot = dot4(dot, b, bcast4(xq + 4));
                dot = dot4(dot, c, bcast4(xq + 8));
                dot = dot4(dot, d, bcast4(xq + 12));
                dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(32 * int32_t(xb[j][s].bsums[sub])));
                scaled[j] = _mm256_add_epi32(scaled[j], _mm256_mullo_epi32(sc, dot));
            }
        }
        const __m256 dwv = load_halfs(dw + s * 16), zero = _mm256_setzero_ps();
        for (int j = 0; j < NX; ++j) {
            const __m256 dx = _mm256_set1_ps(xb[j][s].d);
            const __m256 a = _mm256_mul_ps(_mm256_mul_ps(dwv, dx), _mm256_cvtepi32_ps(scaled[j]));
            const __m256 b = _mm256_mul_ps(_mm256_mul_ps(zero, dx), zero);
            acc[j] = _mm256_add_ps(acc[j], _mm256_sub_ps(a, b));
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

// f32_vec_dot and Half16::vec_dot: eight partial sums (see gemm_avx512.cpp). Weights stored [col][16 rows].
inline __m256 widen_f32(const uint8_t *p) { return _mm256_loadu_ps(reinterpret_cast<const float *>(p)); }
inline __m256 widen_f16(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }
inline __m256 widen_bf16(const uint8_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))), 16));
}

template <__m256 (*Widen)(const uint8_t *), int kBytes> void tile_float(const Tile &t) {
    const int64_t n = t.w->cols, n8 = n & ~int64_t(7);
    const uint8_t *wp = t.grp + t.w->region[0] + 8 * kBytes * t.half;
    const float *x = reinterpret_cast<const float *>(t.x->xq + size_t(t.m0) * t.x->row_bytes);
    __m256 acc[8];
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i < n8; i += 8)
        for (int k = 0; k < 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(Widen(wp + (i + k) * 16 * kBytes), _mm256_set1_ps(x[i + k])));
    for (; i < n; ++i) acc[0] = _mm256_add_ps(acc[0], _mm256_mul_ps(Widen(wp + i * 16 * kBytes), _mm256_set1_ps(x[i])));
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[4], acc[5]), _mm256_add_ps(acc[6], acc[7]));
    store_rows(t.y, t.valid, _mm256_add_ps(lo, hi));
}
void tile_f32(const Tile &t) { tile_float<widen_f32, 4>(t); }
void tile_f16(const Tile &t) { tile_float<widen_f16, 2>(t); }
void tile_bf16(const Tile &t) { tile_float<widen_bf16, 2>(t); }

// After the four-wide tiles, the two or three activations left share one tile (each weight vector loaded and
// unpacked once for them; one at a time a batch of 2 or 3, a tree of one or two drafted nodes, cost two or three
// passes of compute), and a last one goes alone.
template <void (*T4)(const Tile &), void (*T3)(const Tile &), void (*T2)(const Tile &), void (*T1)(const Tile &), int kWide = 4>
void gemm(const PackedView &w, int64_t group_begin, int64_t group_end, const PackedActs &x, float *y, int64_t ldy) {
    for (int64_t g = group_begin; g < group_end; ++g)
        for (int half = 0; half < 2; ++half) {
            const int64_t r0 = g * 16 + 8 * half;
            if (r0 >= w.rows) break;
            Tile t{w.data + size_t(g) * w.group_bytes, &w, &x, 0, nullptr, ldy, int(w.rows - r0 < 8 ? w.rows - r0 : 8), half};
            int64_t m = 0;
            for (; m + kWide <= x.n; m += kWide) {
                t.m0 = m;
                t.y = y + m * ldy + r0;
                T4(t);
            }
            const int64_t rest = x.n - m;
            if (kWide == 4 && (rest == 2 || rest == 3)) {
                t.m0 = m;
                t.y = y + m * ldy + r0;
                (rest == 3 ? T3 : T2)(t);
                m = x.n;
            }
            for (; m < x.n; ++m) {
                t.m0 = m;
                t.y = y + m * ldy + r0;
                T1(t);
            }
        }
}

}  // namespace

PackedGemmFn packed_gemm_avx2(uint32_t type) {
    switch (type) {
    case uint32_t(TensorType::Q8_0): return gemm<tile_q8_0<4>, tile_q8_0<3>, tile_q8_0<2>, tile_q8_0<1>>;
    case uint32_t(TensorType::Q4_0): return gemm<tile_q4_0<4>, tile_q4_0<3>, tile_q4_0<2>, tile_q4_0<1>>;
    case uint32_t(TensorType::Q4_K): return gemm<tile_q45_k<4>, tile_q45_k<3>, tile_q45_k<2>, tile_q45_k<1>>;
    case uint32_t(TensorType::Q5_K): return gemm<tile_q45_k<4, true>, tile_q45_k<3, true>, tile_q45_k<2, true>, tile_q45_k<1, true>>;
    case uint32_t(TensorType::Q6_K): return gemm<tile_q6_k<4>, tile_q6_k<3>, tile_q6_k<2>, tile_q6_k<1>>;
    // Eight accumulators per activation already fill AVX2's sixteen registers: one activation per tile.
    case uint32_t(TensorType::F32): return gemm<tile_f32, tile_f32, tile_f32, tile_f32, 1>;
    case uint32_t(TensorType::F16): return gemm<tile_f16, tile_f16, tile_f16, tile_f16, 1>;
    case uint32_t(TensorType::BF16): return gemm<tile_bf16, tile_bf16, tile_bf16, tile_bf16, 1>;
    }
    return nullptr;
}

}  // namespace specula::internal

#else  // not x86-64: no kernels at this level

namespace specula::internal {
PackedGemmFn packed_gemm_avx2(uint32_t) { return nullptr; }
}  // namespace specula::internal

#endif
