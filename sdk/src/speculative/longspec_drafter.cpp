#include "speculative/longspec_drafter.h"

#include "backend/graph_executor.h"
#include "backend/target_runner.h"
#include "core/byte_stream.h"
#include "core/error.h"
#include "model/model.h"
#include "speculative/beam_tree.h"
#include "speculative/longspec_graph.h"

#include <algorithm>
#include <climits>

namespace specula::internal {

std::vector<uint8_t> LongSpecRing::encode() const {
    ByteWriter w;
    w.put<uint32_t>(uint32_t(type));
    w.put<int32_t>(n_done);
    w.put_array<int32_t>(positions);
    w.put_array<uint8_t>(k);
    w.put_array<uint8_t>(v);
    return w.take();
}

LongSpecRing LongSpecRing::decode(std::span<const uint8_t> bytes, KvType type, int32_t slots, int32_t row_width, int32_t n_tokens) {
    ByteReader r(bytes, "snapshot: LongSpec ring");
    LongSpecRing ring;
    const uint32_t t = r.get<uint32_t>();
    r.check(t == uint32_t(type), std::string("saved with ") + (t == uint32_t(KvType::F16) ? "F16" : t == 0 ? "F32" : "unknown") +
                                     " rows, this drafter keeps " + kv_type_name(type));
    ring.type = type;
    ring.n_done = r.get<int32_t>();
    r.check(ring.n_done >= 0 && ring.n_done <= n_tokens, "caught up to " + std::to_string(ring.n_done) + " tokens of a context of " + std::to_string(n_tokens));
    ring.positions = r.get_array<int32_t>(uint64_t(slots));
    r.check(ring.positions.size() == size_t(slots), "has " + std::to_string(ring.positions.size()) + " slots, the draft's window needs " + std::to_string(slots));
    for (int32_t p : ring.positions) r.check(p >= -1 && p < (1 << 22), "a slot position is out of range");
    const uint64_t row_bytes = uint64_t(slots) * uint64_t(row_width) * kv_type_size(type);
    ring.k = r.get_array<uint8_t>(row_bytes);
    ring.v = r.get_array<uint8_t>(row_bytes);
    r.check(ring.k.size() == row_bytes && ring.v.size() == row_bytes, "the rows have the wrong size");
    r.expect_end();
    return ring;
}

namespace {

class LongSpecDrafter final : public Drafter {
public:
    LongSpecDrafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, TargetRunner &runner)
        : draft_(std::move(draft)), max_nodes_(max_tree_nodes), window_(draft_->config().window), ring_(window_ + 1),
          n_vocab_(draft_->target().hparams().n_vocab), row_width_(draft_->target().hparams().n_embd_kv()) {
        require(max_tree_nodes >= 0 && max_tree_nodes <= 4096, SPECULA_ERR_INVALID_ARGUMENT, "longspec: max tree nodes must be in [0, 4096]");
        // A level has at most max_nodes + 1 rows (the root's level is the root alone); the ring catches up in
        // slices of the same size.
        rows_ = std::max(max_nodes_ + 1, 64);
        executor_ = runner.make_executor(ExecutorRequest{build_longspec_graph(draft_, max_nodes_, runner.n_ctx()), rows_});
        ring_pos_.assign(size_t(ring_), -1);
        // The plans' buffers at their largest up front (the memory must not depend on the rounds drafted): per row a
        // token, a position, a tail start and length, and at most the ring plus a path of keys.
        ring_order_.reserve(size_t(ring_));
        ancestors_.reserve(size_t(max_nodes_) + 1);
        rows_plan_.ints.reserve(size_t(rows_) * (4 + size_t(ring_) + size_t(max_nodes_) + 1));
        rows_plan_.lists.reserve(2);
        rows_plan_.stores.reserve(2);
    }

    const char *name() const override { return "longspec"; }

