// The packed kernels for AVX-512 with VNNI (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni): one
// 512-bit lane per row of a 16-row group. Each function reproduces, lane by lane, the integer sums and the float
// operations of the scalar reference kernel in formats/ (named beside it), so results are bit-identical.
// Only <immintrin.h> and plain structs here: see packed_gemm.h for why.
#include "packed_gemm.h"

#include "gguf/tensor_type.h"  // an enum and declarations only: safe here

#if defined(__x86_64__)
// GCC 12 warns inside its own AVX-512 headers (the undefined source of _mm512_cvtepi*_epi32 etc.): a known
// false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace specula::internal {
namespace {
// Decoding streams each weight once: ask for the bytes kPrefetch ahead of each load, so more misses are in flight
// than the out-of-order window alone keeps (it covers fewer bytes for the K-quants, which do more work per byte).
// 4 KiB measured best on the 1B shape (2 threads: 1 KiB 21 tok/s, 4 KiB 24.5 tok/s for Q4_K_M).
constexpr int kPrefetch = 4096;
inline void prefetch(const uint8_t *p) { _mm_prefetch(reinterpret_cast<const char *>(p + kPrefetch), _MM_HINT_T0); }

inline __m512i load(const uint8_t *p) { return _mm512_loadu_si512(p); }
// acc += w (unsigned bytes) . x (the four signed bytes at p in every 32-bit lane), the four bytes read by the
// instruction's own broadcast memory operand: GCC 12 does not fold _mm512_set1_epi32 of a loaded int into VPDPBUSD,
// and a separate VPBROADCASTD per dot product was a third of the Q8_0 tile's instructions.
inline __m512i dpbusd_bcast4(__m512i acc, __m512i w, const int8_t *p) {
    asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t *>(p)));
    return acc;
}
inline __m512 load_halfs(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))); }
inline __m512i bytes_to_i32(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }
inline __m512i sbytes_to_i32(const int8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p))); }

inline void store_rows(float *y, int valid, __m512 v) {
    if (valid == 16) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, __mmask16((1u << valid) - 1), v);
}

struct Tile {
    const uint8_t *grp;  // the group's packed bytes
    const PackedView *w;
    const PackedActs *x;
    int64_t m0;  // first activation row
    float *y;    // &y[m0 * ldy + first row of the group]
    int64_t ldy;
    int valid;  // rows of the group that exist
};

// q8_0_vec_dot: per block isum (exact), sum = fma(float(isum), d_w * d_x, sum).
template <int NX> void tile_q8_0(const Tile &t) {
    const int64_t kb = t.w->cols / 32;
    const uint16_t *dw = reinterpret_cast<const uint16_t *>(t.grp + t.w->region[0]);
    const uint8_t *qs = t.grp + t.w->region[1];
    const ActQ8_0 *xb[NX];
    const int32_t *xs[NX];
    __m512 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_0 *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        xs[j] = t.x->block_sums + (t.m0 + j) * t.x->sums_per_row;
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kb; ++k) {
        const __m512 dwv = load_halfs(dw + k * 16);
        __m512i wv[8];
        for (int q = 0; q < 8; ++q) prefetch(qs + (k * 8 + q) * 64);
        for (int q = 0; q < 8; ++q) wv[q] = load(qs + (k * 8 + q) * 64);
#pragma GCC unroll 16
        for (int j = 0; j < NX; ++j) {  // unrolled: the accumulators stay in registers
            const int8_t *xq = xb[j][k].qs;
            __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
            for (int q = 0; q < 8; q += 2) {
                s0 = dpbusd_bcast4(s0, wv[q], xq + 4 * q);
                s1 = dpbusd_bcast4(s1, wv[q + 1], xq + 4 * q + 4);
            }
            // The weights were stored as w + 128: subtract 128 * sum(x).
            const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(128 * xs[j][k]));
            const __m512 dprod = _mm512_mul_ps(dwv, _mm512_set1_ps(_cvtsh_ss(xb[j][k].d)));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dprod, acc[j]);
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

