// Q4_0: blocks of 32 4-bit values (offset by 8) with one fp16 scale (ggml block_q4_0). Element j of a block is
// the low nibble of qs[j] for j < 16 and the high nibble of qs[j - 16] otherwise.
#include "q4_0.h"

#include "half.h"
#include "q8_0.h"
#include "type_kernels.h"

#include <cmath>

namespace specula::internal {
namespace {

void q4_0_to_float(const void *src, float *dst, int64_t n) {
    const BlockQ4_0 *blocks = static_cast<const BlockQ4_0 *>(src);
    for (int64_t b = 0; b < n / kQ4_0Block; ++b) {
        const float d = half_to_float_lookup(blocks[b].d);
        for (int j = 0; j < kQ4_0Block / 2; ++j) {
            dst[b * kQ4_0Block + j] = float((blocks[b].qs[j] & 0x0F) - 8) * d;
            dst[b * kQ4_0Block + j + kQ4_0Block / 2] = float((blocks[b].qs[j] >> 4) - 8) * d;
        }
    }
}

// Dot with Q8_0 activations: the integer block dot of ggml_vec_dot_q4_0_q8_0, accumulated as the AMX kernels do.
float q4_0_vec_dot(int64_t n, const void *row, const void *x) {
    const BlockQ4_0 *a = static_cast<const BlockQ4_0 *>(row);
    const BlockQ8_0 *b = static_cast<const BlockQ8_0 *>(x);
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQ4_0Block; ++k) {
        int32_t isum = 0;
        for (int j = 0; j < kQ4_0Block / 2; ++j) {
            isum += ((a[k].qs[j] & 0x0F) - 8) * int32_t(b[k].qs[j]);
            isum += ((a[k].qs[j] >> 4) - 8) * int32_t(b[k].qs[j + kQ4_0Block / 2]);
        }
        // Fused multiply-add per block, as llama.cpp's AMX kernels do (see q8_0_vec_dot in q8_0.cpp).
        sum = std::fma(float(isum), half_to_float_lookup(a[k].d) * half_to_float_lookup(b[k].d), sum);
    }
    return sum;
}

}  // namespace

extern const TypeKernels kQ4_0Kernels = {2, kQ4_0Block, sizeof(BlockQ4_0), 8, q4_0_to_float, nullptr, q4_0_vec_dot};

}  // namespace specula::internal
