// The activations' conversion to the packed kernels' dot types for AVX2 (compiled with -mavx2 -mfma -mf16c): eight
// values per register, byte for byte what the scalar conversions of formats/ write. The same steps as
// convert_avx512.cpp (which says why each gives the scalar bits); AVX2 lacks VPMOVDB, so each int32's low byte is
// picked with a byte shuffle (a truncation, as the scalar cast: PACKSSDW would saturate a NaN's 0x80000000).
// Only <immintrin.h> and plain structs here (see packed_gemm.h).
#include "packed_gemm.h"

#include "gguf/tensor_type.h"  // an enum and declarations only: safe here

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

namespace specula::internal {
namespace {

inline __m256 magnitude(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float max8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

inline int32_t sum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// The low byte of each of eight int32 lanes, in order, stored at q; returned sign-extended.
inline __m256i store_low_bytes(__m256i v, int8_t *q) {
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, -1, -1);
    const __m256i gathered = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, pick), _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    const __m128i bytes = _mm256_castsi256_si128(gathered);
    _mm_storel_epi64(reinterpret_cast<__m128i *>(q), bytes);
    return _mm256_cvtepi8_epi32(bytes);
}

void convert_q8_0(const float *src, int64_t n, uint8_t *dst, int32_t *block_sums) {
    ActQ8_0 *blocks = reinterpret_cast<ActQ8_0 *>(dst);
    for (int64_t b = 0; b < n / 32; ++b) {
        const float *x = src + b * 32;
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 32; i += 8) m = _mm256_max_ps(magnitude(_mm256_loadu_ps(x + i)), m);
        const float amax = max8(m);
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        blocks[b].d = uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT), 0));
        const __m256 scale = _mm256_set1_ps(id);
        __m256i sum = _mm256_setzero_si256();
        for (int i = 0; i < 32; i += 8)
            sum = _mm256_add_epi32(sum, store_low_bytes(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale)), blocks[b].qs + i));
        if (block_sums != nullptr) block_sums[b] = sum8(sum);
    }
}

void convert_q8_k(const float *src, int64_t n, uint8_t *dst, int32_t *) {
    ActQ8_K *blocks = reinterpret_cast<ActQ8_K *>(dst);
    for (int64_t b = 0; b < n / 256; ++b) {
        const float *x = src + b * 256;
        ActQ8_K &y = blocks[b];
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 256; i += 8) m = _mm256_max_ps(magnitude(_mm256_loadu_ps(x + i)), m);
        const float amax = max8(m);
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof y);
            continue;
        }
        float max = 0.0f;
        for (int i = 0; i < 256; i += 8) {
            const int at = _mm256_movemask_ps(_mm256_cmp_ps(magnitude(_mm256_loadu_ps(x + i)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (at != 0) {
                max = x[i + __builtin_ctz(unsigned(at))];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 scale = _mm256_set1_ps(iscale);
        for (int g = 0; g < 16; ++g) {
            __m256i sum = _mm256_setzero_si256();
            for (int h = 0; h < 16; h += 8) {
                const __m256i v = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g + h), scale)), _mm256_set1_epi32(127));
                sum = _mm256_add_epi32(sum, store_low_bytes(v, y.qs + 16 * g + h));
            }
            y.bsums[g] = int16_t(sum8(sum));
        }
        y.d = 1.0f / iscale;
    }
}

}  // namespace

PackedConvertFn packed_convert_avx2(uint32_t dot_type) {
    switch (dot_type) {
    case uint32_t(TensorType::Q8_0): return convert_q8_0;
    case uint32_t(TensorType::Q8_K): return convert_q8_k;
    }
    return nullptr;
}

}  // namespace specula::internal

#else  // not x86-64

namespace specula::internal {
PackedConvertFn packed_convert_avx2(uint32_t) { return nullptr; }
}  // namespace specula::internal

#endif
