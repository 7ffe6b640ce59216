// Runs a model on the CPU for one session: the model's graph (graph/model_graph.h) through the CPU executor
// (cpu_executor.h), into a KV cache of the session's type. Owns the cache, the thread pool (or borrows the
// target's, for a draft model) and all scratch memory, so evaluating tokens allocates nothing once the largest
// batch has been seen.
#pragma once

#include "backend/target_runner.h"
#include "backends/cpu/cpu_executor.h"
#include "backends/cpu/cpu_session_batch.h"
#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"
#include "graph/batch_rows.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace specula::internal {

class Model;

class CpuRunner final : public TargetRunner {
public:
    // Throws INVALID_ARGUMENT when the model's KV rows do not fit kv_type (Q8_0 needs n_embd_kv % 32 == 0).
    // graph: the model's graph (null: built here from the model).
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int n_threads, KvType kv_type = KvType::F16,
              std::shared_ptr<const Graph> graph = nullptr);
    // A runner that borrows another runner's threads (which must outlive it): a draft model that runs between the
    // target's passes. A pool of its own would keep its workers spinning for the next job while the target
    // computes, taking the cores the target's own workers need.
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, ThreadPool &shared_pool, KvType kv_type = KvType::F16,
              std::shared_ptr<const Graph> graph = nullptr);

    ~CpuRunner() override;
    const char *backend() const override { return "cpu"; }
    // Cross-session batching: the group's CPU batch (made here for the first member), on the group's threads.
    void join_batch(BatchGroup &group) override;
    void leave_batch() override;
    // See TargetRunner.
    void tree_logits(int32_t i, float *logits) override;
    void commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) override;
    void shift_kv(int32_t keep, int32_t discard, int32_t n_used) override;
    // A CPU executor on this runner's threads, reading its cache in place.
    std::unique_ptr<GraphExecutor> make_executor(const ExecutorRequest &request) override;
    // A runner on this runner's threads (F16 cache): the draft model runs between the target's passes.
    std::unique_ptr<TargetRunner> make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) override;

    // The cache itself, for code that reads the target's keys/values below the interface (benchmarks, tests).
    const KvCache &kv() const { return kv_; }
    // The runner's threads, shared with drafters that run between its forward passes.
    ThreadPool &pool() { return *pool_; }

    int32_t n_ctx() const override { return kv_.n_ctx(); }
    int n_threads() const { return pool_->size(); }
    size_t kv_bytes() const override { return kv_.bytes(); }
    KvType kv_type() const override { return kv_.type(); }
    int32_t kv_row_width() const override { return kv_.n_embd_kv(); }
    void read_kv(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) override;
    void write_kv(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) override;

protected:
    // TargetRunner::eval / eval_tree. The CPU pass checks the cancel flag between layers. Trees attend through the
    // one attention path (block_attention.h): LongSpec's hybrid form, prefix read once per round, and bit-identical
    // to decoding.
    bool evaluate(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) override;
    bool evaluate_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions,
                   const uint8_t *mask, float *logits) override;

private:
    CpuRunner(std::shared_ptr<const Model> model, int32_t n_ctx, std::unique_ptr<ThreadPool> own_pool, ThreadPool *shared_pool, KvType kv_type,
              std::shared_ptr<const Graph> graph);
    // The body over every row of rows_, then the head over rows [first, rows_.n) into logits (when not null).
    bool forward(int32_t first, float *logits);
    void head(int32_t first, int32_t count, float *logits);

    std::shared_ptr<const Model> model_;
    KvCache kv_;
    std::unique_ptr<ThreadPool> own_pool_;  // null when the threads are borrowed
    ThreadPool *pool_;
    std::unique_ptr<CpuExecutor> exec_;
    BatchRows rows_;  // the last batch's rows (the head of a lazy tree reads none of it)
    std::shared_ptr<CpuSessionBatch> batch_;  // the group this runner's passes join, or null
};

}  // namespace specula::internal
