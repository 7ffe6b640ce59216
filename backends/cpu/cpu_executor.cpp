// The CPU reference of every graph operation (graph/graph.h), read top to bottom as llama2.c: each operation is a
// loop over the batch's rows calling the operators of ops.h, or one matrix product over all of them.
#include "backends/cpu/cpu_executor.h"

#include "backends/cpu/ops.h"
#include "graph/expert_slots.h"
#include "core/error.h"

#include <algorithm>
#include <cstring>

namespace specula::internal {

namespace {
// Rows of one part per attention task (with their group's query heads): a tree of 16 nodes over a KV head is one task,
// its prefix blocks read once.
constexpr int32_t kAttentionRowsPerTask = 16;
}  // namespace

CpuExecutor::CpuExecutor(std::shared_ptr<const Graph> graph, int32_t max_rows, ThreadPool &pool, KvCache *model_kv, bool caches_per_pass)
    : graph_(std::move(graph)), weights_(CpuWeights::for_graph(*graph_)), pool_(pool), model_kv_(model_kv), fixed_rows_(max_rows > 0) {
    const Graph &g = *graph_;
    matrices_ = per_op<CpuMatrix>(g, [&](const Op &op) {
        CpuMatrix m;
        if (op.kind == OpKind::MatMul)
            for (size_t i = 0; i < g.sources.size(); ++i)
                if (g.sources[i].holds(*op.weight)) m = weights_[i]->matrix(*op.weight);
        require(op.kind != OpKind::MatMul || m.w != nullptr, SPECULA_ERR_INTERNAL, "CPU: a matrix of the graph lies in none of its files");
        require((op.kind != OpKind::StoreKv && op.kind != OpKind::Attention) || op.store == KvStore::Local || model_kv_ != nullptr || caches_per_pass,
                SPECULA_ERR_INTERNAL, "CPU: the graph reads a runner's cache it was not given");
        return m;
    });
    expert_matrices_ = per_op<std::vector<CpuMatrix>>(g, [&](const Op &op) {
        std::vector<CpuMatrix> experts;
        for (int32_t e = 0; e < op.n_experts; ++e)
            for (size_t i = 0; i < g.sources.size(); ++i)
                if (g.sources[i].holds(op.experts[e])) experts.push_back(weights_[i]->matrix(op.experts[e]));
        require(int32_t(experts.size()) == op.n_experts, SPECULA_ERR_INTERNAL, "CPU: an expert's matrix lies in none of the graph's files");
        return experts;
    });
    const ExpertShape experts = expert_shape(g);  // reserved below for fixed batches
    for (const GraphTensor &t : g.tensors) tensors_.push_back(Tensor{{}, t.width});
    if (g.local_kv_slots > 0) local_kv_.emplace(0, 1, g.local_kv_slots, g.hp.n_embd_kv(), KvType::F32, g.hp.head_dim);
    // Attention scratch, one per thread and built in place: a copy would not keep the reservations its constructor
    // made, and the bytes must not depend on which threads happened to run.
    const int32_t group = g.hp.n_head / g.hp.n_head_kv;
    queries_.resize(size_t(pool_.size()));
    for (int t = 0; t < pool_.size(); ++t) block_attention_.emplace_back(g.hp.head_dim);
    if (fixed_rows_) {
        ensure_rows(max_rows);
        if (experts.top_k > 0) {
            const size_t slots = size_t(max_rows) * size_t(experts.top_k);
            expert_slots_.reserve(slots);
            expert_start_.reserve(size_t(experts.n_experts) + 1);
            expert_in_.reserve(slots * size_t(experts.widest));
            expert_out_.reserve(slots * size_t(experts.widest));
        }
        // An attention task holds at most kAttentionRowsPerTask rows (attention()), each with its group's query heads.
        const size_t task_rows = size_t(std::min(max_rows, kAttentionRowsPerTask)) * size_t(group);
        for (auto &q : queries_) q.reserve(task_rows);
        for (BlockAttention &b : block_attention_) {
            b.reserve_rows(task_rows);
            b.reserve_tail(size_t(g.local_kv_slots));
        }
    }
}

void CpuExecutor::ensure_rows(int32_t rows) {
    if (rows <= rows_) return;
    require(!fixed_rows_ || rows_ == 0, SPECULA_ERR_INTERNAL, "CPU: a batch larger than the executor was made for");
    for (Tensor &t : tensors_) t.data.resize(size_t(rows) * size_t(t.width));
    rows_ = rows;
}

void CpuExecutor::bind(TensorId t, float *dst, int32_t first) {
    tensor(t).external = dst;
    tensor(t).external_first = first;
}

void CpuExecutor::unbind(TensorId t) { tensor(t).external = nullptr; }

bool CpuExecutor::run_rows(int32_t stage, const BatchRows &rows, int32_t first, int32_t count, const std::atomic<bool> *cancel) {
    const Part part{&rows, model_kv_, 0, first, count};
    return run_parts(stage, rows, first, count, &part, 1, cancel);
}

void CpuExecutor::run_segments(int32_t stage, const BatchRows &all, const std::vector<KvSegment> &segments) {
    parts_.clear();
    for (const KvSegment &s : segments) parts_.push_back(Part{s.rows, s.kv, s.base, 0, s.rows->n});
    run_parts(stage, all, 0, all.n, parts_.data(), parts_.size(), nullptr);
}

// Tensor rows [first, first + count); `all` gives each its token and position, the parts their keys.
bool CpuExecutor::run_parts(int32_t stage, const BatchRows &rows, int32_t first, int32_t count, const Part *parts, size_t n_parts,
                            const std::atomic<bool> *cancel) {
    const Graph &g = *graph_;
    ensure_rows(first + count);
    const std::vector<Op> &ops = g.stages[size_t(stage)];
    const int32_t end = first + count;
    int32_t block = -2;
    for (size_t o = 0; o < ops.size(); ++o) {
        const Op &op = ops[o];
        if (op.block != block) {  // a new layer: where a cancel lands
            block = op.block;
            if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return false;
        }
        switch (op.kind) {
        case OpKind::Embed:
            for (int32_t r = first; r < end; ++r) get_row(*op.weight, rows.tokens()[r], row(op.dst, r));
            break;
        case OpKind::RmsNorm: {
            const int32_t parts = std::max(1, op.n_heads), width = tensor(op.dst).width / parts;
            for (int32_t r = first; r < end; ++r)
                for (int32_t h = 0; h < parts; ++h) rmsnorm(row(op.dst, r) + h * width, row(op.src, r) + h * width, op.weight->floats(), width, op.eps);
            break;
        }
        case OpKind::MatMul: matmul(pool_, matrices_[size_t(stage)][o], row(op.src, first), count, row(op.dst, first), quant_scratch_); break;
        case OpKind::AddBias:
            for (int32_t r = first; r < end; ++r) add(row(op.dst, r), op.weight->floats(), tensor(op.dst).width);
            break;
        case OpKind::Rope:
            for (int32_t r = first; r < end; ++r)
                rope(row(op.dst, r), op.n_heads, op.sliding ? g.hp_sliding : g.hp, op.sliding ? no_factors_ : g.rope_freq_factors, rows.positions()[r]);
            break;
        case OpKind::StoreKv:
            for (size_t p = 0; p < n_parts; ++p) {
                const Part &part = parts[p];
                for (const StoreRun &s : part.rows->stores)
                    for (int32_t r = std::max(part.first, s.row); r < std::min(part.first + part.count, s.row + s.count); ++r)
                        store(op, part).store(op.kv_layer, s.slot + (r - s.row), row(op.src, part.base + r), row(op.src2, part.base + r));
            }
            break;
        case OpKind::Attention: attention(op, parts, n_parts); break;
        case OpKind::SwiGlu: swiglu(row(op.dst, first), row(op.src, first), int64_t(count) * tensor(op.dst).width); break;
        case OpKind::Add: add(row(op.dst, first), row(op.src, first), int64_t(count) * tensor(op.dst).width); break;
        case OpKind::GeGlu: {
            // tanh costs ~10 ns an element: a decode step of Gemma 3 1B has 180K of them, so the rows' elements are
            // split over the pool (each element's arithmetic is the same wherever it runs).
            float *gate = row(op.dst, first);
            const float *up = row(op.src, first);
            const int64_t n = int64_t(count) * tensor(op.dst).width;
            constexpr int64_t kPerTask = 2048;
            if (n < 2 * kPerTask) {
                geglu(gate, up, n);
                break;
            }
            pool_.run((n + kPerTask - 1) / kPerTask, [&](int64_t t, int) {
                const int64_t a = t * kPerTask;
                geglu(gate + a, up + a, std::min(kPerTask, n - a));
            });
            break;
        }
        case OpKind::Scale: scale(row(op.dst, first), op.value, int64_t(count) * tensor(op.dst).width); break;
        case OpKind::SoftCap: softcap(row(op.dst, first), op.value, int64_t(count) * tensor(op.dst).width); break;
        case OpKind::LayerNorm:
            for (int32_t r = first; r < end; ++r) layernorm(row(op.dst, r), row(op.src, r), op.weight->floats(), tensor(op.dst).width, op.eps);
            break;
        case OpKind::Route:
            for (int32_t r = first; r < end; ++r) route_experts(row(op.dst, r), row(op.src, r), tensor(op.src).width, op.top_k, op.norm_weights);
            break;
        case OpKind::ExpertMatMul: expert_matmul(op, expert_matrices_[size_t(stage)][o], first, count); break;
        case OpKind::MixExperts:
            for (int32_t r = first; r < end; ++r) mix_experts(row(op.dst, r), row(op.src, r), row(op.src2, r), op.top_k, tensor(op.dst).width);
            break;
        case OpKind::SigmoidGate:
            for (int32_t r = first; r < end; ++r) sigmoid_gate(row(op.dst, r), row(op.src, r)[0], tensor(op.dst).width);
            break;
        case OpKind::Gelu: {
            // tanh costs ~10 ns an element (as GeGlu's): the rows' elements are split over the pool.
            float *x = row(op.dst, first);
            const int64_t n = int64_t(count) * tensor(op.dst).width;
            constexpr int64_t kPerTask = 2048;
            if (n < 2 * kPerTask) {
                gelu(x, n);
                break;
            }
            pool_.run((n + kPerTask - 1) / kPerTask, [&](int64_t t, int) {
                const int64_t a = t * kPerTask;
                gelu(x + a, std::min(kPerTask, n - a));
            });
            break;
        }
        }
    }
    return true;
}

// Multi-head attention of the rows (block_attention.h): one task per KV head and run of up to kRowsPerTask rows of
// one part, holding the query heads of that KV head's group, so the prefix blocks are read once per task. A row's
// arithmetic does not depend on the task it lands in, nor on the other parts (sessions) of the pass.
void CpuExecutor::attention(const Op &op, const Part *parts, size_t n_parts) {
    const HParams &hp = graph_->hp;
    const int32_t hd = hp.head_dim, group = hp.n_head / hp.n_head_kv;
    const float scale = graph_->attention_scale;
    constexpr int32_t kRowsPerTask = kAttentionRowsPerTask;
    auto chunks_of = [&](const Part &p) { return (p.count + kRowsPerTask - 1) / kRowsPerTask; };
    part_tasks_.resize(n_parts + 1);
    part_tasks_[0] = 0;
    int64_t work = 0;  // about: multiply-adds of the scores
    for (size_t p = 0; p < n_parts; ++p) {
        part_tasks_[p + 1] = part_tasks_[p] + int64_t(hp.n_head_kv) * chunks_of(parts[p]);
        work += int64_t(hp.n_head) * parts[p].count * parts[p].rows->lists[size_t(op.keys)].max_keys * hd;
    }
    auto task = [&](int64_t t, int thread) {
        size_t p = 0;
        while (t >= part_tasks_[p + 1]) ++p;
        const Part &part = parts[p];
        const BatchRows &rows = *part.rows;
        const KeyList &list = rows.lists[size_t(op.keys)];
        const int32_t chunks = chunks_of(part);
        const int64_t local = t - part_tasks_[p];
        const int32_t kv_head = int32_t(local / chunks), i0 = part.first + int32_t(local % chunks) * kRowsPerTask,
                      i1 = std::min(part.first + part.count, i0 + kRowsPerTask);
        std::vector<AttentionQuery> &queries = queries_[size_t(thread)];
        queries.clear();
        for (int32_t i = i0; i < i1; ++i) {
            float *q = row(op.src, part.base + i), *out = row(op.dst, part.base + i);
            const int32_t n_extra = rows.n_extra(list, i);
            const int32_t *extra = n_extra > 0 ? rows.extra(list, i) : nullptr;
            for (int32_t gi = 0; gi < group; ++gi) {
                const int64_t h = int64_t(kv_head) * group + gi;
                queries.push_back(AttentionQuery{q + h * hd, out + h * hd, rows.run_of(list, i), extra, n_extra, rows.run_from(list, i)});
            }
        }
        KvCache &kv = store(op, part);
        block_attention_[size_t(thread)].set_softcap(op.value);
        block_attention_[size_t(thread)].run(kv.keys(op.kv_layer), kv.values(op.kv_layer), kv_head * hd, scale, queries);
    };
    const int64_t tasks = part_tasks_[n_parts];
    if (work < (int64_t(1) << 16)) {
        for (int64_t t = 0; t < tasks; ++t) task(t, 0);
    } else {
        pool_.run(tasks, task);
    }
}

// The rows' slots grouped by expert (graph/expert_slots.h, slots in row order within an expert), then one matrix
// product per selected expert over its gathered inputs: each expert's weights are read once per batch, however many
// of a tree's rows chose it. A slot's arithmetic is MatMul's for one row (batch invariant), so grouping changes no bit.
void CpuExecutor::expert_matmul(const Op &op, const std::vector<CpuMatrix> &experts, int32_t first, int32_t count) {
    const int32_t k = op.top_k, n_experts = op.n_experts;
    const int64_t cols = op.experts[0].cols, out_rows = op.experts[0].rows;
    const bool per_slot = int64_t(tensor(op.src).width) == int64_t(k) * cols;  // else one input for every slot
    const int32_t slots = count * k;
    expert_slots_.resize(size_t(slots));
    group_slots_by_expert(row(op.src2, first), count, k, n_experts, expert_start_, expert_slots_.data());
    auto input = [&](int32_t slot) { return row(op.src, first + slot / k) + (per_slot ? int64_t(slot % k) * cols : 0); };
    auto output = [&](int32_t slot) { return row(op.dst, first + slot / k) + int64_t(slot % k) * out_rows; };
    for (int32_t e = 0; e < n_experts; ++e) {
        const int32_t a = expert_start_[size_t(e)], n = expert_start_[size_t(e) + 1] - a;
        if (n == 0) continue;
        if (n == 1) {  // a decode step's usual case: straight from the input to the output
            matmul(pool_, experts[size_t(e)], input(expert_slots_[size_t(a)]), 1, output(expert_slots_[size_t(a)]), quant_scratch_);
            continue;
        }
        expert_in_.resize(size_t(n) * size_t(cols));
        expert_out_.resize(size_t(n) * size_t(out_rows));
        for (int32_t i = 0; i < n; ++i) std::memcpy(expert_in_.data() + int64_t(i) * cols, input(expert_slots_[size_t(a + i)]), size_t(cols) * sizeof(float));
        matmul(pool_, experts[size_t(e)], expert_in_.data(), n, expert_out_.data(), quant_scratch_);
        for (int32_t i = 0; i < n; ++i)
            std::memcpy(output(expert_slots_[size_t(a + i)]), expert_out_.data() + int64_t(i) * out_rows, size_t(out_rows) * sizeof(float));
    }
}

void CpuExecutor::run(int32_t stage, const BatchRows &rows, float *logits, bool replay) {
    (void)replay;
    if (logits != nullptr) bind(graph_->logits, logits, 0);
    run_rows(stage, rows, 0, rows.n);
    if (logits != nullptr) unbind(graph_->logits);
}

void CpuExecutor::read_local_kv(KvPart part, int32_t first, int32_t n, void *dst) {
    local_kv_->read_rows(0, part, first, n, dst);
}

void CpuExecutor::write_local_kv(KvPart part, int32_t first, int32_t n, const void *src) {
    local_kv_->write_rows(0, part, first, n, src);
}

size_t CpuExecutor::allocated_bytes() const {
    size_t total = quant_scratch_.capacity() + (local_kv_ ? local_kv_->bytes() : 0) +
                   (expert_start_.capacity() + expert_slots_.capacity()) * sizeof(int32_t) +
                   (expert_in_.capacity() + expert_out_.capacity()) * sizeof(float);
    for (const Tensor &t : tensors_) total += t.data.capacity() * sizeof(float);
    for (const BlockAttention &b : block_attention_) total += b.bytes();
    for (const auto &q : queries_) total += q.capacity() * sizeof(AttentionQuery);
    return total;
}

}  // namespace specula::internal
