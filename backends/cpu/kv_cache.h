// The target's key/value cache on the CPU: for every layer, n_ctx slots of n_embd_kv floats for K (after RoPE)
// and for V. Slot i holds the token at position i. Allocated once per session; its size is fixed by n_ctx.
// A cache may hold only some layers ([first_layer, first_layer + n_held)): a GPU backend keeps such a host
// mirror of the one layer a LongSpec draft cross-attends to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

class KvCache {
public:
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv) : KvCache(0, n_layer, n_ctx, n_embd_kv) {}
    // Holds only layers [first_layer, first_layer + n_held).
    KvCache(int32_t first_layer, int32_t n_held, int32_t n_ctx, int32_t n_embd_kv)
        : first_layer_(first_layer), n_ctx_(n_ctx), n_embd_kv_(n_embd_kv),
          k_(size_t(n_held) * size_t(n_ctx) * size_t(n_embd_kv)), v_(k_.size()) {}

    int32_t n_ctx() const { return n_ctx_; }
    float *k(int32_t layer, int32_t slot) { return k_.data() + offset(layer, slot); }
    float *v(int32_t layer, int32_t slot) { return v_.data() + offset(layer, slot); }
    const float *k(int32_t layer, int32_t slot) const { return k_.data() + offset(layer, slot); }
    const float *v(int32_t layer, int32_t slot) const { return v_.data() + offset(layer, slot); }
    int32_t n_embd_kv() const { return n_embd_kv_; }
    size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

private:
    size_t offset(int32_t layer, int32_t slot) const {
        return (size_t(layer - first_layer_) * size_t(n_ctx_) + size_t(slot)) * size_t(n_embd_kv_);
    }

    int32_t first_layer_;
    int32_t n_ctx_;
    int32_t n_embd_kv_;
    std::vector<float> k_, v_;
};

}  // namespace specula::internal
