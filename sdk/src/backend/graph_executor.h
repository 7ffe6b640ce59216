// Runs a graph (graph/graph.h) on a backend: its tensors in the backend's memory, its operations as the backend's
// kernels, its KvStore::Model operations on the cache of the target runner that made it (TargetRunner::
// make_executor), on that runner's device, stream and threads. The core's drafters that are graphs (LongSpec's
// layer: speculative/longspec_drafter.h) compute through this; each backend's own runner executes the target's
// graph with the same executor class.
#pragma once

#include "backend/kv_type.h"
#include "graph/batch_rows.h"
#include "graph/graph.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace specula::internal {

struct ExecutorRequest {
    std::shared_ptr<const Graph> graph;
    int32_t max_rows = 1;  // the most rows a batch will have (buffers are sized for it once)
};

class GraphExecutor {
public:
    virtual ~GraphExecutor() = default;

    // Runs stage `stage` of the graph over the batch's rows (rows.n <= max_rows). When `logits` is not null it
    // receives every row's graph.logits (rows.n x width floats) when the stage is done. `replay`: the stage will run
    // again and again with the same shape (a draft's tree levels), so a backend may record it once and replay it
    // (CUDA graphs).
    virtual void run(int32_t stage, const BatchRows &rows, float *logits, bool replay) = 0;
    // The same, but each row's logits are ranked where they are and only the k best (log-softmax value, id) pairs
    // per row come back (logp and ids: rows.n x k, best first; ties: lowest id), as speculative/beam_tree.h's
    // ScoreTopkFn. False, with nothing run, when this backend does not rank (the caller then runs run() and ranks).
    virtual bool run_top_k(int32_t stage, const BatchRows &rows, int32_t k, float *logp, int32_t *ids, bool replay) {
        (void)stage, (void)rows, (void)k, (void)logp, (void)ids, (void)replay;
        return false;
    }

    // The executor's own key/value store (Graph::local_kv_slots rows of the graph's KV width), as the backend keeps
    // it: snapshots copy its rows. The caller keeps ranges inside the store.
    virtual KvType local_kv_type() const = 0;
    virtual void read_local_kv(KvPart part, int32_t first, int32_t n, void *dst) = 0;
    virtual void write_local_kv(KvPart part, int32_t first, int32_t n, const void *src) = 0;

    // Bytes the executor holds: buffers, its own store, weight copies it made (not those shared with the runner).
    virtual size_t allocated_bytes() const = 0;
};

}  // namespace specula::internal
