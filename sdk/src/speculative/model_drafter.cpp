#include "model_drafter.h"

#include "backend/target_runner.h"
#include "core/error.h"
#include "core/byte_stream.h"
#include "speculative/beam_tree.h"
#include "speculative/vocab_compat.h"

#include <algorithm>

namespace specula::internal {
namespace {

class ModelDrafter final : public Drafter {
public:
    ModelDrafter(std::shared_ptr<const Model> draft, const Model &target, std::unique_ptr<TargetRunner> runner)
        : draft_(std::move(draft)), runner_(std::move(runner)), target_vocab_(target.hparams().n_vocab) {
        check_draft_vocab(target, *draft_);
        logits_.resize(size_t(draft_->hparams().n_vocab));
    }

    const char *name() const override { return "draft-model"; }
    void rewind(int32_t n_tokens) override { n_done_ = std::min(n_done_, std::max(n_tokens, 0)); }
    // The draft model's cache shifts like the target's, instead of evaluating the whole window again.
    void shift(int32_t keep, int32_t discard) override {
        if (n_done_ < keep + discard) return rewind(keep);
        runner_->shift_kv(keep, discard, n_done_);
        n_done_ -= discard;
    }
    size_t allocated_bytes() const override { return runner_->kv_bytes() + logits_.capacity() * sizeof(float); }

    // The draft model's cache holds the committed tokens [0, n_done): its rows travel in the snapshot's KV chunks
    // (own_cache), the state is how many.
    std::vector<uint8_t> save_state() const override {
        ByteWriter w;
        w.put<int32_t>(n_done_);
        return w.take();
    }
    int32_t check_state(std::span<const uint8_t> state, int32_t n_tokens) const override {
        ByteReader r(state, "snapshot: draft model state");
        const int32_t n_done = r.get<int32_t>();
        r.check(n_done >= 0 && n_done <= n_tokens && n_done <= runner_->n_ctx(), "its cache holds " + std::to_string(n_done) + " tokens of " + std::to_string(n_tokens));
        r.expect_end();
        return n_done;
    }
    void load_state(std::span<const uint8_t> state) override {
        ByteReader r(state, "snapshot: draft model state");
        n_done_ = r.get<int32_t>();
    }
    TargetRunner *own_cache() override { return runner_.get(); }
    int32_t own_cache_slots() const override { return n_done_; }

    int32_t prefill(std::span<const int32_t> committed) override {
        const int32_t before = n_done_;
        sync(committed.data(), int32_t(committed.size()));
        return n_done_ - before;
    }

    void draft(const DraftRequest &request, DraftTree &tree) override {
        const int32_t n_past = int32_t(request.tokens.size()) - 1;  // committed tokens; the root is a tree node
        sync(request.tokens.data(), n_past);
        DraftRequest bounded = request;
        bounded.node_budget = std::min(request.node_budget, runner_->n_ctx() - n_past);
        if (bounded.node_budget <= 1) return;
        const int32_t draft_vocab = draft_->hparams().n_vocab;
        build_beam_tree(bounded, tree, std::min(draft_vocab, target_vocab_), draft_vocab, target_vocab_,
                        [&](const DraftTree &t, int32_t first, int32_t count, float *logits) {
                            positions_.resize(size_t(count));
                            for (int32_t i = 0; i < count; ++i) positions_[size_t(i)] = n_past + t.depth(first + i);
                            t.ancestor_mask_rows(first, count, mask_);
                            runner_->eval_tree(t.tokens().data() + first, count, n_past, first, positions_.data(), mask_.data(), logits);
                        });
    }

private:
    // Evaluates the committed tokens [n_done_, n_past) into the draft cache, in batches.
    void sync(const int32_t *tokens, int32_t n_past) {
        while (n_done_ < n_past) {
            const int32_t n = std::min<int32_t>(64, n_past - n_done_);
            runner_->eval(tokens + n_done_, n, n_done_, logits_.data(), false);
            n_done_ += n;
        }
    }

