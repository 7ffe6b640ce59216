// IEEE half and bfloat16 conversions, bit-exact with ggml's reference conversions.
#pragma once

#include <cstdint>
#include <cstring>

namespace specula::internal {

inline float bits_to_float(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline uint32_t float_to_bits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
}

// fp16 -> fp32 (exact), as ggml_compute_fp16_to_fp32.
inline float half_to_float(uint16_t h) {
    const uint32_t w = uint32_t(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = 0x1.0p-112f;
    const float normalized = bits_to_float((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    const float denormalized = bits_to_float((two_w >> 17) | magic_mask) - magic_bias;
    const uint32_t denormalized_cutoff = 1u << 27;
    const uint32_t result = sign | (two_w < denormalized_cutoff ? float_to_bits(denormalized) : float_to_bits(normalized));
    return bits_to_float(result);
}

// fp32 -> fp16 with round-to-nearest-even, as ggml_compute_fp32_to_fp16.
inline uint16_t float_to_half(float f) {
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (f < 0 ? -f : f) * scale_to_inf;
    base *= scale_to_zero;
    const uint32_t w = float_to_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = bits_to_float((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = float_to_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return uint16_t((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// fp16 -> fp32 through a 64K-entry table (256 KiB, built once): the conversion sits in the innermost loop of
// every F16 dot product and every K-/Q-quant block scale.
float half_to_float_lookup(uint16_t h);

inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

// fp32 -> bf16 with round-to-nearest-even and quiet NaNs, as ggml_compute_fp32_to_bf16.
inline uint16_t float_to_bf16(float f) {
    const uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64);
    return uint16_t((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

}  // namespace specula::internal
