// The LongSpec draft layer on the GPU, beside the target (same device, same stream), reading the target's F16 cache
// of the cross-attention layer in place: nothing crosses PCIe but the tokens, the rows' key lists and each level's
// candidates for the beam search, which stays on the host (speculative/beam_tree.cpp, as for the CPU drafter): the
// level's rows are ranked on the device (kernels/topk.cu) and only each row's k best (log-prob, id) pairs come
// back. Full logits come back only when the beam search needs them (a contextual penalty, a sampled chain, the
// root's logits) or when SPECULA_CUDA_DEVICE_TOPK=0 turns the device ranking off.
//
// Same computation as speculative/longspec_drafter.cpp (see its header for the layer): the ring of the last
// window + 1 committed positions and the tree's nodes are slots of one F16 key/value buffer; self-attention reads
// each row's visible slots as an explicit key list (ring slots in position order, then its ancestors), and
// cross-attention is a plain prefix over the target's cache. Every buffer is sized at creation from (window, tree
// nodes, n_ctx's chunk count bound), so allocated_bytes() is the same at any context length.
#include "backends/cuda/cuda_runner.h"
#include "backends/cuda/graph_replay.h"
#include "backends/cuda/kernels/topk.h"

#include "formats/half.h"
#include "core/error.h"
#include "model/model.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr int32_t kCrossChunks = 32;  // cross-attention splits the target's prefix into at most this many chunks
constexpr int32_t kSelfChunk = 64;

