// The LongSpec draft layer on a Vulkan device, beside the target (same device, same stream), reading the target's
// F16 cache of the cross-attention layer in place: only the tokens, the rows' key lists and each level's logits
// cross to the host (the beam search stays on the host: speculative/beam_tree.cpp, as for the CPU drafter).
//
// The same computation as backends/cuda/cuda_longspec_drafter.cpp, dispatch for kernel: the ring of the last
// window + 1 committed positions and the tree's nodes are slots of one F16 key/value buffer; self-attention reads
// each row's visible slots as an explicit key list (ring slots in position order, then its ancestors), and
// cross-attention is a plain prefix over the target's cache. Every buffer is sized at creation from (window, tree
// nodes, the cross chunk bound), so allocated_bytes() is the same at any context length.
#include "backends/vulkan/vulkan_runner.h"

#include "core/error.h"
#include "model/model.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"

#include <algorithm>
#include <cmath>

namespace specula::internal::vulkan {
namespace {

constexpr int32_t kCrossChunks = 32;  // cross-attention splits the target's prefix into at most this many chunks
constexpr uint32_t kSelfChunk = 64;

class VulkanLongSpecDrafter final : public LongSpecDrafterBase {
public:
    VulkanLongSpecDrafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, VulkanRunner &target)
        : LongSpecDrafterBase(max_tree_nodes, draft->target().hparams().n_vocab, draft->config().window + 1, draft->target().hparams().n_embd_kv(),
                              KvType::F16),
          draft_(std::move(draft)), target_(target), cfg_(draft_->config()), hp_(draft_->target().hparams()), up_(target.stream()) {
        require(max_tree_nodes >= 0 && max_tree_nodes <= 4096, SPECULA_ERR_INVALID_ARGUMENT, "longspec: max tree nodes must be in [0, 4096]");
        Stream &st = target_.stream();
        ring_ = cfg_.window + 1;
        rows_ = std::max(max_nodes_ + 1, 64);
        const LongSpecWeights &w = draft_->weights();
        wq_ = up_.matrix(w.wq), wk_ = up_.matrix(w.wk), wv_ = up_.matrix(w.wv), wo_ = up_.matrix(w.wo);
        cross_wq_ = up_.matrix(w.cross_wq), cross_wo_ = up_.matrix(w.cross_wo);
        gate_w_ = up_.matrix(w.ffn_gate), up_w_ = up_.matrix(w.ffn_up), down_w_ = up_.matrix(w.ffn_down);
        attn_norm_ = up_.floats(w.attn_norm), cross_norm_ = up_.floats(w.cross_norm), ffn_norm_ = up_.floats(w.ffn_norm);
        bq_ = up_.floats(w.bq), bk_ = up_.floats(w.bk), bv_ = up_.floats(w.bv), cross_bq_ = up_.floats(w.cross_bq);

        const size_t d = size_t(hp_.n_embd), dq = size_t(hp_.n_embd_q()), dkv = size_t(hp_.n_embd_kv()), R = size_t(rows_);
        self_.n_head = cross_.n_head = uint32_t(hp_.n_head);
        self_.n_head_kv = cross_.n_head_kv = uint32_t(hp_.n_head_kv);
        self_.head_dim = cross_.head_dim = uint32_t(hp_.head_dim);
        self_.scale = cross_.scale = 1.0f / std::sqrt(float(hp_.head_dim));
        self_.chunk = kSelfChunk;
        cross_.chunk = 64;  // per round: set so that the prefix has at most kCrossChunks chunks
        const int32_t self_keys = ring_ + max_nodes_;
        const std::shared_ptr<Device> &dev = st.shared_device();
        const auto buf = [&](size_t bytes, const char *what) { return Buffer(dev, std::max<size_t>(bytes, 16), Buffer::Kind::Device, what); };
        kv_k_ = buf(size_t(self_keys) * dkv * 2, "the LongSpec ring");
        kv_v_ = buf(kv_k_.bytes(), "the LongSpec ring");
        x_ = buf(R * d * 4, "draft scratch");
        xb_ = buf(R * std::max(d, dq) * 4, "draft scratch");
        q_ = buf(R * dq * 4, "draft scratch");
        k_ = buf(R * dkv * 4, "draft scratch");
        v_ = buf(R * dkv * 4, "draft scratch");
        att_ = buf(R * dq * 4, "draft scratch");
        gate_ = buf(R * size_t(cfg_.n_ff) * 4, "draft scratch");
        up_buf_ = buf(gate_.bytes(), "draft scratch");
        logits_ = buf(size_t(max_nodes_ + 1) * size_t(hp_.n_vocab) * 4, "draft logits");
        const size_t chunk_slots = size_t(std::max<int32_t>(kCrossChunks + 1, int32_t((uint32_t(self_keys) + kSelfChunk - 1) / kSelfChunk)));
        partials_ = buf(R * size_t(hp_.n_head) * chunk_slots * size_t(hp_.head_dim + 2) * 4, "draft attention partials");
        // tokens, positions, tail starts and lengths, and up to ring_ + depth key slots per row
        ints_capacity_ = 4 * R + R * size_t(self_keys);
        ints_ = buf(ints_capacity_ * 4, "draft row data");
        st.fill_zero(kv_k_);
        st.fill_zero(kv_v_);
        st.finish();
        ring_pos_.assign(size_t(ring_), -1);
    }

