#include "kv_view.h"

#include "backends/cpu/cpu_isa.h"
#include "formats/half.h"
#include "formats/q8_0.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SPECULA_KV_F16C 1
#endif

namespace specula::internal {
namespace {

#ifdef SPECULA_KV_F16C
// _mm256_cvtph_ps converts exactly (every half is a float), so it equals half_to_float bit for bit.
__attribute__((target("avx2,f16c"))) void halves_to_floats_f16c(const uint16_t *src, int32_t n, float *dst) {
    int32_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + j))));
    for (; j < n; ++j) dst[j] = half_to_float(src[j]);
}
#endif

void halves_to_floats(const uint16_t *src, int32_t n, float *dst) {
#ifdef SPECULA_KV_F16C
    static const bool f16c = active_cpu_isa() >= CpuIsa::Avx2;
    if (f16c) return halves_to_floats_f16c(src, n, dst);
#endif
    for (int32_t j = 0; j < n; ++j) dst[j] = half_to_float_lookup(src[j]);
}

#ifdef SPECULA_KV_F16C
// Whole blocks: each int8 converts exactly and takes one multiply by the block's scale, as in the loop below.
__attribute__((target("avx2,f16c"))) void q8_0_blocks_avx2(const BlockQ8_0 *blocks, int32_t n_blocks, float *dst) {
    for (int32_t b = 0; b < n_blocks; ++b) {
        const __m256 d = _mm256_set1_ps(half_to_float(blocks[b].d));
        for (int32_t i = 0; i < kQ8_0Block; i += 8) {
            const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(blocks[b].qs + i));
            _mm256_storeu_ps(dst + b * kQ8_0Block + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
    }
}
#endif

// Elements [first, first + hd) of one Q8_0 row: each is its block's scale times its int8.
void q8_0_slice(const uint8_t *row, int32_t first, int32_t hd, float *dst) {
    const BlockQ8_0 *blocks = reinterpret_cast<const BlockQ8_0 *>(row);
#ifdef SPECULA_KV_F16C
    static const bool avx2 = active_cpu_isa() >= CpuIsa::Avx2;
    if (avx2 && first % kQ8_0Block == 0 && hd % kQ8_0Block == 0) return q8_0_blocks_avx2(blocks + first / kQ8_0Block, hd / kQ8_0Block, dst);
#endif
    int32_t e = first;
    const int32_t end = first + hd;
    while (e < end) {
        const BlockQ8_0 &b = blocks[e / kQ8_0Block];
        const float d = half_to_float_lookup(b.d);
        const int32_t stop = std::min(end, (e / kQ8_0Block + 1) * kQ8_0Block);
        for (; e < stop; ++e) *dst++ = float(b.qs[e % kQ8_0Block]) * d;
    }
}

}  // namespace

void kv_load_head(const KvView &rows, int32_t first_slot, const int32_t *slots, int32_t count, int32_t first, int32_t hd, float *dst) {
    for (int32_t t = 0; t < count; ++t) {
        const int32_t slot = slots ? slots[t] : first_slot + t;
        float *out = dst + size_t(t) * size_t(hd);
        for (int32_t j = 0; j < hd;) {  // one piece per group the slice touches (attention's slices: one)
            int32_t at = first + j;
            const uint8_t *row = rows.row(slot, at);
            const int32_t n = rows.group_width > 0 ? std::min(hd - j, rows.group_width - at) : hd - j;
            switch (rows.type) {
            case KvType::F32: std::memcpy(out + j, reinterpret_cast<const float *>(row) + at, size_t(n) * sizeof(float)); break;
            case KvType::F16: halves_to_floats(reinterpret_cast<const uint16_t *>(row) + at, n, out + j); break;
            case KvType::Q8_0: q8_0_slice(row, at, n, out + j); break;
            }
            j += n;
        }
    }
}

}  // namespace specula::internal
