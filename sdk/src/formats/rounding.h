// The float -> integer rounding the quantizers share, defined for every input.
#pragma once

#include <cmath>
#include <cstdint>

namespace specula::internal {

// v rounded to nearest even as x86's CVTSS2SI does it: a NaN or a value outside int32 becomes INT32_MIN (the
// "integer indefinite"). A plain int(nearbyint(v)) is undefined behaviour for those, and activations can hold
// NaN (a model that overflowed); the vector conversions beside the packed kernels write exactly these bytes.
inline int32_t round_to_int32(float v) {
    const float r = std::nearbyint(v);
    return (r >= -2147483648.0f && r < 2147483648.0f) ? int32_t(r) : INT32_MIN;
}

// The low byte of an int32, as a cast to int8_t keeps it (modular since C++20; spelled out for older readers).
inline int8_t low_byte(int32_t v) { return int8_t(uint8_t(uint32_t(v) & 0xFFu)); }

}  // namespace specula::internal
