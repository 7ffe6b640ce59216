// The element type a backend keeps its key/value cache in: the CPU's is F16 by default (llama.cpp's default),
// F32 or Q8_0 on request; the CUDA and Vulkan backends' is F16. Snapshots record it (a cache saved as one type is
// never loaded as another: that would change the numerics).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

// The numbers are stored in snapshots: never renumber.
enum class KvType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 2 };

constexpr int32_t kKvQ8_0Block = 32;  // elements per Q8_0 block (a 2-byte F16 scale and 32 int8s)

inline bool kv_type_valid(uint32_t t) { return t <= uint32_t(KvType::Q8_0); }

// Bytes of one slot's row of `width` elements (Q8_0: width must be a multiple of 32, see kv_type_fits).
inline size_t kv_row_bytes(KvType t, int64_t width) {
    switch (t) {
    case KvType::F32: return size_t(width) * 4;
    case KvType::F16: return size_t(width) * 2;
    case KvType::Q8_0: return size_t(width / kKvQ8_0Block) * 34;
    }
    return 0;
}

// Whether rows of `width` elements can be stored as t.
inline bool kv_type_fits(KvType t, int64_t width) { return t != KvType::Q8_0 || width % kKvQ8_0Block == 0; }

// The unit snapshot compression shuffles bytes by: the element size (a Q8_0 row is a byte stream).
inline size_t kv_type_size(KvType t) { return t == KvType::F32 ? 4 : t == KvType::F16 ? 2 : 1; }

// Which half of a key/value store.
enum class KvPart : uint8_t { Keys = 0, Values = 1 };

inline const char *kv_type_name(KvType t) { return t == KvType::F16 ? "F16" : t == KvType::Q8_0 ? "Q8_0" : "F32"; }

}  // namespace specula::internal
