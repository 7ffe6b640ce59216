// Float -> integer conversions as x86's vector code does them, defined for every input: the scalar quantizers and
// the CPU's scalar exp share them with their SIMD twins, which must write the same bits.
#pragma once

#include <cmath>
#include <cstdint>

namespace specula::internal {

// An integral float converted as CVTSS2SI / CVTPS2DQ do: a NaN or a value outside int32 becomes INT32_MIN (the
// "integer indefinite"). A plain int32_t(r) is undefined behaviour for those, and activations and scores can hold
// NaN or infinity (a model that overflowed, a restored KV cache holding inf).
inline int32_t int32_indefinite(float r) {
    return (r >= -2147483648.0f && r < 2147483648.0f) ? int32_t(r) : INT32_MIN;
}

// v rounded to nearest even (the default rounding mode, as nearbyint and the vector conversions), then converted as
// above. A quantizer's int8_t() of it keeps the low byte (modular since C++20): a NaN's INT32_MIN becomes 0, as the
// vector conversions' byte shuffle gives.
inline int32_t round_to_int32(float v) { return int32_indefinite(std::nearbyint(v)); }

}  // namespace specula::internal
