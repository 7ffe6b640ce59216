// One slot's row of keys or values in a KV element type (backend/kv_type.h), converted to and from floats with the
// reference arithmetic (formats/): what a cache stores, what a snapshot or the context shift reads back. Every
// backend rounds rows exactly so, so a row means the same values wherever it was computed.
#pragma once

#include "backend/kv_type.h"

#include <cstdint>

namespace specula::internal {

// Rounds one row of n floats to the type (Q8_0: n a multiple of 32, ggml's quantize_row_q8_0 arithmetic).
void kv_store_row(KvType type, const float *src, int64_t n, uint8_t *dst);
// The n values of one stored row as floats (F16 and Q8_0 convert exactly as ggml's reference conversions).
void kv_load_row(KvType type, const uint8_t *row, int64_t n, float *dst);

}  // namespace specula::internal
