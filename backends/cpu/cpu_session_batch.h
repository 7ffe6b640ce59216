// Cross-session batching on the CPU (backend/session_batch.h): the waiting sessions' batches run as one pass of one
// executor on the group's threads. The layers' matrix products run once over every session's rows (each weight read
// once per step for all of them: what makes N slots cheaper than N passes), StoreKv and Attention per session on its
// own cache (CpuExecutor::run_segments); the output head runs once over the rows whose logits are wanted, a lazy
// tree's final states go back to its runner (CpuRunner::tree_logits computes the rows a verifier visits).
#pragma once

#include "backend/session_batch.h"
#include "backends/cpu/cpu_executor.h"
#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"
#include "graph/batch_rows.h"

#include <memory>
#include <vector>

namespace specula::internal {

class CpuSessionBatch final : public SessionBatch {
public:
    // graph: the model's graph as the first member built it (members must build the same: compatible()).
    CpuSessionBatch(std::shared_ptr<const Model> model, std::shared_ptr<const Graph> graph, int n_threads);

    struct CpuRequest : Request {
        const BatchRows *batch = nullptr;  // the runner's planned rows
        KvCache *kv = nullptr;             // its cache
        int32_t first = 0;                 // logits wanted for rows [first, batch->n) ...
        float *logits = nullptr;           // ... into here (n_vocab floats a row); null: a lazy tree, whose final
        CpuExecutor *hidden_to = nullptr;  // states go to rows [0, n) of this executor's graph.hidden
    };

    // Whether a runner of this model with this graph can join (the same model and the same RoPE factors: a graph
    // built for another context length may rotate differently).
    bool compatible(const Model *model, const Graph &graph) const;
    size_t allocated_bytes() const { return exec_.allocated_bytes() + head_logits_.capacity() * sizeof(float); }

protected:
    void run(std::vector<Request *> &requests) override;

private:
    std::shared_ptr<const Model> model_;
    ThreadPool pool_;
    CpuExecutor exec_;
    BatchRows all_;  // every row's token and position
    std::vector<CpuExecutor::KvSegment> segments_;
    std::vector<float> head_logits_;  // the gathered rows' logits
    std::vector<std::pair<CpuRequest *, int32_t>> gathered_;  // (request, its row) of a gathered head chunk
};

}  // namespace specula::internal
