// F32, F16 and BF16: plain element-wise conversions. 16-bit weights are dotted with F32 activations (no rounding
// of the activations to 16 bits): that is what llama.cpp computes on x86 (its llamafile sgemm path), measured on
// the F16 fixture as 3.6e-7 relative agreement versus 5.7e-4 when activations are rounded to F16.
#include "type_kernels.h"

#include "half.h"

#include <cstring>

namespace specula::internal {
namespace {

void f32_to_float(const void *src, float *dst, int64_t n) { std::memcpy(dst, src, size_t(n) * sizeof(float)); }
void f32_from_float(const float *src, void *dst, int64_t n) { std::memcpy(dst, src, size_t(n) * sizeof(float)); }
float f32_vec_dot(int64_t n, const void *row, const void *x) {
    const float *a = static_cast<const float *>(row);
    const float *b = static_cast<const float *>(x);
    float sum[8] = {};  // independent partial sums let the compiler vectorize
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) sum[k] += a[i + k] * b[i + k];
    for (; i < n; ++i) sum[0] += a[i] * b[i];
    return ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]));
}

// A 16-bit float type: its to_float/from_float/vec_dot generated from the scalar conversions.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)> struct Half16 {
    static void to_float(const void *src, float *dst, int64_t n) {
        const uint16_t *s = static_cast<const uint16_t *>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = ToFloat(s[i]);
    }
    static void from_float(const float *src, void *dst, int64_t n) {
        uint16_t *d = static_cast<uint16_t *>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = FromFloat(src[i]);
    }
    // Dot with F32 activations.
    static float vec_dot(int64_t n, const void *row, const void *x) {
        const uint16_t *a = static_cast<const uint16_t *>(row);
        const float *b = static_cast<const float *>(x);
        float sum[8] = {};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int k = 0; k < 8; ++k) sum[k] += ToFloat(a[i + k]) * b[i + k];
        for (; i < n; ++i) sum[0] += ToFloat(a[i]) * b[i];
        return ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]));
    }
};

using F16 = Half16<half_to_float_lookup, float_to_half>;
using BF16 = Half16<bf16_to_float, float_to_bf16>;

}  // namespace

extern const TypeKernels kF32Kernels = {0, 1, 4, 0, f32_to_float, f32_from_float, f32_vec_dot};
extern const TypeKernels kF16Kernels = {1, 1, 2, 0, F16::to_float, F16::from_float, F16::vec_dot};
extern const TypeKernels kBF16Kernels = {30, 1, 2, 0, BF16::to_float, BF16::from_float, BF16::vec_dot};

}  // namespace specula::internal