    std::shared_ptr<const Model> draft_;
    std::unique_ptr<TargetRunner> runner_;  // on the target's backend when it can hold the draft model
    int32_t target_vocab_;
    int32_t n_done_ = 0;  // committed tokens whose keys/values the draft cache holds
    std::vector<float> logits_;
    std::vector<int32_t> positions_;
    std::vector<uint8_t> mask_;
};

class MergedDrafter final : public Drafter {
public:
    MergedDrafter(std::unique_ptr<Drafter> primary, std::unique_ptr<Drafter> secondary, int32_t primary_budget)
        : primary_(std::move(primary)), secondary_(std::move(secondary)), primary_budget_(primary_budget) {
        name_ = std::string(primary_->name()) + "+" + secondary_->name();
    }
    const char *name() const override { return name_.c_str(); }
    void rewind(int32_t n_tokens) override {
        primary_->rewind(n_tokens);
        secondary_->rewind(n_tokens);
    }
    int32_t prefill(std::span<const int32_t> committed) override {
        return std::max(primary_->prefill(committed), secondary_->prefill(committed));
    }
    int32_t catch_up_bound() const override { return primary_->catch_up_bound(); }
    void shift(int32_t keep, int32_t discard) override {
        primary_->shift(keep, discard);
        secondary_->shift(keep, discard);
    }
    size_t allocated_bytes() const override { return primary_->allocated_bytes() + secondary_->allocated_bytes(); }

    // Both drafters' states, each with its length.
    std::vector<uint8_t> save_state() const override {
        ByteWriter w;
        w.put_array<uint8_t>(primary_->save_state());
        w.put_array<uint8_t>(secondary_->save_state());
        return w.take();
    }
    int32_t check_state(std::span<const uint8_t> state, int32_t n_tokens) const override {
        ByteReader r(state, "snapshot: merged drafter state");
        const std::vector<uint8_t> a = r.get_array<uint8_t>(state.size()), b = r.get_array<uint8_t>(state.size());
        r.expect_end();
        return primary_->check_state(a, n_tokens) + secondary_->check_state(b, n_tokens);
    }
    void load_state(std::span<const uint8_t> state) override {
        ByteReader r(state, "snapshot: merged drafter state");
        primary_->load_state(r.get_array<uint8_t>(state.size()));
        secondary_->load_state(r.get_array<uint8_t>(state.size()));
    }
    TargetRunner *own_cache() override { return primary_->own_cache() ? primary_->own_cache() : secondary_->own_cache(); }
    int32_t own_cache_slots() const override { return primary_->own_cache_slots() + secondary_->own_cache_slots(); }
    void draft(const DraftRequest &request, DraftTree &tree) override {
        DraftRequest first = request;
        first.node_budget = std::min(request.node_budget, primary_budget_);
        first.sampler = nullptr;
        primary_->draft(first, tree);
        primary_size_ = tree.size();
        secondary_->draft(request, tree);
    }
    int32_t model_part_size() const override { return primary_size_; }

private:
    std::unique_ptr<Drafter> primary_, secondary_;
    int32_t primary_budget_;
    int32_t primary_size_ = -1;
    std::string name_;
};

}  // namespace

std::unique_ptr<Drafter> make_model_drafter(std::shared_ptr<const Model> draft, const Model &target, std::unique_ptr<TargetRunner> runner) {
    require(runner != nullptr, SPECULA_ERR_INTERNAL, "draft model: no runner");
    return std::make_unique<ModelDrafter>(std::move(draft), target, std::move(runner));
}

std::unique_ptr<Drafter> make_merged_drafter(std::unique_ptr<Drafter> primary, std::unique_ptr<Drafter> secondary, int32_t primary_budget) {
    return std::make_unique<MergedDrafter>(std::move(primary), std::move(secondary), primary_budget);
}

}  // namespace specula::internal
