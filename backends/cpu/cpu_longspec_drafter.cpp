#include "backends/cpu/cpu_longspec_drafter.h"

#include "backends/cpu/block_attention.h"
#include "backends/cpu/cpu_weights.h"
#include "backends/cpu/hybrid_attention.h"
#include "backends/cpu/ops.h"
#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace specula::internal {
namespace {

class CpuLongSpecDrafter final : public LongSpecDrafterBase {
public:
    CpuLongSpecDrafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, ThreadPool &pool, const KvCache &target_kv)
        : LongSpecDrafterBase(max_tree_nodes, draft->target().hparams().n_vocab, draft->config().window + 1, draft->target().hparams().n_embd_kv(),
                              KvType::F32),
          draft_(std::move(draft)), weights_(CpuWeights::of(draft_)), target_weights_(CpuWeights::of(draft_->target_ptr())), pool_(pool),
          target_kv_(target_kv), cfg_(draft_->config()),
          hp_(draft_->target().hparams()) {
        require(max_tree_nodes >= 0 && max_tree_nodes <= 4096, SPECULA_ERR_INVALID_ARGUMENT, "longspec: max tree nodes must be in [0, 4096]");
        ring_ = cfg_.window + 1;
        const size_t dkv = size_t(hp_.n_embd_kv()), dq = size_t(hp_.n_embd_q()), d = size_t(hp_.n_embd);
        const size_t rows = size_t(std::max(max_nodes_, ring_));  // largest batch: a level, or a ring refill
        ring_k_.assign(size_t(ring_) * dkv, 0.0f);
        ring_v_.assign(ring_k_.size(), 0.0f);
        ring_pos_.assign(size_t(ring_), -1);
        tree_k_.assign(size_t(max_nodes_) * dkv, 0.0f);
        tree_v_.assign(tree_k_.size(), 0.0f);
        x_.assign(rows * d, 0.0f);
        xb_.assign(rows * std::max(d, dq), 0.0f);
        q_.assign(rows * dq, 0.0f);
        k_.assign(rows * dkv, 0.0f);
        v_.assign(rows * dkv, 0.0f);
        att_.assign(rows * dq, 0.0f);
        gate_.assign(rows * size_t(cfg_.n_ff), 0.0f);
        up_.assign(gate_.size(), 0.0f);
        head_scratch_.assign(size_t(pool_.size()) * (size_t(hp_.head_dim) + size_t(ring_ + max_nodes_)), 0.0f);
        // One per thread, each built in place: a copy would not keep the reservations its constructor made, and
        // the draft's bytes must not depend on which threads happened to run.
        const size_t cross_rows = rows * size_t(hp_.n_head / hp_.n_head_kv);
        cross_queries_.resize(size_t(pool_.size()));
        for (auto &q : cross_queries_) q.reserve(cross_rows);
        for (int t = 0; t < pool_.size(); ++t) {
            cross_attention_.emplace_back(hp_.head_dim);
            cross_attention_.back().reserve_rows(cross_rows);
        }
    }

    void rewind(int32_t n_tokens) override { n_done_ = std::min(n_done_, std::max(n_tokens, 0)); }

    size_t allocated_bytes() const override {
        size_t floats = ring_k_.capacity() + ring_v_.capacity() + tree_k_.capacity() + tree_v_.capacity() + x_.capacity() +
                        xb_.capacity() + q_.capacity() + k_.capacity() + v_.capacity() + att_.capacity() + gate_.capacity() +
                        up_.capacity() + head_scratch_.capacity();
        size_t cross = 0;
        for (const BlockAttention &b : cross_attention_) cross += b.bytes();
        for (const auto &q : cross_queries_) cross += q.capacity() * sizeof(AttentionQuery);
        return floats * sizeof(float) + ring_pos_.capacity() * sizeof(int32_t) + quant_scratch_.capacity() + mask_.capacity() + cross;
    }

private:
    LongSpecRing ring() const override {
        LongSpecRing r;
        r.type = KvType::F32;
        r.n_done = n_done_;
        r.positions = ring_pos_;
        r.k.resize(ring_k_.size() * sizeof(float));
        r.v.resize(ring_v_.size() * sizeof(float));
        std::memcpy(r.k.data(), ring_k_.data(), r.k.size());
        std::memcpy(r.v.data(), ring_v_.data(), r.v.size());
        return r;
    }
    void set_ring(const LongSpecRing &r) override {
        n_done_ = r.n_done;
        ring_pos_ = r.positions;
        std::memcpy(ring_k_.data(), r.k.data(), r.k.size());
        std::memcpy(ring_v_.data(), r.v.data(), r.v.size());
    }

    void begin_round(const DraftRequest &request) override {
        const int32_t n = int32_t(request.tokens.size());
        require(n >= 1, SPECULA_ERR_INTERNAL, "longspec: empty context");
        root_pos_ = n - 1;
        n_target_kv_ = std::min(request.n_target_kv, n - 1);
        catch_up(request.tokens);
    }

