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

// Element e of slot s is element e % group_width of group e / group_width's row of slot s; a group's rows follow
// each other at row_bytes, the groups at group_bytes (head-major storage, kv_cache.h). group_width 0: one group, the
// whole row (slot-major).
struct KvView {
    const uint8_t *data = nullptr;  // group 0's row of slot 0
    KvType type = KvType::F32;
    size_t row_bytes = 0;           // bytes from one slot's row (of a group) to the next
    size_t group_bytes = 0;         // bytes from one group's rows to the next
    int32_t group_width = 0;        // elements per group's row; 0: the whole row

    // Slot `slot`'s row of the group holding element `first`, with first made relative to that row. A slice that
    // attention reads ([first, first + hd), one head) lies within one group; kv_load_head reads any slice.
    const uint8_t *row(int32_t slot, int32_t &first) const {
        if (group_width == 0) return data + size_t(slot) * row_bytes;
        const uint8_t *p = data + size_t(first / group_width) * group_bytes + size_t(slot) * row_bytes;
        first %= group_width;
        return p;
    }
};

// dst[t * hd + j] = element first + j of slot slots[t] (or of slot first_slot + t when slots is null), for
// t < count, j < hd. F16 and Q8_0 values convert exactly as ggml's reference conversions.
void kv_load_head(const KvView &rows, int32_t first_slot, const int32_t *slots, int32_t count, int32_t first, int32_t hd, float *dst);

}  // namespace specula::internal