// q4_0_vec_dot: isum = sum((q - 8) * x) = sum(q * x) - 8 * sum(x); then as Q8_0.
template <int NX> void tile_q4_0(const Tile &t) {
    const int64_t kb = t.w->cols / 32;
    const uint16_t *dw = reinterpret_cast<const uint16_t *>(t.grp + t.w->region[0]);
    const uint8_t *qs = t.grp + t.w->region[1];
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const ActQ8_0 *xb[NX];
    const int32_t *xs[NX];
    __m512 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_0 *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        xs[j] = t.x->block_sums + (t.m0 + j) * t.x->sums_per_row;
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kb; ++k) {
        const __m512 dwv = load_halfs(dw + k * 16);
        __m512i lo[4], hi[4];
        for (int q = 0; q < 4; ++q) {
            prefetch(qs + (k * 4 + q) * 64);
            const __m512i v = load(qs + (k * 4 + q) * 64);
            lo[q] = _mm512_and_si512(v, low4);
            hi[q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
        for (int j = 0; j < NX; ++j) {
            const int8_t *xq = xb[j][k].qs;
            __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
            for (int q = 0; q < 4; ++q) {
                s0 = dpbusd_bcast4(s0, lo[q], xq + 4 * q);
                s1 = dpbusd_bcast4(s1, hi[q], xq + 16 + 4 * q);
            }
            const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(8 * xs[j][k]));
            const __m512 dprod = _mm512_mul_ps(dwv, _mm512_set1_ps(_cvtsh_ss(xb[j][k].d)));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dprod, acc[j]);
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

// Q5_K's fifth bits of quant vector j (0-3) of a high vector's four, moved to bit 4 of each byte (bits 2j: the low
// nibbles' weights, 2j + 1: the high nibbles'; packed_gemm.h). Sixteen-bit shifts: what crosses a byte is masked off.
template <bool kHigh> inline __m512i fifth_bits(__m512i h, int j) {
    switch (2 * j + (kHigh ? 1 : 0)) {
    case 0: return _mm512_slli_epi16(h, 4);
    case 1: return _mm512_slli_epi16(h, 3);
    case 2: return _mm512_slli_epi16(h, 2);
    case 3: return _mm512_slli_epi16(h, 1);
    case 4: return h;
    case 5: return _mm512_srli_epi16(h, 1);
    case 6: return _mm512_srli_epi16(h, 2);
    default: return _mm512_srli_epi16(h, 3);
    }
}

// k_vec_dot<BlockQ4_K>: scaled = sum_s scale_s * (q . x)_s, mins = sum_s min_s * sum(x)_s (both exact), then
// sum += (d_w * d_x) * float(scaled) - (dmin_w * d_x) * float(mins). kFive: Q5_K, each q with its fifth bit (16).
template <int NX, bool kFive = false> void tile_q45_k(const Tile &t) {
    const int64_t nsb = t.w->cols / 256;
    const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
    const ActQ8_K *xb[NX];
    __m512 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_K *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t *sb = t.grp + size_t(s) * (kFive ? kQ5KSuperBytes : kQ4KSuperBytes);
        __m512i scaled[NX];
        for (int j = 0; j < NX; ++j) scaled[j] = _mm512_setzero_si512();
        for (int p = 0; p < 4; ++p) {
            __m512i slo[NX], shi[NX];
            for (int j = 0; j < NX; ++j) slo[j] = shi[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) {  // unrolled: the fifth bits' shifts are immediates
                const uint8_t *qv = sb + kQ4KQuants + (p * 8 + q) * 64;
                prefetch(qv);
                const __m512i v = load(qv);
                __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                if constexpr (kFive) {
                    const uint8_t *hv = sb + kQ5KHigh + (p * 2 + q / 4) * 64;
                    if (q % 4 == 0) prefetch(hv);
                    const __m512i h = load(hv);
                    lo = _mm512_or_si512(lo, _mm512_and_si512(fifth_bits<false>(h, q % 4), bit4));
                    hi = _mm512_or_si512(hi, _mm512_and_si512(fifth_bits<true>(h, q % 4), bit4));
                }
                for (int j = 0; j < NX; ++j) {
                    const int8_t *xq = xb[j][s].qs + 64 * p + 4 * q;
                    slo[j] = dpbusd_bcast4(slo[j], lo, xq);
                    shi[j] = dpbusd_bcast4(shi[j], hi, xq + 32);
                }
            }
            const __m512i sc_lo = bytes_to_i32(sb + kQ4KScales + (2 * p) * 16);
            const __m512i sc_hi = bytes_to_i32(sb + kQ4KScales + (2 * p + 1) * 16);
            for (int j = 0; j < NX; ++j)
                scaled[j] = _mm512_add_epi32(scaled[j], _mm512_add_epi32(_mm512_mullo_epi32(sc_lo, slo[j]), _mm512_mullo_epi32(sc_hi, shi[j])));
        }
        const __m512 dwv = load_halfs(reinterpret_cast<const uint16_t *>(sb)), dmv = load_halfs(reinterpret_cast<const uint16_t *>(sb + kQ4KDmin));
        __m512i mins[4];  // per pair of sub-blocks: 16 rows x (min, min) as 16-bit values
        for (int p = 0; p < 4; ++p) mins[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb + kQ4KMins + p * 32)));
        for (int j = 0; j < NX; ++j) {
            __m512i msum = _mm512_setzero_si512();
            for (int p = 0; p < 4; ++p) {
                const int16_t *bs = xb[j][s].bsums + 4 * p;  // sub-block 2p: bsums 4p, 4p+1; 2p + 1: 4p+2, 4p+3
                const uint32_t pair = uint32_t(uint16_t(bs[0] + bs[1])) | (uint32_t(uint16_t(bs[2] + bs[3])) << 16);
                msum = _mm512_dpwssd_epi32(msum, mins[p], _mm512_set1_epi32(int32_t(pair)));
            }
            const __m512 dx = _mm512_set1_ps(xb[j][s].d);
            const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dwv, dx), _mm512_cvtepi32_ps(scaled[j]));
            const __m512 b = _mm512_mul_ps(_mm512_mul_ps(dmv, dx), _mm512_cvtepi32_ps(msum));
            acc[j] = _mm512_add_ps(acc[j], _mm512_sub_ps(a, b));
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

