// The target's key/value cache on the CPU: for every layer, n_ctx slots of one row of n_embd_kv values for K (after
// RoPE) and one for V, stored as the session's KvType (F16 by default, F32, or Q8_0 in 32-element blocks). Slot i
// holds the token at position i. Allocated once per session; its size is fixed by n_ctx and the type.
// A cache may hold only some layers ([first_layer, first_layer + n_held)): a GPU backend keeps such a host
// mirror of the one layer a LongSpec draft cross-attends to.
//
// Rows are rounded to the type when stored and read back through KvView (kv_view.h), so everything that attends
// (plain decoding, a tree node, the draft's cross-attention) sees the very same stored values.
#pragma once

#include "backend/kv_type.h"
#include "backends/cpu/kv_view.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

class KvCache {
public:
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, KvType type) : KvCache(0, n_layer, n_ctx, n_embd_kv, type) {}
    // Holds only layers [first_layer, first_layer + n_held). Throws INVALID_ARGUMENT when n_embd_kv does not fit
    // the type (Q8_0 needs a multiple of 32).
    KvCache(int32_t first_layer, int32_t n_held, int32_t n_ctx, int32_t n_embd_kv, KvType type);

    KvType type() const { return type_; }
    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_embd_kv() const { return n_embd_kv_; }
    size_t row_bytes() const { return row_bytes_; }
    size_t bytes() const { return k_.size() + v_.size(); }

    // Rounds and stores one slot's key and value rows (n_embd_kv floats each).
    void store(int32_t layer, int32_t slot, const float *k, const float *v);
    // The stored bytes of a slot's row (row_bytes() each; consecutive slots follow each other).
    uint8_t *k_row(int32_t layer, int32_t slot) { return k_.data() + offset(layer, slot); }
    uint8_t *v_row(int32_t layer, int32_t slot) { return v_.data() + offset(layer, slot); }
    const uint8_t *k_row(int32_t layer, int32_t slot) const { return k_.data() + offset(layer, slot); }
    const uint8_t *v_row(int32_t layer, int32_t slot) const { return v_.data() + offset(layer, slot); }
    // One layer's keys or values as attention reads them.
    KvView keys(int32_t layer) const { return KvView{k_row(layer, 0), type_, row_bytes_}; }
    KvView values(int32_t layer) const { return KvView{v_row(layer, 0), type_, row_bytes_}; }

private:
    size_t offset(int32_t layer, int32_t slot) const {
        return (size_t(layer - first_layer_) * size_t(n_ctx_) + size_t(slot)) * row_bytes_;
    }

    int32_t first_layer_;
    int32_t n_ctx_;
    int32_t n_embd_kv_;
    KvType type_;
    size_t row_bytes_;
    std::vector<uint8_t> k_, v_;
};

}  // namespace specula::internal