    void rewind(int32_t n_tokens) override { n_done_ = std::min(n_done_, std::max(n_tokens, 0)); }

    size_t allocated_bytes() const override {
        size_t total = up_.bytes();
        for (const Buffer *b : {&kv_k_, &kv_v_, &x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_buf_, &logits_, &partials_, &ints_}) total += b->bytes();
        return total + ring_pos_.capacity() * sizeof(int32_t);
    }

private:
    LongSpecRing ring() const override {
        LongSpecRing r;
        r.type = KvType::F16;
        r.n_done = n_done_;
        r.positions = ring_pos_;
        const size_t bytes = size_t(ring_) * size_t(hp_.n_embd_kv()) * 2;
        r.k.resize(bytes);
        r.v.resize(bytes);
        Stream &st = target_.stream();
        st.download(kv_k_, 0, r.k.data(), bytes);
        st.download(kv_v_, 0, r.v.data(), bytes);
        st.finish();
        return r;
    }
    void set_ring(const LongSpecRing &r) override {
        Stream &st = target_.stream();
        st.upload(kv_k_, 0, r.k.data(), r.k.size());
        st.upload(kv_v_, 0, r.v.data(), r.v.size());
        st.finish();
        n_done_ = r.n_done;
        ring_pos_ = r.positions;
    }

    void begin_round(const DraftRequest &request) override {
        const int32_t n = int32_t(request.tokens.size());
        require(n >= 1, SPECULA_ERR_INTERNAL, "longspec: empty context");
        root_pos_ = n - 1;
        n_target_kv_ = std::min(request.n_target_kv, n - 1);
        catch_up(request.tokens);
    }

    void upload_ints(const std::vector<int32_t> &ints) {
        require(ints.size() <= ints_capacity_, SPECULA_ERR_INTERNAL, "longspec (Vulkan): row data larger than allocated");
        target_.stream().upload(ints_, 0, ints.data(), ints.size() * 4);
    }

    // x = embed(tokens); xb = norm(x); k, v projected (+ biases) and k rotated at the rows' positions.
    void project_kv(View tokens, View positions, uint32_t count) {
        Stream &st = target_.stream();
        const uint32_t d = uint32_t(hp_.n_embd), dkv = uint32_t(hp_.n_embd_kv());
        embed(st, target_.weights().token_embd, tokens, count, View{&x_, 0});
        rmsnorm(st, View{&x_, 0}, View{attn_norm_, 0}, count, d, cfg_.norm_eps, View{&xb_, 0});
        matmul(st, wk_, View{&xb_, 0}, count, View{&k_, 0});
        matmul(st, wv_, View{&xb_, 0}, count, View{&v_, 0});
        add_bias(st, View{&k_, 0}, View{bk_, 0}, count, dkv);
        add_bias(st, View{&v_, 0}, View{bv_, 0}, count, dkv);
        rope(st, View{&k_, 0}, count, uint32_t(hp_.n_head_kv), uint32_t(hp_.head_dim), uint32_t(hp_.rope_dim), hp_.rope_type == RopeType::Neox, positions,
             target_.rope_cos(), target_.rope_sin());
    }