    void draft(const DraftRequest &request, DraftTree &tree) override {
        begin_round(request);
        DraftRequest bounded = request;
        bounded.node_budget = std::min(request.node_budget, max_nodes_ + 1);
        build_beam_tree(
            bounded, tree, n_vocab_, n_vocab_, n_vocab_,
            [this](const DraftTree &t, int32_t first, int32_t count, float *logits) {
                plan_level(t, first, count);
                executor_->run(kLevelStage, rows_plan_, logits, true);
            },
            [this](const DraftTree &t, int32_t first, int32_t count, int32_t k, float *logp, int32_t *ids) {
                plan_level(t, first, count);
                return executor_->run_top_k(kLevelStage, rows_plan_, k, logp, ids, true);
            });
    }

    bool root_logits(const DraftRequest &request, float *logits) override {
        begin_round(request);
        root_tree_.reset(request.tokens.back());
        plan_level(root_tree_, 0, 1);
        executor_->run(kLevelStage, rows_plan_, logits, true);
        return true;
    }

    void rewind(int32_t n_tokens) override { n_done_ = std::min(n_done_, std::max(n_tokens, 0)); }

    // The ring written now, as part of prompt processing, rather than by the first round: the positions written
    // (at most the ring's size, however long the prompt).
    int32_t prefill(std::span<const int32_t> committed) override {
        const int32_t n = int32_t(committed.size());
        if (n <= n_done_) return 0;
        const int32_t written = n - std::max(n_done_, n - ring_);
        catch_up(committed);
        return written;
    }
    int32_t catch_up_bound() const override { return ring_; }

    size_t allocated_bytes() const override {
        return executor_->allocated_bytes() + ring_pos_.capacity() * sizeof(int32_t) + ring_order_.capacity() * sizeof(int32_t) +
               rows_plan_.ints.capacity() * sizeof(int32_t);
    }

    // Snapshots: the ring, verbatim (LongSpecRing).
    std::vector<uint8_t> save_state() const override {
        LongSpecRing r;
        r.type = executor_->local_kv_type();
        r.n_done = n_done_;
        r.positions = ring_pos_;
        const size_t bytes = kv_row_bytes(r.type, row_width_) * size_t(ring_);
        r.k.resize(bytes);
        r.v.resize(bytes);
        executor_->read_local_kv(KvPart::Keys, 0, ring_, r.k.data());
        executor_->read_local_kv(KvPart::Values, 0, ring_, r.v.data());
        return r.encode();
    }
    int32_t check_state(std::span<const uint8_t> state, int32_t n_tokens) const override {
        LongSpecRing::decode(state, executor_->local_kv_type(), ring_, row_width_, n_tokens);
        return 0;
    }
    void load_state(std::span<const uint8_t> state) override {
        const LongSpecRing r = LongSpecRing::decode(state, executor_->local_kv_type(), ring_, row_width_, INT32_MAX);
        executor_->write_local_kv(KvPart::Keys, 0, ring_, r.k.data());
        executor_->write_local_kv(KvPart::Values, 0, ring_, r.v.data());
        n_done_ = r.n_done;
        ring_pos_ = r.positions;
    }

private:
    // The root (the context's last token) and its position, the target KV the cross-attention may read (never at
    // or beyond the root), and the ring caught up to the context.
    void begin_round(const DraftRequest &request) {
        const int32_t n = int32_t(request.tokens.size());
        require(n >= 1, SPECULA_ERR_INTERNAL, "longspec: empty context");
        root_pos_ = n - 1;
        n_target_kv_ = std::min(request.n_target_kv, n - 1);
        catch_up(request.tokens);
    }