// k_vec_dot<BlockQ6_K>: (q - 32) . x over each 16 weights = q . x - 32 * bsum; scaled = sum scale_s * that; then
// sum += (d_w * d_x) * float(scaled) - (0 * d_x) * 0 (Q6_K has no minimums; the zero term is kept for the sign of 0).
template <int NX> void tile_q6_k(const Tile &t) {
    const int64_t nsb = t.w->cols / 256;
    const uint16_t *dw = reinterpret_cast<const uint16_t *>(t.grp + t.w->region[0]);
    const int8_t *scales = reinterpret_cast<const int8_t *>(t.grp + t.w->region[1]);
    const uint8_t *qv = t.grp + t.w->region[2];
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
    const ActQ8_K *xb[NX];
    __m512 acc[NX];
    for (int j = 0; j < NX; ++j) {
        xb[j] = reinterpret_cast<const ActQ8_K *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t s = 0; s < nsb; ++s) {
        __m512i scaled[NX];
        for (int j = 0; j < NX; ++j) scaled[j] = _mm512_setzero_si512();
        for (int sub = 0; sub < 16; ++sub) {
            const uint8_t *base = qv + (s * 16 + sub) * 192;
            prefetch(base), prefetch(base + 64), prefetch(base + 128);
            const __m512i ql0 = load(base), ql1 = load(base + 64), qh = load(base + 128);
            const __m512i a = _mm512_or_si512(_mm512_and_si512(ql0, low4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45));
            const __m512i b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), low4),
                                              _mm512_and_si512(_mm512_slli_epi16(qh, 2), bits45));
            const __m512i c = _mm512_or_si512(_mm512_and_si512(ql1, low4), _mm512_and_si512(qh, bits45));
            const __m512i d = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), low4),
                                              _mm512_and_si512(_mm512_srli_epi16(qh, 2), bits45));
            const __m512i sc = sbytes_to_i32(scales + (s * 16 + sub) * 16);
            for (int j = 0; j < NX; ++j) {
                const int8_t *xq = xb[j][s].qs + 16 * sub;
                __m512i dot = dpbusd_bcast4(_mm512_setzero_si512(), a, xq);
                dot = dpbusd_bcast4(dot, b, xq + 4);
                dot = dpbusd_bcast4(dot, c, xq + 8);
                dot = dpbusd_bcast4(dot, d, xq + 12);
                dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(32 * int32_t(xb[j][s].bsums[sub])));
                scaled[j] = _mm512_add_epi32(scaled[j], _mm512_mullo_epi32(sc, dot));
            }
        }
        const __m512 dwv = load_halfs(dw + s * 16), zero = _mm512_setzero_ps();
        for (int j = 0; j < NX; ++j) {
            const __m512 dx = _mm512_set1_ps(xb[j][s].d);
            const __m512 a = _mm512_mul_ps(_mm512_mul_ps(dwv, dx), _mm512_cvtepi32_ps(scaled[j]));
            const __m512 b = _mm512_mul_ps(_mm512_mul_ps(zero, dx), zero);
            acc[j] = _mm512_add_ps(acc[j], _mm512_sub_ps(a, b));
        }
    }
    for (int j = 0; j < NX; ++j) store_rows(t.y + j * t.ldy, t.valid, acc[j]);
}

