// Q8_0: blocks of 32 int8 values with one fp16 scale (ggml block_q8_0). Also the dot type of Q8_0 and Q4_0.
#include "q8_0.h"

#include "half.h"
#include "rounding.h"
#include "type_kernels.h"

#include <cmath>
#include <cstring>

namespace specula::internal {
namespace {

void q8_0_to_float(const void *src, float *dst, int64_t n) {
    const BlockQ8_0 *blocks = static_cast<const BlockQ8_0 *>(src);
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const float d = half_to_float_lookup(blocks[b].d);
        for (int j = 0; j < kQ8_0Block; ++j) dst[b * kQ8_0Block + j] = float(blocks[b].qs[j]) * d;
    }
}

// As ggml's x86 quantize_row_q8_0 (the path llama.cpp runs on this hardware): scale d = max|x| / 127, values
// x * (127 / max|x|) rounded to nearest even. (The portable reference multiplies by 1 / d instead, which
// rounds a few values differently and costs bit-parity with llama.cpp.)
void q8_0_from_float(const float *src, void *dst, int64_t n) {
    BlockQ8_0 *blocks = static_cast<BlockQ8_0 *>(dst);
    for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
        const float *x = src + b * kQ8_0Block;
        float amax = 0.0f;
        for (int j = 0; j < kQ8_0Block; ++j) {
            const float a = std::fabs(x[j]);
            amax = a > amax ? a : amax;  // as fmax for the finite values activations are (fmax is a libm call here)
        }
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        blocks[b].d = float_to_half(d);
        for (int j = 0; j < kQ8_0Block; ++j) blocks[b].qs[j] = int8_t(round_to_int32(x[j] * id));
    }
}

float q8_0_vec_dot(int64_t n, const void *row, const void *x) {
    const BlockQ8_0 *a = static_cast<const BlockQ8_0 *>(row);
    const BlockQ8_0 *b = static_cast<const BlockQ8_0 *>(x);
    float sum = 0.0f;
    for (int64_t k = 0; k < n / kQ8_0Block; ++k) {
        int32_t isum = 0;
        for (int j = 0; j < kQ8_0Block; ++j) isum += int32_t(a[k].qs[j]) * int32_t(b[k].qs[j]);
        // One fused multiply-add per block, in block order, as llama.cpp's AMX kernels (ggml-cpu/amx/mmq.cpp:
        // tinygemm_kernel_vnni for one activation row, acc_C after the tile multiply for several) that ran the
        // Q8_0/Q4_0 references on an AMX-INT8 CPU: `_mm512_fmadd_ps(float(isum), d_w * d_x, acc)`. A separately
        // rounded `sum += isum * d` differs in the last bit, and the next Q8_0 quantization can turn that bit
        // into a 1e-3 logit difference (synth-llama-q8_0/b.json missed 45 of its 48 steps that way).
        sum = std::fma(float(isum), half_to_float_lookup(a[k].d) * half_to_float_lookup(b[k].d), sum);
    }
    return sum;
}

}  // namespace

extern const TypeKernels kQ8_0Kernels = {8, kQ8_0Block, sizeof(BlockQ8_0), 8, q8_0_to_float, q8_0_from_float, q8_0_vec_dot};

}  // namespace specula::internal
