// The activations' conversion to the packed kernels' dot types for AVX-512 (compiled with the AVX-512 flags): 16
// values per register, byte for byte what the scalar conversions of formats/ write (q8_0_from_float with
// q8_0_block_sums, q8_k_from_float). Each decode step converts every matrix's input row, and a prompt slice every
// row of it: with the scalar loops (a libm nearbyint per value) this was ~8% of a Q4_K_M model's prefill.
//   - the largest magnitude: VMAXPS with the running maximum as its second operand skips NaNs as the scalar
//     comparisons do; Q8_K's signed maximum is the first value of that magnitude, as its strict > keeps;
//   - the same products and divisions, rounded to nearest even by VCVTPS2DQ under the default MXCSR (nearbyint);
//     NaN becomes 0x80000000 there as in the scalar cast, and VPMOVDB keeps its low byte as int8_t() does;
//   - the F16 scale by VCVTPS2PH to nearest even, as float_to_half for every value a maximum / 127 can be.
// Only <immintrin.h> and plain structs here (see packed_gemm.h).
#include "packed_gemm.h"

#include "gguf/tensor_type.h"  // an enum and declarations only: safe here

#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see gemm_avx512.cpp)
#include <immintrin.h>

#include <cstring>

namespace specula::internal {
namespace {

inline __m512 magnitude(__m512 v) { return _mm512_abs_ps(v); }

// int8 values of round(x * scale) (the low byte of each int32, as the scalar cast), stored at q; returns them
// sign-extended for the sums.
inline __m512i quantize16(const float *x, __m512 scale, int8_t *q) {
    const __m128i bytes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), scale)));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(q), bytes);
    return _mm512_cvtepi8_epi32(bytes);
}

void convert_q8_0(const float *src, int64_t n, uint8_t *dst, int32_t *block_sums) {
    ActQ8_0 *blocks = reinterpret_cast<ActQ8_0 *>(dst);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float *x = src + b * 32;
        const __m512 m = _mm512_max_ps(magnitude(_mm512_loadu_ps(x)), _mm512_max_ps(magnitude(_mm512_loadu_ps(x + 16)), _mm512_setzero_ps()));
        const float amax = _mm512_reduce_max_ps(m);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        blocks[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const __m512 scale = _mm512_set1_ps(id);
        const __m512i lo = quantize16(x, scale, blocks[b].qs), hi = quantize16(x + 16, scale, blocks[b].qs + 16);
        if (block_sums != nullptr) block_sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(lo, hi));
    }
}

void convert_q8_k(const float *src, int64_t n, uint8_t *dst, int32_t *) {
    ActQ8_K *blocks = reinterpret_cast<ActQ8_K *>(dst);
    for (int64_t b = 0; b < n / 256; ++b) {
        const float *x = src + b * 256;
        ActQ8_K &y = blocks[b];
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < 256; i += 16) m = _mm512_max_ps(magnitude(_mm512_loadu_ps(x + i)), m);
        const float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof y);
            continue;
        }
        float max = 0.0f;
        for (int i = 0; i < 256; i += 16) {
            const __mmask16 at = _mm512_cmp_ps_mask(magnitude(_mm512_loadu_ps(x + i)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (at != 0) {
                max = x[i + __builtin_ctz(at)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 scale = _mm512_set1_ps(iscale);
        for (int g = 0; g < 16; ++g) {
            // min(127, ...) before the byte is taken, as the scalar code (a magnitude of 127.5 cannot occur, NaN can)
            const __m512i v = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), scale)), _mm512_set1_epi32(127));
            const __m128i bytes = _mm512_cvtepi32_epi8(v);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(y.qs + 16 * g), bytes);
            y.bsums[g] = int16_t(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(bytes)));
        }
        y.d = 1.0f / iscale;
    }
}

}  // namespace

PackedConvertFn packed_convert_avx512(uint32_t dot_type) {
    switch (dot_type) {
    case uint32_t(TensorType::Q8_0): return convert_q8_0;
    case uint32_t(TensorType::Q8_K): return convert_q8_k;
    }
    return nullptr;
}

}  // namespace specula::internal

#else  // not x86-64

namespace specula::internal {
PackedConvertFn packed_convert_avx512(uint32_t) { return nullptr; }
}  // namespace specula::internal

#endif