// f32_vec_dot and Half16::vec_dot: eight partial sums, sum[i % 8] += w[i] * x[i] over the first n & ~7 weights,
// the rest into sum[0], then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)). Weights stored [col][16 rows].
inline __m512 widen_f32(const uint8_t *p) { return _mm512_loadu_ps(reinterpret_cast<const float *>(p)); }
inline __m512 widen_f16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))); }
inline __m512 widen_bf16(const uint8_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))), 16));
}

template <int NX, __m512 (*Widen)(const uint8_t *), int kBytes> void tile_float(const Tile &t) {
    const int64_t n = t.w->cols, n8 = n & ~int64_t(7);
    const uint8_t *wp = t.grp + t.w->region[0];
    const float *x[NX];
    __m512 acc[NX][8];
    for (int j = 0; j < NX; ++j) {
        x[j] = reinterpret_cast<const float *>(t.x->xq + size_t(t.m0 + j) * t.x->row_bytes);
        for (int k = 0; k < 8; ++k) acc[j][k] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i < n8; i += 8)
        for (int k = 0; k < 8; ++k) {
            const __m512 wv = Widen(wp + (i + k) * 16 * kBytes);
            for (int j = 0; j < NX; ++j) acc[j][k] = _mm512_add_ps(acc[j][k], _mm512_mul_ps(wv, _mm512_set1_ps(x[j][i + k])));
        }
    for (; i < n; ++i) {
        const __m512 wv = Widen(wp + i * 16 * kBytes);
        for (int j = 0; j < NX; ++j) acc[j][0] = _mm512_add_ps(acc[j][0], _mm512_mul_ps(wv, _mm512_set1_ps(x[j][i])));
    }
    for (int j = 0; j < NX; ++j) {
        const __m512 lo = _mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]), _mm512_add_ps(acc[j][2], acc[j][3]));
        const __m512 hi = _mm512_add_ps(_mm512_add_ps(acc[j][4], acc[j][5]), _mm512_add_ps(acc[j][6], acc[j][7]));
        store_rows(t.y + j * t.ldy, t.valid, _mm512_add_ps(lo, hi));
    }
}
template <int NX> void tile_f32(const Tile &t) { tile_float<NX, widen_f32, 4>(t); }
template <int NX> void tile_f16(const Tile &t) { tile_float<NX, widen_f16, 2>(t); }
template <int NX> void tile_bf16(const Tile &t) { tile_float<NX, widen_bf16, 2>(t); }

using TileFn = void (*)(const Tile &);

