// Runs a model's forward pass on the CPU for one session: owns the KV cache, the thread pool and all scratch
// memory, so evaluating tokens allocates nothing once the largest batch has been seen.
#pragma once

#include "backends/cpu/kv_cache.h"
#include "backends/cpu/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace specula::internal {

class Model;

class CpuRunner {
public:
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads);

    // Evaluates n tokens that occupy KV slots (and positions) [n_past, n_past + n); each attends causally to
    // slots [0, its own]. Writes n_vocab logits for the last token into `logits`, or for every token
    // (n * n_vocab floats) when all_logits. The caller guarantees n_past + n <= n_ctx and valid token ids.
    void eval(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits);

    int32_t n_ctx() const { return kv_.n_ctx(); }
    int n_threads() const { return pool_.size(); }
    size_t kv_bytes() const { return kv_.bytes(); }

private:
    void attention(int layer, int32_t n, int32_t n_past);

    std::shared_ptr<const Model> model_;
    KvCache kv_;
    ThreadPool pool_;
    // Scratch, sized for the largest batch seen so far.
    std::vector<float> x_, xb_, q_, k_, v_, att_out_, ffn_gate_, ffn_up_, scores_;
    std::vector<uint8_t> quant_scratch_;
};

}  // namespace specula::internal
