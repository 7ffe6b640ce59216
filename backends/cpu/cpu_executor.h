// The CPU backend's graph executor (backend/graph_executor.h): a graph's tensors as host rows, each operation as
// the CPU reference operators of ops.h (packed SIMD matrix products, block attention), run on the session's thread
// pool. The CPU runner executes the target's graph with it (cpu_runner.cpp); a drafter's graph reads the runner's
// cache (KvCache) in place.
#pragma once

#include "backend/graph_executor.h"
#include "backends/cpu/block_attention.h"
#include "backends/cpu/cpu_weights.h"
#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

namespace specula::internal {

class CpuExecutor final : public GraphExecutor {
public:
    // model_kv: the cache KvStore::Model operations use (null when the graph has none). max_rows: 0 lets the buffers
    // grow with the largest batch seen (a runner); otherwise they are sized for max_rows once (a drafter, whose
    // memory must not depend on the context). Throws Error(OUT_OF_MEMORY).
    // caches_per_pass: the KvStore::Model operations use the caches run_segments is given (model_kv is null).
    CpuExecutor(std::shared_ptr<const Graph> graph, int32_t max_rows, ThreadPool &pool, KvCache *model_kv, bool caches_per_pass = false);

    // Runs stage `stage` over rows [first, first + count) of the batch. False when `cancel` was raised between two
    // layers (the rows' keys/values stored so far stay).
    bool run_rows(int32_t stage, const BatchRows &rows, int32_t first, int32_t count, const std::atomic<bool> *cancel = nullptr);

    // Several sessions' batches in one pass (cross-session batching: cpu_session_batch.h): segment s's rows are
    // tensor rows [base, base + rows->n), its keys and values go to and come from its own cache. `all` holds every
    // tensor row's token and position; the operations without keys run once over all rows (a weight is read once
    // for every session), StoreKv and Attention per segment. A row's result is what run_rows gives it alone.
    struct KvSegment {
        const BatchRows *rows = nullptr;
        KvCache *kv = nullptr;
        int32_t base = 0;
    };
    void run_segments(int32_t stage, const BatchRows &all, const std::vector<KvSegment> &segments);
    // Tensor t holding at least n rows (the rows a caller copies in: a lazy tree's hidden states).
    float *rows_for(TensorId t, int32_t n) {
        ensure_rows(n);
        return row(t, 0);
    }
    const Graph &graph() const { return *graph_; }
    const std::shared_ptr<const Graph> &graph_ptr() const { return graph_; }
    // Row `row` of tensor t (its rows follow each other).
    float *row(TensorId t, int32_t r) { return tensor(t).at(r); }
    // Until unbind(t), tensor t lives in the caller's memory, row `first` at dst (logits go straight where the
    // caller wants them, without a copy).
    void bind(TensorId t, float *dst, int32_t first);
    void unbind(TensorId t);

    void run(int32_t stage, const BatchRows &rows, float *logits, bool replay) override;
    KvType local_kv_type() const override { return KvType::F32; }
    void read_local_kv(KvPart part, int32_t first, int32_t n, void *dst) override;
    void write_local_kv(KvPart part, int32_t first, int32_t n, const void *src) override;
    size_t allocated_bytes() const override;

private:
    struct Tensor {
        std::vector<float> data;
        int32_t width = 0;
        float *external = nullptr;  // bind(): row external_first lives at external
        int32_t external_first = 0;
        float *at(int32_t r) {
            return external != nullptr ? external + int64_t(r - external_first) * width : data.data() + int64_t(r) * width;
        }
    };
    Tensor &tensor(TensorId t) { return tensors_[size_t(t)]; }
    void ensure_rows(int32_t rows);
    // A run of one batch's rows [first, first + count), at tensor rows base + i, with the cache they use.
    struct Part {
        const BatchRows *rows;
        KvCache *kv;
        int32_t base, first, count;
    };
    bool run_parts(int32_t stage, const BatchRows &all, int32_t first, int32_t count, const Part *parts, size_t n_parts,
                   const std::atomic<bool> *cancel);
    KvCache &store(const Op &op, const Part &p) { return op.store == KvStore::Model ? *p.kv : *local_kv_; }
    void attention(const Op &op, const Part *parts, size_t n_parts);
    void expert_matmul(const Op &op, const std::vector<CpuMatrix> &experts, int32_t first, int32_t count);

    std::shared_ptr<const Graph> graph_;
    std::vector<std::shared_ptr<const CpuWeights>> weights_;  // the packed stores the matrices below point into
    PerOp<CpuMatrix> matrices_;                               // the MatMuls' matrices
    PerOp<std::vector<CpuMatrix>> expert_matrices_;           // the ExpertMatMuls' experts
    ThreadPool &pool_;
    KvCache *model_kv_;
    std::optional<KvCache> local_kv_;
    bool fixed_rows_;
    int32_t rows_ = 0;  // rows every tensor holds now
    std::vector<Tensor> tensors_;
    std::vector<BlockAttention> block_attention_;              // per thread
    std::vector<std::vector<AttentionQuery>> queries_;        // per thread
    std::vector<Part> parts_;                                 // run_segments' segments
    std::vector<int64_t> part_tasks_;                         // attention: tasks before each part
    std::vector<uint8_t> quant_scratch_;
    // ExpertMatMul: the batch's slots grouped by expert (slot = row * top_k + j), and their gathered inputs and
    // outputs.
    std::vector<int32_t> expert_start_, expert_slots_;
    std::vector<float> expert_in_, expert_out_;
    const std::vector<float> no_factors_;  // a sliding layer's RoPE has no frequency factors
};

}  // namespace specula::internal