    // Writes the self-attention keys/values of committed positions [max(n_done, n - ring), n) into the ring: the
    // slot of position p is p mod ring.
    void catch_up(std::span<const int32_t> tokens) {
        const int32_t n = int32_t(tokens.size());
        int32_t from = std::max(n_done_, n - ring_);
        while (from < n) {
            const int32_t count = std::min({n - from, ring_, rows_});
            rows_plan_.reset(count);
            for (int32_t i = 0; i < count; ++i) {
                rows_plan_.tokens_mut()[i] = tokens[size_t(from + i)];
                rows_plan_.positions_mut()[i] = from + i;
            }
            // Slots (from + i) % ring: at most two runs.
            for (int32_t i = 0; i < count;) {
                const int32_t slot = (from + i) % ring_, run = std::min(count - i, ring_ - slot);
                rows_plan_.stores.push_back(StoreRun{i, slot, run});
                for (int32_t r = 0; r < run; ++r) ring_pos_[size_t(slot + r)] = from + i + r;
                i += run;
            }
            executor_->run(kRingStage, rows_plan_, nullptr, false);
            from += count;
        }
        n_done_ = n;
    }

    // The rows of tree nodes [first, first + count): tokens, positions (root position + depth), where the nodes'
    // keys/values go (tree slot ring + j - 1 for node j >= 1; the root is committed, in the ring), and the two key
    // lists. Self-attention (list 0) sees, in position order, the ring slots and the node's ancestors (itself
    // included) whose position is within the window of its own: p - key position <= window, committed keys only
    // up to the root. Cross-attention (list 1) sees the target's committed prefix.
    void plan_level(const DraftTree &tree, int32_t first, int32_t count) {
        require(first + count <= max_nodes_ + 1 && count <= rows_, SPECULA_ERR_INTERNAL, "longspec: tree larger than allocated");
        BatchRows &rows = rows_plan_;
        rows.reset(count);
        for (int32_t i = 0; i < count; ++i) {
            rows.tokens_mut()[i] = tree.tokens()[size_t(first + i)];
            rows.positions_mut()[i] = root_pos_ + tree.depth(first + i);
        }
        const int32_t skip = first == 0 ? 1 : 0;
        if (count > skip) rows.stores.push_back(StoreRun{skip, ring_ + first + skip - 1, count - skip});

        ring_order_.clear();
        for (int32_t s = 0; s < ring_; ++s)
            if (ring_pos_[size_t(s)] >= 0 && ring_pos_[size_t(s)] <= root_pos_) ring_order_.push_back(s);
        std::sort(ring_order_.begin(), ring_order_.end(), [&](int32_t a, int32_t b) { return ring_pos_[size_t(a)] < ring_pos_[size_t(b)]; });
        rows.begin_list(0, true);
        for (int32_t i = 0; i < count; ++i) {
            const int32_t p = root_pos_ + tree.depth(first + i);
            for (int32_t s : ring_order_)
                if (p - ring_pos_[size_t(s)] <= window_) rows.push_slot(i, s);
            ancestors_.clear();
            for (int32_t j = first + i; j >= 1; j = tree.parent(j))
                if (p - (root_pos_ + tree.depth(j)) <= window_) ancestors_.push_back(ring_ + j - 1);
            for (auto it = ancestors_.rbegin(); it != ancestors_.rend(); ++it) rows.push_slot(i, *it);
        }
        rows.end_list();
        rows.add_prefix_list(n_target_kv_, false);
    }

    std::shared_ptr<const LongSpecDraft> draft_;
    int32_t max_nodes_, window_, ring_, n_vocab_, row_width_;
    int32_t rows_ = 0;
    std::unique_ptr<GraphExecutor> executor_;
    int32_t n_done_ = 0;  // committed positions [0, n_done) have been written to the ring (the last ring_ kept)
    int32_t root_pos_ = 0, n_target_kv_ = 0;
    std::vector<int32_t> ring_pos_;  // the position each ring slot holds (-1: none yet)
    std::vector<int32_t> ring_order_, ancestors_;
    BatchRows rows_plan_;
    DraftTree root_tree_;  // root_logits' one-node tree
};

}  // namespace

std::unique_ptr<Drafter> make_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, TargetRunner &runner) {
    return std::make_unique<LongSpecDrafter>(std::move(draft), max_tree_nodes, runner);
}

}  // namespace specula::internal
