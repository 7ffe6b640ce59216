#include "backend/kv_rows.h"

#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"

#include <cstring>

namespace specula::internal {

void kv_store_row(KvType type, const float *src, int64_t n, uint8_t *dst) {
    switch (type) {
    case KvType::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case KvType::F16: {
        uint16_t *h = reinterpret_cast<uint16_t *>(dst);
        for (int64_t i = 0; i < n; ++i) h[i] = float_to_half(src[i]);
        return;
    }
    case KvType::Q8_0: find_type_kernels(uint32_t(TensorType::Q8_0))->from_float(src, dst, n); return;
    }
}

void kv_load_row(KvType type, const uint8_t *row, int64_t n, float *dst) {
    switch (type) {
    case KvType::F32: std::memcpy(dst, row, size_t(n) * sizeof(float)); return;
    case KvType::F16: {
        const uint16_t *h = reinterpret_cast<const uint16_t *>(row);
        for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(h[i]);
        return;
    }
    case KvType::Q8_0: find_type_kernels(uint32_t(TensorType::Q8_0))->to_float(row, dst, n); return;
    }
}

}  // namespace specula::internal
