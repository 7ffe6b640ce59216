#include "kv_cache.h"

#include "core/error.h"

#include <cstring>
#include <string>

namespace specula::internal {

KvCache::KvCache(int32_t first_layer, int32_t n_held, int32_t n_ctx, int32_t n_embd_kv, KvType type, int32_t head_dim)
    : first_layer_(first_layer), n_ctx_(n_ctx), n_embd_kv_(n_embd_kv), type_(type), row_bytes_(kv_row_bytes(type, n_embd_kv)) {
    require(kv_type_fits(type, n_embd_kv), SPECULA_ERR_INVALID_ARGUMENT,
            std::string("KV cache: ") + kv_type_name(type) + " stores rows in blocks of 32 values; this model's rows have " +
                std::to_string(n_embd_kv) + " (use F16 or F32)");
    const bool by_head = head_dim > 0 && n_embd_kv % head_dim == 0 && kv_type_fits(type, head_dim);
    group_width_ = by_head ? head_dim : n_embd_kv;
    n_groups_ = n_embd_kv / group_width_;
    group_bytes_ = kv_row_bytes(type, group_width_);
    k_.assign(size_t(n_held) * size_t(n_ctx) * row_bytes_, 0);
    v_.assign(k_.size(), 0);
}

void KvCache::store(int32_t layer, int32_t slot, const float *k, const float *v) {
    for (int32_t g = 0; g < n_groups_; ++g) {  // a group's elements round alone as within the row (Q8_0: whole blocks)
        kv_store_row(type_, k + size_t(g) * size_t(group_width_), group_width_, k_.data() + offset(layer, g, slot));
        kv_store_row(type_, v + size_t(g) * size_t(group_width_), group_width_, v_.data() + offset(layer, g, slot));
    }
}

void KvCache::read_rows(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) const {
    const std::vector<uint8_t> &rows = part == KvPart::Keys ? k_ : v_;
    uint8_t *out = static_cast<uint8_t *>(dst);
    for (int32_t g = 0; g < n_groups_; ++g) {
        const uint8_t *src = rows.data() + offset(layer, g, first);
        for (int32_t s = 0; s < n; ++s)
            std::memcpy(out + size_t(s) * row_bytes_ + size_t(g) * group_bytes_, src + size_t(s) * group_bytes_, group_bytes_);
    }
}

void KvCache::write_rows(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) {
    std::vector<uint8_t> &rows = part == KvPart::Keys ? k_ : v_;
    const uint8_t *in = static_cast<const uint8_t *>(src);
    for (int32_t g = 0; g < n_groups_; ++g) {
        uint8_t *dst = rows.data() + offset(layer, g, first);
        for (int32_t s = 0; s < n; ++s)
            std::memcpy(dst + size_t(s) * group_bytes_, in + size_t(s) * row_bytes_ + size_t(g) * group_bytes_, group_bytes_);
    }
}

void KvCache::copy_slot(int32_t layer, int32_t to, int32_t from) {
    for (int32_t g = 0; g < n_groups_; ++g) {
        std::memcpy(k_.data() + offset(layer, g, to), k_.data() + offset(layer, g, from), group_bytes_);
        std::memcpy(v_.data() + offset(layer, g, to), v_.data() + offset(layer, g, from), group_bytes_);
    }
}

}  // namespace specula::internal