class CudaLongSpecDrafter final : public LongSpecDrafterBase {
public:
    CudaLongSpecDrafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, CudaRunner &target)
        : LongSpecDrafterBase(max_tree_nodes, draft->target().hparams().n_vocab, draft->config().window + 1, draft->target().hparams().n_embd_kv(),
                              KvType::F16),
          draft_(std::move(draft)), target_(target), cfg_(draft_->config()),
          hp_(draft_->target().hparams()) {
        require(max_tree_nodes >= 0 && max_tree_nodes <= 4096, SPECULA_ERR_INVALID_ARGUMENT, "longspec: max tree nodes must be in [0, 4096]");
        check(cudaSetDevice(target_.device()), "cudaSetDevice");
        ring_ = cfg_.window + 1;
        rows_ = std::max(max_nodes_ + 1, 64);
        const LongSpecWeights &w = draft_->weights();
        wq_ = up_.matrix(w.wq), wk_ = up_.matrix(w.wk), wv_ = up_.matrix(w.wv), wo_ = up_.matrix(w.wo);
        cross_wq_ = up_.matrix(w.cross_wq), cross_wo_ = up_.matrix(w.cross_wo);
        gate_w_ = up_.matrix(w.ffn_gate), up_w_ = up_.matrix(w.ffn_up), down_w_ = up_.matrix(w.ffn_down);
        attn_norm_ = up_.floats(w.attn_norm), cross_norm_ = up_.floats(w.cross_norm), ffn_norm_ = up_.floats(w.ffn_norm);
        bq_ = up_.floats(w.bq), bk_ = up_.floats(w.bk), bv_ = up_.floats(w.bv), cross_bq_ = up_.floats(w.cross_bq);

        const size_t d = size_t(hp_.n_embd), dq = size_t(hp_.n_embd_q()), dkv = size_t(hp_.n_embd_kv()), R = size_t(rows_);
        self_.n_head = cross_.n_head = hp_.n_head;
        self_.n_head_kv = cross_.n_head_kv = hp_.n_head_kv;
        self_.head_dim = cross_.head_dim = hp_.head_dim;
        self_.scale = cross_.scale = 1.0f / std::sqrt(float(hp_.head_dim));
        self_.chunk = kSelfChunk;
        cross_.chunk = 64;  // per round: set so that the prefix has at most kCrossChunks chunks
        const int32_t self_keys = ring_ + max_nodes_;
        kv_k_ = DeviceBuffer(size_t(ring_ + max_nodes_) * dkv * 2);
        kv_v_ = DeviceBuffer(kv_k_.bytes());
        x_ = DeviceBuffer(R * d * 4);
        xb_ = DeviceBuffer(R * std::max(d, dq) * 4);
        q_ = DeviceBuffer(R * dq * 4);
        k_ = DeviceBuffer(R * dkv * 4);
        v_ = DeviceBuffer(R * dkv * 4);
        att_ = DeviceBuffer(R * dq * 4);
        gate_ = DeviceBuffer(R * size_t(cfg_.n_ff) * 4);
        up_buf_ = DeviceBuffer(gate_.bytes());
        logits_ = DeviceBuffer(size_t(max_nodes_ + 1) * size_t(hp_.n_vocab) * 4);
        // A level's candidates: logp then ids, kTopkMaxK per row at most.
        topk_ = DeviceBuffer(size_t(max_nodes_ + 1) * size_t(kTopkMaxK) * 8);
        host_topk_.reserve(topk_.bytes());
        if (const char *env = std::getenv("SPECULA_CUDA_DEVICE_TOPK")) device_topk_ = std::strcmp(env, "0") != 0;
        size_t gemm = gemm_scratch_bytes(target_.weights().output, max_nodes_ + 1);
        for (const DeviceMatrix *m : {&wq_, &wk_, &wv_, &wo_, &cross_wq_, &cross_wo_, &gate_w_, &up_w_, &down_w_})
            gemm = std::max(gemm, gemm_scratch_bytes(*m, rows_));
        gemm_ = DeviceBuffer(std::max<size_t>(gemm, 256));
        const size_t chunk_slots = size_t(std::max(kCrossChunks + 1, (self_keys + kSelfChunk - 1) / kSelfChunk));
        partials_ = DeviceBuffer(R * size_t(hp_.n_head) * chunk_slots * size_t(hp_.head_dim + 2) * 4);
        // tokens, positions, tail starts and lengths, and up to ring_ + depth key slots per row
        ints_capacity_ = 4 * R + R * size_t(self_keys);
        ints_ = DeviceBuffer(ints_capacity_ * 4);
        host_ints_.reserve(ints_capacity_ * 4);
        host_logits_.reserve(logits_.bytes());
        check(cudaMemset(kv_k_.as(), 0, kv_k_.bytes()), "cudaMemset");
        check(cudaMemset(kv_v_.as(), 0, kv_v_.bytes()), "cudaMemset");
        ring_pos_.assign(size_t(ring_), -1);
    }

    ~CudaLongSpecDrafter() override {
        for (cudaGraphExec_t &g : level_graphs_)
            if (g != nullptr) cudaGraphExecDestroy(g);
    }

    void rewind(int32_t n_tokens) override { n_done_ = std::min(n_done_, std::max(n_tokens, 0)); }

    size_t allocated_bytes() const override {
        size_t total = up_.bytes() + host_staging_bytes();
        for (const DeviceBuffer *b : {&kv_k_, &kv_v_, &x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_buf_, &logits_, &topk_, &gemm_, &partials_, &ints_})
            total += b->bytes();
        return total + ring_pos_.capacity() * sizeof(int32_t);
    }

