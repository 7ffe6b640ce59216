// Rows of keys or values in one of the KV element types (backend/kv_type.h), read as floats by the CPU's attention
// (rows are stored with the core's kv_store_row, backend/kv_rows.h). Attention asks for one head's slice (hd
// values starting at element `first`) of a run of slots, so it converts each stored value once per read, into a
// small block buffer.
#pragma once

#include "backend/kv_rows.h"
#include "backend/kv_type.h"

#include <cstddef>
#include <cstdint>

namespace specula::internal {

struct KvView {
    const uint8_t *data = nullptr;  // slot 0's row
    KvType type = KvType::F32;
    size_t row_bytes = 0;           // bytes from one slot's row to the next
};

// dst[t * hd + j] = element first + j of slot slots[t] (or of slot first_slot + t when slots is null), for
// t < count, j < hd. F16 and Q8_0 values convert exactly as ggml's reference conversions.
void kv_load_head(const KvView &rows, int32_t first_slot, const int32_t *slots, int32_t count, int32_t first, int32_t hd, float *dst);

}  // namespace specula::internal
