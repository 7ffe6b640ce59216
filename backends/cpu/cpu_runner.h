// Runs a model's forward pass on the CPU for one session: owns the KV cache, the thread pool and all scratch
// memory, so evaluating tokens allocates nothing once the largest batch has been seen.
#pragma once

#include "backend/target_runner.h"
#include "backends/cpu/kv_cache.h"
#include "backends/cpu/thread_pool.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace specula::internal {

class Model;

class CpuRunner final : public TargetRunner {
public:
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads);

    const char *backend() const override { return "cpu"; }
    // See TargetRunner. The CPU pass checks the cancel flag between layers.
    bool eval(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) override;
    bool eval_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                   const uint8_t *mask, float *logits) override;
    void tree_logits(int32_t i, float *logits) override;
    void commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) override;
    // Exact (default) is the causal loop over exactly the keys plain decoding sees, bit-identical to eval();
    // Hybrid is LongSpec's split form on attention_kernels, the form the GPU backends use.
    using TreeAttention = internal::TreeAttention;
    void set_tree_attention(TreeAttention mode) override { tree_attention_mode_ = mode; }
    const KvCache &host_kv(int32_t, int32_t) override { return kv_; }

    // The cache itself, for drafters that read the target's keys/values (LongSpec's cross-attention).
    const KvCache &kv() const { return kv_; }
    // The runner's threads, shared with drafters that run between its forward passes.
    ThreadPool &pool() override { return pool_; }

    int32_t n_ctx() const override { return kv_.n_ctx(); }
    int n_threads() const { return pool_.size(); }
    size_t kv_bytes() const override { return kv_.bytes(); }
    KvType kv_type() const override { return KvType::F32; }
    int32_t kv_row_width() const override { return kv_.n_embd_kv(); }
    void read_kv(int32_t layer, int kind, int32_t first, int32_t n, void *dst) override;
    void write_kv(int32_t layer, int kind, int32_t first, int32_t n, const void *src) override;

private:
    struct TreeBatch {
        int32_t offset;
        const int32_t *positions;
        const uint8_t *mask;
    };
    bool forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, float *logits, bool all_logits);
    void attention(int layer, int32_t n, int32_t n_past, const TreeBatch *tree);
    void hybrid_tree_attention(int layer, int32_t n, int32_t n_past, const TreeBatch &tree);
    void for_each_head(int32_t n, int32_t keys, const std::function<void(int64_t, int)> &head);

    std::shared_ptr<const Model> model_;
    TreeAttention tree_attention_mode_ = TreeAttention::Exact;
    KvCache kv_;
    ThreadPool pool_;
    // Scratch, sized for the largest batch seen so far.
    std::vector<float> hidden_;  // final normed rows kept by eval_tree(..., nullptr)
    std::vector<float> x_, xb_, q_, k_, v_, att_out_, ffn_gate_, ffn_up_, scores_;
    std::vector<uint8_t> quant_scratch_;
};

}  // namespace specula::internal