    // Writes the ring's keys/values for committed positions [max(n_done, n - ring), n).
    void catch_up(std::span<const int32_t> tokens) {
        const int32_t n = int32_t(tokens.size()), dkv = hp_.n_embd_kv();
        int32_t from = std::max(n_done_, n - ring_);
        Stream &st = target_.stream();
        while (from < n) {
            const int32_t count = std::min({n - from, ring_, rows_});
            std::vector<int32_t> &ints = ints_staging_;
            ints.assign(tokens.begin() + from, tokens.begin() + from + count);
            for (int32_t i = 0; i < count; ++i) ints.push_back(from + i);
            upload_ints(ints);
            project_kv(View{&ints_, 0}, View{&ints_, uint32_t(count)}, uint32_t(count));
            // Ring slots (from + i) % ring_: at most two contiguous runs.
            for (int32_t i = 0; i < count;) {
                const int32_t slot = (from + i) % ring_, run = std::min(count - i, ring_ - slot);
                store_kv(st, View{&k_, uint32_t(i * dkv)}, View{&v_, uint32_t(i * dkv)}, uint32_t(run * dkv), kv_k_, kv_v_, uint32_t(slot * dkv));
                for (int32_t r = 0; r < run; ++r) ring_pos_[size_t(slot + r)] = from + i + r;
                i += run;
            }
            st.finish();  // the next slice rewrites the row data
            from += count;
        }
        n_done_ = n;
    }

