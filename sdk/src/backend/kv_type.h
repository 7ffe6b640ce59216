// The element type a backend keeps its key/value cache in: the CPU's is F32, the CUDA backend's F16. Snapshots
// record it (a cache saved as one type is never loaded as another: that would change the numerics).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

enum class KvType : uint32_t { F32 = 0, F16 = 1 };

inline size_t kv_type_size(KvType t) { return t == KvType::F16 ? 2 : 4; }
inline const char *kv_type_name(KvType t) { return t == KvType::F16 ? "F16" : "F32"; }

}  // namespace specula::internal
