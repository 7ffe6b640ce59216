// Rows of keys or values in one of the KV element types (backend/kv_type.h), read as floats: the one place that
// knows how F32, F16 and Q8_0 rows are laid out. Attention asks for one head's slice (hd values starting at element
// `first`) of a run of slots, so it converts each stored value once per read, into a small block buffer.
#pragma once

#include "backend/kv_type.h"

#include <cstddef>
#include <cstdint>

namespace specula::internal {

struct KvView {
    const uint8_t *data = nullptr;  // slot 0's row
    KvType type = KvType::F32;
    size_t row_bytes = 0;           // bytes from one slot's row to the next
};

// Rounds one row of n floats to the type (Q8_0: n a multiple of 32, ggml's quantize_row_q8_0 arithmetic).
void kv_store_row(KvType type, const float *src, int64_t n, uint8_t *dst);

// dst[t * hd + j] = element first + j of slot slots[t] (or of slot first_slot + t when slots is null), for
// t < count, j < hd. F16 and Q8_0 values convert exactly as ggml's reference conversions.
void kv_load_head(const KvView &rows, int32_t first_slot, const int32_t *slots, int32_t count, int32_t first, int32_t hd, float *dst);

}  // namespace specula::internal