private:
    // A level's rows on the device: tokens, positions, tail starts and lengths, then the key slots.
    struct LevelRows {
        const int32_t *d = nullptr;
        size_t starts_at = 0;
        int32_t max_keys = 0;
    };

    // The ring's F16 rows are copied through the target's stream (snapshots are rare: no pinned staging).
    LongSpecRing ring() const override {
        LongSpecRing r;
        r.type = KvType::F16;
        r.n_done = n_done_;
        r.positions = ring_pos_;
        const size_t bytes = size_t(ring_) * size_t(hp_.n_embd_kv()) * 2;
        r.k.resize(bytes);
        r.v.resize(bytes);
        check(cudaSetDevice(target_.device()), "cudaSetDevice");
        check(cudaStreamSynchronize(target_.stream()), "LongSpec ring read");
        check(cudaMemcpy(r.k.data(), kv_k_.as(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (LongSpec ring)");
        check(cudaMemcpy(r.v.data(), kv_v_.as(), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (LongSpec ring)");
        return r;
    }
    void set_ring(const LongSpecRing &r) override {
        check(cudaSetDevice(target_.device()), "cudaSetDevice");
        check(cudaStreamSynchronize(target_.stream()), "LongSpec ring write");
        check(cudaMemcpy(kv_k_.as(), r.k.data(), r.k.size(), cudaMemcpyHostToDevice), "cudaMemcpy (LongSpec ring)");
        check(cudaMemcpy(kv_v_.as(), r.v.data(), r.v.size(), cudaMemcpyHostToDevice), "cudaMemcpy (LongSpec ring)");
        n_done_ = r.n_done;
        ring_pos_ = r.positions;
    }

    size_t host_staging_bytes() const { return ints_capacity_ * 4 + logits_.bytes() + topk_.bytes(); }

    void begin_round(const DraftRequest &request) override {
        const int32_t n = int32_t(request.tokens.size());
        require(n >= 1, SPECULA_ERR_INTERNAL, "longspec: empty context");
        check(cudaSetDevice(target_.device()), "cudaSetDevice");
        root_pos_ = n - 1;
        n_target_kv_ = std::min(request.n_target_kv, n - 1);
        catch_up(request.tokens);
    }

    // Uploads the rows' integer data: tokens, positions, then (for self-attention) tail starts, lengths and slots.
    int32_t *upload_ints(const std::vector<int32_t> &ints) {
        require(ints.size() <= ints_capacity_, SPECULA_ERR_INTERNAL, "longspec (CUDA): row data larger than allocated");
        check(cudaStreamSynchronize(target_.stream()), "draft step");  // the pinned staging is about to be rewritten
        std::memcpy(host_ints_.as(), ints.data(), ints.size() * 4);
        check(cudaMemcpyAsync(ints_.as(), host_ints_.as(), ints.size() * 4, cudaMemcpyHostToDevice, target_.stream()), "cudaMemcpyAsync");
        return ints_.as<int32_t>();
    }

    // x = embed(tokens); xb = norm(x); k, v projected (+ biases) and k rotated at the rows' positions.
    void project_kv(const int32_t *d_tokens, const int32_t *d_positions, int32_t count) {
        cudaStream_t st = target_.stream();
        const int32_t d = hp_.n_embd, dkv = hp_.n_embd_kv();
        embed(target_.weights().token_embd, d_tokens, count, x_.as<float>(), st);
        rmsnorm(x_.as<float>(), attn_norm_, count, d, cfg_.norm_eps, xb_.as<float>(), st);
        gemm(wk_, xb_.as<float>(), count, k_.as<float>(), gemm_.as(), st);
        gemm(wv_, xb_.as<float>(), count, v_.as<float>(), gemm_.as(), st);
        add_bias(k_.as<float>(), bk_, count, dkv, st);
        add_bias(v_.as<float>(), bv_, count, dkv, st);
        rope(k_.as<float>(), count, hp_.n_head_kv, hp_.head_dim, hp_.rope_dim, hp_.rope_type == RopeType::Neox, d_positions, target_.rope_cos(),
             target_.rope_sin(), st);
    }

    // Writes the ring's keys/values for committed positions [max(n_done, n - ring), n).
    void catch_up(std::span<const int32_t> tokens) {
        const int32_t n = int32_t(tokens.size()), dkv = hp_.n_embd_kv();
        int32_t from = std::max(n_done_, n - ring_);
        while (from < n) {
            const int32_t count = std::min({n - from, ring_, rows_});
            std::vector<int32_t> &ints = ints_staging_;
            ints.assign(tokens.begin() + from, tokens.begin() + from + count);
            for (int32_t i = 0; i < count; ++i) ints.push_back(from + i);
            const int32_t *d = upload_ints(ints);
            project_kv(d, d + count, count);
            // Ring slots (from + i) % ring_: at most two contiguous runs.
            for (int32_t i = 0; i < count;) {
                const int32_t slot = (from + i) % ring_, run = std::min(count - i, ring_ - slot);
                store_kv(k_.as<float>() + size_t(i) * dkv, v_.as<float>() + size_t(i) * dkv, run, dkv, kv_k_.as<__half>(), kv_v_.as<__half>(), slot,
                         target_.stream());
                for (int32_t r = 0; r < run; ++r) ring_pos_[size_t(slot + r)] = from + i + r;
                i += run;
            }
            from += count;
        }
        n_done_ = n;
    }

    void score(const DraftTree &tree, int32_t first, int32_t count, float *logits) override {
        run_level(tree, first, count, 0);
        cudaStream_t st = target_.stream();
        const size_t bytes = size_t(count) * size_t(hp_.n_vocab) * 4;
        check(cudaMemcpyAsync(host_logits_.as(), logits_.as(), bytes, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (draft logits)");
        check(cudaStreamSynchronize(st), "draft step");
        std::memcpy(logits, host_logits_.as(), bytes);
    }

    // The level ranked on the device: count x k (log-prob, id) pairs come back instead of count x n_vocab logits.
    bool score_topk(const DraftTree &tree, int32_t first, int32_t count, int32_t k, float *logp, int32_t *ids) override {
        if (!device_topk_ || k < 1 || k > kTopkMaxK) return false;
        run_level(tree, first, count, k);
        cudaStream_t st = target_.stream();
        const size_t pairs = size_t(count) * size_t(k);
        check(cudaMemcpyAsync(host_topk_.as(), topk_.as(), pairs * 8, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (draft candidates)");
        check(cudaStreamSynchronize(st), "draft step");
        std::memcpy(logp, host_topk_.as(), pairs * 4);
        std::memcpy(ids, static_cast<const char *>(host_topk_.as()) + pairs * 4, pairs * 4);
        return true;
    }

    // One level: stages and uploads the rows' integer data (outside any graph: the upload waits for the stream
    // before it rewrites the pinned staging), then enqueues the level's kernels (the layer, the LM head and, for
    // k > 0, the device top-k), captured as a CUDA graph and replayed unless SPECULA_CUDA_GRAPHS=0. Each level is
    // captured anew (its arguments change: rows, key lists, the target's prefix) and patched into an instantiated
    // graph of the same topology by cudaGraphExecUpdate; a graph that cannot be updated is instantiated again.
    void run_level(const DraftTree &tree, int32_t first, int32_t count, int32_t k) {
        const LevelRows rows = stage_rows(tree, first, count);
        if (!target_.graphs_enabled()) {
            enqueue_level(rows, first, count, k);
            return;
        }
        // What can change the node count: a root-only level stores no key/value, an empty target prefix has no
        // cross-attention chunks, the device top-k adds a node. One instantiated graph per such topology; the row
        // count and the prefix length only change kernel arguments and grid sizes, which an update accepts.
        const uint32_t key = (count - (first == 0 ? 1 : 0) <= 0 ? 1u : 0u) | (n_target_kv_ == 0 ? 2u : 0u) | (k > 0 ? 4u : 0u);
        launch_as_graph(target_.stream(), level_graphs_[key], [&] { enqueue_level(rows, first, count, k); });
    }

    void enqueue_level(const LevelRows &rows, int32_t first, int32_t count, int32_t k) {
        forward(rows, first, count);
        if (k > 0) {
            const size_t pairs = size_t(count) * size_t(k);
            float *d_logp = topk_.as<float>();
            int32_t *d_ids = reinterpret_cast<int32_t *>(d_logp + pairs);
            row_topk(logits_.as<float>(), count, hp_.n_vocab, hp_.n_vocab, k, d_logp, d_ids, nullptr, target_.stream());
        }
    }

    // Rows: tokens, positions, and each row's visible self-attention slots (ring in position order, then the
    // ancestors within the window, in depth order), uploaded to ints_.
    LevelRows stage_rows(const DraftTree &tree, int32_t first, int32_t count) {
        require(first + count <= max_nodes_ + 1 && count <= rows_, SPECULA_ERR_INTERNAL, "longspec (CUDA): tree larger than allocated");
        std::vector<int32_t> &ints = ints_staging_;
        ints.assign(tree.tokens().begin() + first, tree.tokens().begin() + first + count);
        for (int32_t i = 0; i < count; ++i) ints.push_back(root_pos_ + tree.depth(first + i));
        const size_t starts_at = ints.size();
        ints.resize(ints.size() + 2 * size_t(count));
        ring_order_.clear();
        for (int32_t s = 0; s < ring_; ++s)
            if (ring_pos_[size_t(s)] >= 0 && ring_pos_[size_t(s)] <= root_pos_) ring_order_.push_back(s);
        std::sort(ring_order_.begin(), ring_order_.end(), [&](int32_t a, int32_t b) { return ring_pos_[size_t(a)] < ring_pos_[size_t(b)]; });
        int32_t max_keys = 0;
        for (int32_t i = 0; i < count; ++i) {
            const int32_t p = root_pos_ + tree.depth(first + i);
            const size_t start = ints.size();
            ints[starts_at + size_t(i)] = int32_t(start - starts_at - 2 * size_t(count));
            for (int32_t s : ring_order_)
                if (p - ring_pos_[size_t(s)] <= cfg_.window) ints.push_back(s);
            ancestors_.clear();
            for (int32_t j = first + i; j >= 1; j = tree.parent(j))
                if (p - (root_pos_ + tree.depth(j)) <= cfg_.window) ancestors_.push_back(ring_ + j - 1);
            ints.insert(ints.end(), ancestors_.rbegin(), ancestors_.rend());
            const int32_t len = int32_t(ints.size() - start);
            ints[starts_at + size_t(count) + size_t(i)] = len;
            max_keys = std::max(max_keys, len);
        }
        return LevelRows{upload_ints(ints), starts_at, max_keys};
    }

    // The layer and the LM head for tree nodes [first, first + count): count rows of logits in logits_. Only
    // enqueues kernels (it may be captured into a graph): no synchronisation, no copy, no allocation.
    void forward(const LevelRows &rows, int32_t first, int32_t count) {
        cudaStream_t st = target_.stream();
        const int32_t d = hp_.n_embd, dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv(), dff = cfg_.n_ff;
        const int32_t *di = rows.d, *d_tokens = di, *d_positions = di + count;
        const size_t starts_at = rows.starts_at;
        const int32_t max_keys = rows.max_keys;

        project_kv(d_tokens, d_positions, count);
        gemm(wq_, xb_.as<float>(), count, q_.as<float>(), gemm_.as(), st);
        add_bias(q_.as<float>(), bq_, count, dq, st);
        const bool neox = hp_.rope_type == RopeType::Neox;
        rope(q_.as<float>(), count, hp_.n_head, hp_.head_dim, hp_.rope_dim, neox, d_positions, target_.rope_cos(), target_.rope_sin(), st);
        // The root is committed (its key/value are in the ring); node j >= 1 goes to slot ring_ + j - 1.
        const int32_t skip = first == 0 ? 1 : 0;
        store_kv(k_.as<float>() + size_t(skip) * dkv, v_.as<float>() + size_t(skip) * dkv, count - skip, dkv, kv_k_.as<__half>(), kv_v_.as<__half>(),
                 ring_ + first + skip - 1, st);

        // Self-attention over the ring and the tree.
        AttentionRows self;
        self.n = count;
        self.n_prefix = 0;
        self.max_keys = max_keys;
        self.tail_start = di + starts_at;
        self.tail_len = di + starts_at + count;
        self.tail_slots = di + starts_at + 2 * size_t(count);
        attention_chunks(q_.as<float>(), kv_k_.as<__half>(), kv_v_.as<__half>(), dkv, self, self_, partials_.as<float>(), st);
        attention_merge(partials_.as<float>(), nullptr, self, self_, att_.as<float>(), nullptr, st);
        gemm(wo_, att_.as<float>(), count, xb_.as<float>(), gemm_.as(), st);
        add(x_.as<float>(), xb_.as<float>(), int64_t(count) * d, st);

        // Cross-attention onto the target's committed keys/values of the cross layer.
        rmsnorm(x_.as<float>(), cross_norm_, count, d, cfg_.norm_eps, xb_.as<float>(), st);
        gemm(cross_wq_, xb_.as<float>(), count, q_.as<float>(), gemm_.as(), st);
        add_bias(q_.as<float>(), cross_bq_, count, dq, st);
        rope(q_.as<float>(), count, hp_.n_head, hp_.head_dim, hp_.rope_dim, neox, d_positions, target_.rope_cos(), target_.rope_sin(), st);
        AttentionRows cross;
        cross.n = count;
        cross.n_prefix = n_target_kv_;
        cross.max_keys = n_target_kv_;
        AttentionShape cs = cross_;
        cs.chunk = std::max(64, ((n_target_kv_ + kCrossChunks - 1) / kCrossChunks + 63) / 64 * 64);
        attention_chunks(q_.as<float>(), target_.kv_k(cfg_.cross_layer), target_.kv_v(cfg_.cross_layer), dkv, cross, cs, partials_.as<float>(), st);
        attention_merge(partials_.as<float>(), nullptr, cross, cs, att_.as<float>(), nullptr, st);
        gemm(cross_wo_, att_.as<float>(), count, xb_.as<float>(), gemm_.as(), st);
        add(x_.as<float>(), xb_.as<float>(), int64_t(count) * d, st);

        // SwiGLU MLP, then the target's LM head without a final norm.
        rmsnorm(x_.as<float>(), ffn_norm_, count, d, cfg_.norm_eps, xb_.as<float>(), st);
        gemm(gate_w_, xb_.as<float>(), count, gate_.as<float>(), gemm_.as(), st);
        gemm(up_w_, xb_.as<float>(), count, up_buf_.as<float>(), gemm_.as(), st);
        swiglu(gate_.as<float>(), up_buf_.as<float>(), int64_t(count) * dff, st);
        gemm(down_w_, gate_.as<float>(), count, xb_.as<float>(), gemm_.as(), st);
        add(x_.as<float>(), xb_.as<float>(), int64_t(count) * d, st);
        gemm(target_.weights().output, x_.as<float>(), count, logits_.as<float>(), gemm_.as(), st);
    }

    std::shared_ptr<const LongSpecDraft> draft_;
    CudaRunner &target_;
    LongSpecDraftConfig cfg_;
    HParams hp_;
    int32_t ring_ = 0, rows_ = 0;
    int32_t n_done_ = 0, root_pos_ = 0, n_target_kv_ = 0;
    DeviceUploads up_;
    DeviceMatrix wq_, wk_, wv_, wo_, cross_wq_, cross_wo_, gate_w_, up_w_, down_w_;
    const float *attn_norm_ = nullptr, *cross_norm_ = nullptr, *ffn_norm_ = nullptr;
    const float *bq_ = nullptr, *bk_ = nullptr, *bv_ = nullptr, *cross_bq_ = nullptr;
    AttentionShape self_, cross_;
    DeviceBuffer kv_k_, kv_v_;  // [ring_ + max_nodes_][n_embd_kv] F16: the ring, then tree nodes 1..
    DeviceBuffer x_, xb_, q_, k_, v_, att_, gate_, up_buf_, logits_, topk_, gemm_, partials_, ints_;
    PinnedBuffer host_ints_, host_logits_, host_topk_;
    bool device_topk_ = true;  // SPECULA_CUDA_DEVICE_TOPK=0: every level's full logits go to the host
    size_t ints_capacity_ = 0;
    cudaGraphExec_t level_graphs_[8] = {};  // by topology (run_level's key); SPECULA_CUDA_GRAPHS=0: none
    std::vector<int32_t> ring_pos_, ring_order_, ancestors_, ints_staging_;
};

}  // namespace

std::unique_ptr<Drafter> CudaRunner::make_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes) {
    return std::make_unique<CudaLongSpecDrafter>(std::move(draft), max_tree_nodes, *this);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