// Runs tiles over every group and every activation: kTiles[n - 1] takes n activations (each weight vector loaded,
// and unpacked, once for the n dot products), the batch in tiles of the widest and what is left in one narrower
// tile, so each group is walked ceil(n / widest) times (a batch of 2 or 3, a tree of one or two drafted nodes, in one
// walk, not two or three). A pair's arithmetic does not depend on how many activations share its tile, so a token's
// logits are the same in a batch of 1 or 128.
template <const auto &kTiles> void gemm(const PackedView &w, int64_t group_begin, int64_t group_end, const PackedActs &x, float *y, int64_t ldy) {
    constexpr int64_t kWidest = int64_t(sizeof(kTiles) / sizeof(kTiles[0]));
    for (int64_t g = group_begin; g < group_end; ++g) {
        const int64_t r0 = g * 16;
        Tile t{w.data + size_t(g) * w.group_bytes, &w, &x, 0, nullptr, ldy, int(w.rows - r0 < 16 ? w.rows - r0 : 16)};
        for (int64_t m = 0; m < x.n;) {
            const int64_t n = x.n - m < kWidest ? x.n - m : kWidest;
            t.m0 = m;
            t.y = y + m * ldy + r0;
            kTiles[size_t(n - 1)](t);
            m += n;
        }
    }
}

// Q8_0's tile holds eight weight vectors and one accumulator per activation, so sixteen activations still fit
// AVX-512's 32 registers: a batch of up to 16 (a verified chain or small tree, a prompt slice 16 rows at a time)
// walks each group once. Two walks of the same group cost more than their dot products: the second finds its bytes
// in cache, so no load from memory overlaps its work. The other quantized types take four (their unpacked weights
// take the registers); the float types keep eight accumulators per activation, so two fill the registers.
constexpr TileFn kQ8_0Tiles[] = {tile_q8_0<1>, tile_q8_0<2>,  tile_q8_0<3>,  tile_q8_0<4>,  tile_q8_0<5>,  tile_q8_0<6>,
                                 tile_q8_0<7>, tile_q8_0<8>,  tile_q8_0<9>,  tile_q8_0<10>, tile_q8_0<11>, tile_q8_0<12>,
                                 tile_q8_0<13>, tile_q8_0<14>, tile_q8_0<15>, tile_q8_0<16>};
constexpr TileFn kQ4_0Tiles[] = {tile_q4_0<1>, tile_q4_0<2>, tile_q4_0<3>, tile_q4_0<4>};
constexpr TileFn kQ4_KTiles[] = {tile_q45_k<1>, tile_q45_k<2>, tile_q45_k<3>, tile_q45_k<4>};
constexpr TileFn kQ5_KTiles[] = {tile_q45_k<1, true>, tile_q45_k<2, true>, tile_q45_k<3, true>, tile_q45_k<4, true>};
constexpr TileFn kQ6_KTiles[] = {tile_q6_k<1>, tile_q6_k<2>, tile_q6_k<3>, tile_q6_k<4>};
constexpr TileFn kF32Tiles[] = {tile_f32<1>, tile_f32<2>};
constexpr TileFn kF16Tiles[] = {tile_f16<1>, tile_f16<2>};
constexpr TileFn kBF16Tiles[] = {tile_bf16<1>, tile_bf16<2>};

}  // namespace

PackedGemmFn packed_gemm_avx512(uint32_t type) {
    switch (type) {
    case uint32_t(TensorType::Q8_0): return gemm<kQ8_0Tiles>;
    case uint32_t(TensorType::Q4_0): return gemm<kQ4_0Tiles>;
    case uint32_t(TensorType::Q4_K): return gemm<kQ4_KTiles>;
    case uint32_t(TensorType::Q5_K): return gemm<kQ5_KTiles>;
    case uint32_t(TensorType::Q6_K): return gemm<kQ6_KTiles>;
    case uint32_t(TensorType::F32): return gemm<kF32Tiles>;
    case uint32_t(TensorType::F16): return gemm<kF16Tiles>;
    case uint32_t(TensorType::BF16): return gemm<kBF16Tiles>;
    }
    return nullptr;
}

}  // namespace specula::internal

#else  // not x86-64: no kernels at this level

namespace specula::internal {
PackedGemmFn packed_gemm_avx512(uint32_t) { return nullptr; }
}  // namespace specula::internal

#endif
