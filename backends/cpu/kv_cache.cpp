#include "kv_cache.h"

#include "core/error.h"

#include <string>

namespace specula::internal {

KvCache::KvCache(int32_t first_layer, int32_t n_held, int32_t n_ctx, int32_t n_embd_kv, KvType type)
    : first_layer_(first_layer), n_ctx_(n_ctx), n_embd_kv_(n_embd_kv), type_(type), row_bytes_(kv_row_bytes(type, n_embd_kv)) {
    require(kv_type_fits(type, n_embd_kv), SPECULA_ERR_INVALID_ARGUMENT,
            std::string("KV cache: ") + kv_type_name(type) + " stores rows in blocks of 32 values; this model's rows have " +
                std::to_string(n_embd_kv) + " (use F16 or F32)");
    k_.assign(size_t(n_held) * size_t(n_ctx) * row_bytes_, 0);
    v_.assign(k_.size(), 0);
}

void KvCache::store(int32_t layer, int32_t slot, const float *k, const float *v) {
    kv_store_row(type_, k, n_embd_kv_, k_row(layer, slot));
    kv_store_row(type_, v, n_embd_kv_, v_row(layer, slot));
}

}  // namespace specula::internal