    // Writes self-attention keys/values of committed positions [max(n_done, n - ring), n) into the ring.
    void catch_up(std::span<const int32_t> tokens) {
        const int32_t n = int32_t(tokens.size());
        int32_t from = std::max(n_done_, n - ring_);
        while (from < n) {
            const int32_t count = std::min(n - from, ring_);
            project_kv(tokens.data() + from, count, from, nullptr);
            const size_t dkv = size_t(hp_.n_embd_kv());
            for (int32_t i = 0; i < count; ++i) {
                const int32_t slot = (from + i) % ring_;
                std::copy(k_.data() + i * dkv, k_.data() + (i + 1) * dkv, ring_k_.data() + size_t(slot) * dkv);
                std::copy(v_.data() + i * dkv, v_.data() + (i + 1) * dkv, ring_v_.data() + size_t(slot) * dkv);
                ring_pos_[size_t(slot)] = from + i;
            }
            from += count;
        }
        n_done_ = n;
    }

    // x = embed(tokens); xb = norm(x); k, v (and q unless null) projected and rotated at pos0 + i (or pos[i]).
    void project_kv(const int32_t *tokens, int32_t count, int32_t pos0, const int32_t *positions) {
        const LongSpecWeights &w = draft_->weights();
        const ModelWeights &tw = draft_->target().weights();
        const int64_t d = hp_.n_embd, dkv = hp_.n_embd_kv();
        for (int32_t i = 0; i < count; ++i) {
            get_row(tw.token_embd, tokens[i], x_.data() + i * d);
            rmsnorm(xb_.data() + i * d, x_.data() + i * d, w.attn_norm.floats(), d, cfg_.norm_eps);
        }
        matmul(pool_, weights_->matrix(w.wk), xb_.data(), count, k_.data(), quant_scratch_);
        matmul(pool_, weights_->matrix(w.wv), xb_.data(), count, v_.data(), quant_scratch_);
        for (int32_t i = 0; i < count; ++i) {
            add(k_.data() + i * dkv, w.bk.floats(), dkv);
            add(v_.data() + i * dkv, w.bv.floats(), dkv);
            rope(k_.data() + i * dkv, hp_.n_head_kv, hp_, tw.rope_freq_factors, positions ? positions[i] : pos0 + i);
        }
    }

