// The target's key/value cache on the CPU: for every layer, n_ctx slots of n_embd_kv floats for K (after RoPE)
// and for V. Slot i holds the token at position i. Allocated once per session; its size is fixed by n_ctx.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

class KvCache {
public:
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv)
        : n_ctx_(n_ctx), n_embd_kv_(n_embd_kv),
          k_(size_t(n_layer) * size_t(n_ctx) * size_t(n_embd_kv)), v_(k_.size()) {}

    int32_t n_ctx() const { return n_ctx_; }
    float *k(int32_t layer, int32_t slot) { return k_.data() + offset(layer, slot); }
    float *v(int32_t layer, int32_t slot) { return v_.data() + offset(layer, slot); }
    const float *k(int32_t layer, int32_t slot) const { return k_.data() + offset(layer, slot); }
    const float *v(int32_t layer, int32_t slot) const { return v_.data() + offset(layer, slot); }
    int32_t n_embd_kv() const { return n_embd_kv_; }
    size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

private:
    size_t offset(int32_t layer, int32_t slot) const { return (size_t(layer) * size_t(n_ctx_) + size_t(slot)) * size_t(n_embd_kv_); }

    int32_t n_ctx_;
    int32_t n_embd_kv_;
    std::vector<float> k_, v_;
};

}  // namespace specula::internal
