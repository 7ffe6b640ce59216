// One pass for several sessions on the CPU (cpu_session_batch.h).
#include "backends/cpu/cpu_session_batch.h"

#include "graph/model_graph.h"

#include <algorithm>
#include <cstring>

namespace specula::internal {

namespace {
// A request whose wanted logits are at most this many rows (a decode step's one, a prompt's last) has them gathered
// with the others' into one product with the output matrix, the largest of a small model; longer runs (a prompt's
// every row) go straight into the caller's memory.
constexpr int32_t kGatheredRows = 4;
// Rows of one gathered product: bounds the scratch logits (n_vocab floats a row).
constexpr int32_t kHeadChunk = 64;
}  // namespace

CpuSessionBatch::CpuSessionBatch(std::shared_ptr<const Model> model, std::shared_ptr<const Graph> graph, int n_threads)
    : model_(std::move(model)), pool_(n_threads), exec_(std::move(graph), 0, pool_, nullptr, true) {}

bool CpuSessionBatch::compatible(const Model *model, const Graph &graph) const {
    return model == model_.get() && graph.rope_freq_factors == exec_.graph().rope_freq_factors;
}

void CpuSessionBatch::run(std::vector<Request *> &requests) {
    const Graph &g = exec_.graph();
    int32_t total = 0;
    for (Request *r : requests) total += static_cast<CpuRequest *>(r)->batch->n;
    all_.reset(total);
    segments_.clear();
    int32_t base = 0;
    for (Request *r : requests) {
        const CpuRequest &c = *static_cast<CpuRequest *>(r);
        std::copy_n(c.batch->tokens(), c.batch->n, all_.tokens_mut() + base);
        std::copy_n(c.batch->positions(), c.batch->n, all_.positions_mut() + base);
        segments_.push_back(CpuExecutor::KvSegment{c.batch, c.kv, base});
        base += c.batch->n;
    }
    exec_.run_segments(kBodyStage, all_, segments_);

    const TensorId hidden = g.hidden, out = g.logits;
    const size_t hidden_bytes = size_t(g.tensors[size_t(hidden)].width) * sizeof(float);
    const int32_t n_vocab = g.tensors[size_t(out)].width;
    // Lazy trees' final states to their runners; long runs of logits straight to their callers. Both before the
    // gathering below moves rows.
    for (size_t i = 0; i < requests.size(); ++i) {
        CpuRequest &c = *static_cast<CpuRequest *>(requests[i]);
        const int32_t at = segments_[i].base, n = c.batch->n;
        if (c.logits == nullptr) {
            std::memcpy(c.hidden_to->rows_for(hidden, n), exec_.row(hidden, at), size_t(n) * hidden_bytes);
        } else if (n - c.first > kGatheredRows) {
            exec_.bind(out, c.logits, at + c.first);
            exec_.run_rows(kHeadStage, all_, at + c.first, n - c.first);
            exec_.unbind(out);
        }
    }
    // The other wanted rows, moved to the front of the hidden rows (a row only ever moves down, past rows already
    // done), a chunk at a time through one product.
    gathered_.clear();
    auto flush = [&] {
        const int32_t n = int32_t(gathered_.size());
        if (n == 0) return;
        head_logits_.resize(size_t(n) * size_t(n_vocab));
        exec_.bind(out, head_logits_.data(), 0);
        exec_.run_rows(kHeadStage, all_, 0, n);
        exec_.unbind(out);
        for (int32_t k = 0; k < n; ++k) {
            const CpuRequest &c = *gathered_[size_t(k)].first;
            std::memcpy(c.logits + int64_t(gathered_[size_t(k)].second - c.first) * n_vocab, head_logits_.data() + int64_t(k) * n_vocab,
                        size_t(n_vocab) * sizeof(float));
        }
        gathered_.clear();
    };
    for (size_t i = 0; i < requests.size(); ++i) {
        CpuRequest &c = *static_cast<CpuRequest *>(requests[i]);
        if (c.logits == nullptr || c.batch->n - c.first > kGatheredRows) continue;
        for (int32_t r = c.first; r < c.batch->n; ++r) {
            const int32_t k = int32_t(gathered_.size());
            float *dst = exec_.row(hidden, k);
            const float *src = exec_.row(hidden, segments_[i].base + r);
            if (dst != src) std::memmove(dst, src, hidden_bytes);
            gathered_.emplace_back(&c, r);
            if (int32_t(gathered_.size()) == kHeadChunk) flush();
        }
    }
    flush();
}

}  // namespace specula::internal