    void score(const DraftTree &tree, int32_t first, int32_t count, float *logits) override {
        require(first + count <= max_nodes_ + 1 && count <= rows_, SPECULA_ERR_INTERNAL, "longspec (Vulkan): tree larger than allocated");
        Stream &st = target_.stream();
        const uint32_t d = uint32_t(hp_.n_embd), dq = uint32_t(hp_.n_embd_q()), dkv = uint32_t(hp_.n_embd_kv()), dff = uint32_t(cfg_.n_ff);
        const uint32_t n_vocab = uint32_t(hp_.n_vocab), C = uint32_t(count);

        // Rows: tokens, positions, and each row's visible self-attention slots (ring in position order, then the
        // ancestors within the window, in depth order).
        std::vector<int32_t> &ints = ints_staging_;
        ints.assign(tree.tokens().begin() + first, tree.tokens().begin() + first + count);
        for (int32_t i = 0; i < count; ++i) ints.push_back(root_pos_ + tree.depth(first + i));
        const size_t starts_at = ints.size();
        ints.resize(ints.size() + 2 * size_t(count));
        const size_t slots_at = ints.size();
        ring_order_.clear();
        for (int32_t s = 0; s < ring_; ++s)
            if (ring_pos_[size_t(s)] >= 0 && ring_pos_[size_t(s)] <= root_pos_) ring_order_.push_back(s);
        std::sort(ring_order_.begin(), ring_order_.end(), [&](int32_t a, int32_t b) { return ring_pos_[size_t(a)] < ring_pos_[size_t(b)]; });
        int32_t max_keys = 0;
        for (int32_t i = 0; i < count; ++i) {
            const int32_t p = root_pos_ + tree.depth(first + i);
            const size_t start = ints.size();
            ints[starts_at + size_t(i)] = int32_t(start - slots_at);
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
        upload_ints(ints);
        const View tokens{&ints_, 0}, positions{&ints_, C};
        const View x{&x_, 0}, xb{&xb_, 0}, q{&q_, 0}, att{&att_, 0};

        project_kv(tokens, positions, C);
        matmul(st, wq_, xb, C, q);
        add_bias(st, q, View{bq_, 0}, C, dq);
        const bool neox = hp_.rope_type == RopeType::Neox;
        rope(st, q, C, uint32_t(hp_.n_head), uint32_t(hp_.head_dim), uint32_t(hp_.rope_dim), neox, positions, target_.rope_cos(), target_.rope_sin());
        // The root is committed (its key/value are in the ring); node j >= 1 goes to slot ring_ + j - 1.
        const uint32_t skip = first == 0 ? 1 : 0;
        store_kv(st, View{&k_, skip * dkv}, View{&v_, skip * dkv}, (C - skip) * dkv, kv_k_, kv_v_, uint32_t(ring_ + first + int32_t(skip) - 1) * dkv);

        // Self-attention over the ring and the tree.
        AttentionRows self;
        self.n = C;
        self.n_prefix = 0;
        self.max_keys = uint32_t(max_keys);
        self.has_tail = true;
        self.causal = false;
        self.ints = View{&ints_, 0};
        self.tail_start = uint32_t(starts_at);
        self.tail_len = uint32_t(starts_at) + C;
        self.tail_slots = uint32_t(slots_at);
        attention_chunks(st, q, kv_k_, kv_v_, dkv, self, self_, partials_);
        attention_merge(st, partials_, nullptr, self, self_, att);
        matmul(st, wo_, att, C, xb);
        add(st, x, xb, C * d);

        // Cross-attention onto the target's committed keys/values of the cross layer.
        rmsnorm(st, x, View{cross_norm_, 0}, C, d, cfg_.norm_eps, xb);
        matmul(st, cross_wq_, xb, C, q);
        add_bias(st, q, View{cross_bq_, 0}, C, dq);
        rope(st, q, C, uint32_t(hp_.n_head), uint32_t(hp_.head_dim), uint32_t(hp_.rope_dim), neox, positions, target_.rope_cos(), target_.rope_sin());
        AttentionRows cross;
        cross.n = C;
        cross.n_prefix = uint32_t(n_target_kv_);
        cross.max_keys = uint32_t(n_target_kv_);
        AttentionShape cs = cross_;
        cs.chunk = uint32_t(std::max(64, ((n_target_kv_ + kCrossChunks - 1) / kCrossChunks + 63) / 64 * 64));
        attention_chunks(st, q, target_.kv_k(cfg_.cross_layer), target_.kv_v(cfg_.cross_layer), dkv, cross, cs, partials_);
        attention_merge(st, partials_, nullptr, cross, cs, att);
        matmul(st, cross_wo_, att, C, xb);
        add(st, x, xb, C * d);

        // SwiGLU MLP, then the target's LM head without a final norm.
        rmsnorm(st, x, View{ffn_norm_, 0}, C, d, cfg_.norm_eps, xb);
        matmul(st, gate_w_, xb, C, View{&gate_, 0});
        matmul(st, up_w_, xb, C, View{&up_buf_, 0});
        swiglu(st, View{&gate_, 0}, View{&up_buf_, 0}, C * dff);
        matmul(st, down_w_, View{&gate_, 0}, C, xb);
        add(st, x, xb, C * d);
        matmul(st, target_.weights().output, x, C, View{&logits_, 0});
        st.download(logits_, 0, logits, size_t(C) * n_vocab * 4);
        st.finish();
    }

    std::shared_ptr<const LongSpecDraft> draft_;
    VulkanRunner &target_;
    LongSpecDraftConfig cfg_;
    HParams hp_;
    int32_t ring_ = 0, rows_ = 0;
    int32_t n_done_ = 0, root_pos_ = 0, n_target_kv_ = 0;
    Uploads up_;
    Matrix wq_, wk_, wv_, wo_, cross_wq_, cross_wo_, gate_w_, up_w_, down_w_;
    const Buffer *attn_norm_ = nullptr, *cross_norm_ = nullptr, *ffn_norm_ = nullptr;
    const Buffer *bq_ = nullptr, *bk_ = nullptr, *bv_ = nullptr, *cross_bq_ = nullptr;
    AttentionShape self_, cross_;
    Buffer kv_k_, kv_v_;  // [ring_ + max_nodes_][n_embd_kv] F16: the ring, then tree nodes 1..
    Buffer x_, xb_, q_, k_, v_, att_, gate_, up_buf_, logits_, partials_, ints_;
    size_t ints_capacity_ = 0;
    std::vector<int32_t> ring_pos_, ring_order_, ancestors_, ints_staging_;
};

}  // namespace

std::unique_ptr<Drafter> VulkanRunner::make_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes) {
    return std::make_unique<VulkanLongSpecDrafter>(std::move(draft), max_tree_nodes, *this);
}

}  // namespace specula::internal::vulkan
