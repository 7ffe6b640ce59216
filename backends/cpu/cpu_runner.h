// Runs a model's forward pass on the CPU for one session: owns the KV cache, the thread pool (or borrows the
// target's, for a draft model) and all scratch memory, so evaluating tokens allocates nothing once the largest batch
// has been seen.
#pragma once

#include "backend/target_runner.h"
#include "backends/cpu/block_attention.h"
#include "backends/cpu/cpu_weights.h"
#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"
#include "speculative/longspec_draft_file.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace specula::internal {

class Model;

class CpuRunner final : public TargetRunner {
public:
    // Throws INVALID_ARGUMENT when the model's KV rows do not fit kv_type (Q8_0 needs n_embd_kv % 32 == 0).
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads, KvType kv_type = KvType::F16);
    // A runner that borrows another runner's threads (which must outlive it): a draft model that runs between the
    // target's passes. A pool of its own would keep its workers spinning for the next job while the target
    // computes, taking the cores the target's own workers need.
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, ThreadPool &shared_pool, KvType kv_type = KvType::F16);

    const char *backend() const override { return "cpu"; }
    // See TargetRunner. The CPU pass checks the cancel flag between layers.
    bool eval(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) override;
    bool eval_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                   const uint8_t *mask, float *logits) override;
    void tree_logits(int32_t i, float *logits) override;
    void commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) override;
    void shift_kv(int32_t keep, int32_t discard, int32_t n_used) override;
    // The CPU has one attention path (block_attention.h): LongSpec's hybrid form, prefix read once per round, and
    // bit-identical to plain decoding at once, so both modes run it.
    using TreeAttention = internal::TreeAttention;
    void set_tree_attention(TreeAttention) override {}
    // The CPU LongSpec drafter (cpu_longspec_drafter.h), reading this runner's cache in place on its threads.
    std::unique_ptr<Drafter> make_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes) override;
    // A runner on this runner's threads (F16 cache): the draft model runs between the target's passes.
    std::unique_ptr<TargetRunner> make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) override;

    // The cache itself, for drafters that read the target's keys/values (LongSpec's cross-attention).
    const KvCache &kv() const { return kv_; }
    // The runner's threads, shared with drafters that run between its forward passes.
    ThreadPool &pool() { return *pool_; }

    int32_t n_ctx() const override { return kv_.n_ctx(); }
    int n_threads() const { return pool_->size(); }
    size_t kv_bytes() const override { return kv_.bytes(); }
    KvType kv_type() const override { return kv_.type(); }
    int32_t kv_row_width() const override { return kv_.n_embd_kv(); }
    void read_kv(int32_t layer, int kind, int32_t first, int32_t n, void *dst) override;
    void write_kv(int32_t layer, int kind, int32_t first, int32_t n, const void *src) override;

private:
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, std::unique_ptr<ThreadPool> own_pool, ThreadPool *shared_pool, KvType kv_type);

    struct TreeBatch {
        int32_t offset;
        const int32_t *positions;
        const uint8_t *mask;
    };
    bool forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, float *logits, bool all_logits);
    void attention(int layer, int32_t n, int32_t n_past);
    void list_tree_keys(int32_t n, int32_t n_past, const TreeBatch &tree);

    std::shared_ptr<const Model> model_;
    std::shared_ptr<const CpuWeights> weights_;  // the model's packed matrices, shared by its CPU runners
    KvCache kv_;
    std::unique_ptr<ThreadPool> own_pool_;  // null when the threads are borrowed
    ThreadPool *pool_;
    // Scratch, sized for the largest batch seen so far.
    std::vector<float> hidden_;  // final normed rows kept by eval_tree(..., nullptr)
    std::vector<float> x_, xb_, q_, k_, v_, att_out_, ffn_gate_, ffn_up_;
    // Attention: each row's run of contiguous keys and its further key slots (a tree node's ancestors and itself),
    // and per thread the block scratch and the rows of its task.
    std::vector<int32_t> row_run_, row_keys_, row_keys_begin_;
    std::vector<BlockAttention> block_attention_;
    std::vector<std::vector<AttentionQuery>> queries_;
    std::vector<uint8_t> quant_scratch_;
};

}  // namespace specula::internal