    void score(const DraftTree &tree, int32_t first, int32_t count, float *logits) override {
        const LongSpecWeights &w = draft_->weights();
        const ModelWeights &tw = draft_->target().weights();
        const int64_t d = hp_.n_embd, dq = hp_.n_embd_q(), dkv = hp_.n_embd_kv(), dff = cfg_.n_ff;
        const int32_t hd = hp_.head_dim, group = hp_.n_head / hp_.n_head_kv;
        const float scale = 1.0f / std::sqrt(float(hd));
        require(first + count <= max_nodes_ + 1, SPECULA_ERR_INTERNAL, "longspec: tree larger than allocated");

        positions_.resize(size_t(count));  // at most max_nodes + 1 entries: bounded
        for (int32_t i = 0; i < count; ++i) positions_[size_t(i)] = root_pos_ + tree.depth(first + i);
        project_kv(tree.tokens().data() + first, count, 0, positions_.data());
        matmul(pool_, weights_->matrix(w.wq), xb_.data(), count, q_.data(), quant_scratch_);
        for (int32_t i = 0; i < count; ++i) {
            add(q_.data() + i * dq, w.bq.floats(), dq);
            rope(q_.data() + i * dq, hp_.n_head, hp_, tw.rope_freq_factors, positions_[size_t(i)]);
            if (first + i == 0) continue;  // the root is committed: its key/value are in the ring already
            const size_t slot = size_t(first + i - 1);
            std::copy(k_.data() + i * dkv, k_.data() + (i + 1) * dkv, tree_k_.data() + slot * size_t(dkv));
            std::copy(v_.data() + i * dkv, v_.data() + (i + 1) * dkv, tree_v_.data() + slot * size_t(dkv));
        }

        // Visibility: ring slot s (position ring_pos_[s]) and tree node j (j >= 1, tree slot j - 1) are visible to
        // a query at position p when p - key_position <= window, the key is committed or an ancestor, and
        // key_position <= p. One mask row per query: ring_ bytes then first + count - 1 tree bytes.
        const int32_t n_tree = first + count - 1;
        const size_t row = size_t(ring_ + n_tree);
        mask_.assign(size_t(count) * row, 0);
        for (int32_t i = 0; i < count; ++i) {
            const int32_t p = positions_[size_t(i)];
            uint8_t *m = mask_.data() + size_t(i) * row;
            for (int32_t s = 0; s < ring_; ++s) {
                const int32_t kp = ring_pos_[size_t(s)];
                m[s] = kp >= 0 && kp <= root_pos_ && p - kp <= cfg_.window;
            }
            for (int32_t j = first + i; j >= 1; j = tree.parent(j))
                if (p - (root_pos_ + tree.depth(j)) <= cfg_.window) m[ring_ + j - 1] = 1;
        }

        // Self-attention: ring part and tree part, merged by log-sum-exp.
        const size_t per_thread = size_t(hd) + size_t(ring_ + max_nodes_);
        pool_.run(int64_t(count) * hp_.n_head, [&](int64_t task, int thread) {
            const int32_t i = int32_t(task / hp_.n_head), h = int32_t(task % hp_.n_head), kvh = h / group;
            float *tmp = head_scratch_.data() + size_t(thread) * per_thread;
            const float *qv = q_.data() + i * dq + h * hd;
            float *out = att_.data() + i * dq + h * hd;
            const uint8_t *m = mask_.data() + size_t(i) * row;
            const float l1 = attend_with_lse(qv, hd, scale, ring_k_.data() + kvh * hd, ring_v_.data() + kvh * hd, size_t(dkv), ring_, m, out);
            const float l2 = attend_with_lse(qv, hd, scale, tree_k_.data() + kvh * hd, tree_v_.data() + kvh * hd, size_t(dkv), n_tree,
                                             m + ring_, tmp);
            merge_attention(out, l1, tmp, l2, hd);
        });
        matmul(pool_, weights_->matrix(w.wo), att_.data(), count, xb_.data(), quant_scratch_);
        add(x_.data(), xb_.data(), count * d);

        // Cross-attention onto the target's committed keys/values of cfg_.cross_layer (already rotated).
        for (int32_t i = 0; i < count; ++i) rmsnorm(xb_.data() + i * d, x_.data() + i * d, w.cross_norm.floats(), d, cfg_.norm_eps);
        matmul(pool_, weights_->matrix(w.cross_wq), xb_.data(), count, q_.data(), quant_scratch_);
        for (int32_t i = 0; i < count; ++i) {
            add(q_.data() + i * dq, w.cross_bq.floats(), dq);
            rope(q_.data() + i * dq, hp_.n_head, hp_, tw.rope_freq_factors, positions_[size_t(i)]);
        }
        // Every node of the level and every query head of a KV group share the prefix blocks (block_attention.h):
        // the target's cache is read once per KV head per level, however many nodes there are.
        const KvView tk = target_kv_.keys(cfg_.cross_layer), tv = target_kv_.values(cfg_.cross_layer);
        pool_.run(hp_.n_head_kv, [&](int64_t kvh, int thread) {
            std::vector<AttentionQuery> &queries = cross_queries_[size_t(thread)];
            queries.clear();
            for (int32_t i = 0; i < count; ++i)
                for (int32_t g = 0; g < group; ++g) {
                    const int64_t h = kvh * group + g;
                    queries.push_back(AttentionQuery{q_.data() + i * dq + h * hd, att_.data() + i * dq + h * hd, n_target_kv_, nullptr, 0});
                }
            cross_attention_[size_t(thread)].run(tk, tv, int32_t(kvh) * hd, scale, queries);
        });
        matmul(pool_, weights_->matrix(w.cross_wo), att_.data(), count, xb_.data(), quant_scratch_);
        add(x_.data(), xb_.data(), count * d);

        // SwiGLU MLP.
        for (int32_t i = 0; i < count; ++i) rmsnorm(xb_.data() + i * d, x_.data() + i * d, w.ffn_norm.floats(), d, cfg_.norm_eps);
        matmul(pool_, weights_->matrix(w.ffn_gate), xb_.data(), count, gate_.data(), quant_scratch_);
        matmul(pool_, weights_->matrix(w.ffn_up), xb_.data(), count, up_.data(), quant_scratch_);
        swiglu(gate_.data(), up_.data(), count * dff);
        matmul(pool_, weights_->matrix(w.ffn_down), gate_.data(), count, xb_.data(), quant_scratch_);
        add(x_.data(), xb_.data(), count * d);

        // The target's LM head, without a final norm.
        matmul(pool_, target_weights_->matrix(tw.output), x_.data(), count, logits, quant_scratch_);
    }

    std::shared_ptr<const LongSpecDraft> draft_;
    std::shared_ptr<const CpuWeights> weights_, target_weights_;  // packed: the draft's layer, the target's LM head
    ThreadPool &pool_;
    const KvCache &target_kv_;  // the target runner's cache: committed slots [0, n_target_kv_) are read
    LongSpecDraftConfig cfg_;
    HParams hp_;
    int32_t ring_ = 0;
    int32_t n_done_ = 0;  // committed positions [0, n_done) have been written to the ring (the last ring_ kept)
    int32_t root_pos_ = 0, n_target_kv_ = 0;
    std::vector<float> ring_k_, ring_v_, tree_k_, tree_v_;
    std::vector<int32_t> ring_pos_, positions_;
    std::vector<float> x_, xb_, q_, k_, v_, att_, gate_, up_, head_scratch_;
    std::vector<uint8_t> quant_scratch_, mask_;
    std::vector<BlockAttention> cross_attention_;  // per thread
    std::vector<std::vector<AttentionQuery>> cross_queries_;
};

}  // namespace

std::unique_ptr<Drafter> make_cpu_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, ThreadPool &pool,
                                                   const KvCache &target_kv) {
    return std::make_unique<CpuLongSpecDrafter>(std::move(draft), max_tree_nodes, pool, target_kv);
}

}  // namespace specula::internal
