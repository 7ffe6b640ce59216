#include "session.h"

#include "core/thread_pool.h"
#include "core/error.h"
#include "core/timer.h"
#include "speculative/longspec_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/verifier.h"
#include "speculative/vocab_compat.h"

#include <algorithm>
#include <thread>

namespace specula::internal {
namespace {

int32_t choose_n_ctx(const Model &model, int32_t requested) {
    require(requested >= 0, SPECULA_ERR_INVALID_ARGUMENT, "session: n_ctx must be >= 0");
    require(requested <= (1 << 22), SPECULA_ERR_INVALID_ARGUMENT, "session: n_ctx " + std::to_string(requested) + " is too large");
    return requested > 0 ? requested : std::min(model.hparams().n_ctx_train, 4096);
}

int choose_threads(int32_t requested) {
    require(requested >= 0 && requested <= 512, SPECULA_ERR_INVALID_ARGUMENT, "session: n_threads must be in [0, 512]");
    if (requested > 0) return requested;
    return int(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, const SessionConfig &config, const SamplerConfig &sampler)
    : model_(std::move(model)),
      config_(config),
      pool_(std::make_unique<ThreadPool>(choose_threads(config.n_threads))),
      runner_(config.make_runner ? config.make_runner(model_, choose_n_ctx(*model_, config.n_ctx), *pool_)
                                 : make_target_runner(model_, choose_n_ctx(*model_, config.n_ctx), *pool_, config.backend, backend_note_)),
      sampler_(sampler) {
    runner_->set_cancel_flag(&cancel_requested_);
    require(config_.n_batch > 0 && config_.n_batch <= 4096, SPECULA_ERR_INVALID_ARGUMENT, "session: n_batch must be in [1, 4096]");
    logits_.resize(size_t(model_->hparams().n_vocab));
    const ContextShift &shift = config_.shift;
    if (shift.enabled) {
        const int32_t n = n_ctx();
        require(shift.keep >= 0 && shift.keep <= n - 2, SPECULA_ERR_INVALID_ARGUMENT,
                "session: the context shift keeps " + std::to_string(shift.keep) + " tokens; it must keep between 0 and n_ctx - 2 = " + std::to_string(n - 2));
        shift_discard_ = shift.discard > 0 ? shift.discard : std::max(1, (n - shift.keep) / 2);
        require(shift.discard >= 0 && shift.keep + shift_discard_ <= n - 1, SPECULA_ERR_INVALID_ARGUMENT,
                "session: the context shift drops " + std::to_string(shift.discard) + " tokens after " + std::to_string(shift.keep) +
                    "; keep + discard must leave at least one token of n_ctx " + std::to_string(n));
    }
}

void Session::set_sampler(const SamplerConfig &config) {
    sampler_ = Sampler(config);
    drop_ready();  // verified under the old sampler
}

void Session::set_speculative(const SpeculativeConfig &config) {
    require(!(config.longspec && config.draft_model), SPECULA_ERR_INVALID_ARGUMENT,
            "speculative: choose a LongSpec draft or an independent draft model, not both");
    require(config.ngram_nodes >= 0 && config.ngram_nodes <= 1024, SPECULA_ERR_INVALID_ARGUMENT,
            "speculative: n-gram nodes must be in [0, 1024]");
    require(config.shape.depth() >= 1 && config.shape.depth() <= 32 && config.shape.max_nodes() <= 4096,
            SPECULA_ERR_INVALID_ARGUMENT, "speculative: the tree shape must have 1 to 32 levels and at most 4096 nodes");
    if (config.longspec)
        require(config.longspec->target_ptr().get() == model_.get(), SPECULA_ERR_INCOMPATIBLE,
                "speculative: the LongSpec draft was loaded for another model; load it with this session's model");
    const bool model_drafter = config.longspec || config.draft_model;
    std::unique_ptr<TreeTuner> tuner;
    if (config.auto_tree && (model_drafter || config.ngram))
        tuner = std::make_unique<TreeTuner>(model_drafter, config.shape_is_bound ? &config.shape : nullptr, config.ngram,
                                            config.ngram_nodes);
    const int32_t model_nodes = !model_drafter ? 0 : tuner ? tuner->max_model_nodes() : config.shape.max_nodes();
    const int32_t budget = 1 + model_nodes + (config.ngram ? config.ngram_nodes : 0);
    std::unique_ptr<Drafter> primary;
    if (config.longspec) {
        primary = runner_->make_longspec_drafter(config.longspec, budget - 1);
    }
    if (config.draft_model) {
        check_draft_vocab(*model_, *config.draft_model);
        // On the target's backend when it can hold the draft model, else on the CPU with the session's threads.
        std::unique_ptr<TargetRunner> draft_runner = runner_->make_draft_runner(config.draft_model, n_ctx());
        if (!draft_runner) {
            BackendChoice cpu;
            cpu.kind = BackendKind::Cpu;
            std::string note;
            draft_runner = make_target_runner(config.draft_model, n_ctx(), *pool_, cpu, note);
        }
        primary = make_model_drafter(config.draft_model, *model_, std::move(draft_runner));
    }
    std::unique_ptr<Drafter> drafter;
    if (config.ngram) {
        std::unique_ptr<Drafter> ngram = make_ngram_drafter(config.ngram_config);
        drafter = primary ? make_merged_drafter(std::move(primary), std::move(ngram), 1 + model_nodes) : std::move(ngram);
    } else {
        drafter = std::move(primary);
    }
    drafter_ = std::move(drafter);
    tuner_ = std::move(tuner);
    if (tuner_) tuner_->context_grew(int32_t(tokens_.size()));
    fixed_tree_ = TreeChoice{model_drafter ? config.shape : TreeShape{std::vector<int32_t>{}}, config.ngram ? config.ngram_nodes : 0};
    spec_ = config;
    drop_ready();
}

void Session::append_tokens(const int32_t *tokens, size_t n) {
    const int32_t n_vocab = model_->hparams().n_vocab;
    for (size_t i = 0; i < n; ++i)
        require(tokens[i] >= 0 && tokens[i] < n_vocab, SPECULA_ERR_INVALID_TOKEN,
                "token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) + " is outside [0, " + std::to_string(n_vocab) + ")");
    require(n <= size_t(n_ctx()) - tokens_.size(), SPECULA_ERR_CONTEXT_FULL,
            "context full: " + std::to_string(tokens_.size()) + " + " + std::to_string(n) + " tokens exceed n_ctx " + std::to_string(n_ctx()));
    if (n == 0) return;
    drop_ready();
    tokens_.insert(tokens_.end(), tokens, tokens + n);
    if (tuner_) tuner_->context_grew(int32_t(n));
    last_token_generated_ = false;
    n_run_generated_ = 0;
    run_first_token_ = true;
    run_start_ms_ = now_ms();
}

void Session::append_text(std::string_view text, bool add_special, bool parse_special) {
    const std::vector<int32_t> ids = model_->vocab().tokenize(text, add_special && tokens_.empty(), parse_special);
    append_tokens(ids.data(), ids.size());
}

void Session::rewind(int32_t n_tokens) {
    require(n_tokens >= 0 && size_t(n_tokens) <= tokens_.size(), SPECULA_ERR_INVALID_ARGUMENT,
            "rewind to " + std::to_string(n_tokens) + " is outside [0, " + std::to_string(tokens_.size()) + "]");
    tokens_.resize(size_t(n_tokens));
    drop_ready();
    if (drafter_) drafter_->rewind(n_tokens);
    // KV slots beyond n_tokens are simply overwritten later. If the cut removes evaluated tokens, the last kept
    // token is evaluated again so that the next step has its logits; otherwise the KV cache and the logits of
    // the last evaluated position stay as they are.
    if (n_tokens < n_evaluated_) {
        n_evaluated_ = std::max(n_tokens - 1, 0);
        logits_valid_ = false;
    }
    last_token_generated_ = false;
    n_run_generated_ = 0;
    run_first_token_ = true;
    run_start_ms_ = now_ms();
    reset_stream();
}

void Session::reset_stream() {
    decoder_.reset();
    stops_.reset();
    drop_ready();  // a run ended: tokens drafted beyond it are not part of the context
}

void Session::configure_run(const GenerateConfig &config) {
    run_ = config;
    stops_.set(run_.stop_strings);
}

void Session::begin_run() {
    n_run_generated_ = 0;
    run_first_token_ = true;
    run_start_ms_ = now_ms();
}

bool Session::evaluate() {
    if (take_cancel()) return false;
    if (tokens_.empty()) return true;
    return evaluate_pending();
}

bool Session::evaluate_pending() {
    // With a drafter the last token is left pending: it is the root of the next speculation tree.
    const size_t target = drafter_ ? tokens_.size() - 1 : tokens_.size();
    bool prompt = false;
    while (size_t(n_evaluated_) < target) {
        if (take_cancel()) return false;
        const int32_t n = std::min<int32_t>(config_.n_batch, int32_t(target) - n_evaluated_);
        const double t0 = now_ms();
        if (!runner_->eval(tokens_.data() + n_evaluated_, n, n_evaluated_, logits_for_eval(), false)) {
            take_cancel();
            return false;
        }
        const double ms = now_ms() - t0;
        if (last_token_generated_ && n == 1) {
            decode_ms_ += ms;
        } else {
            prompt_ms_ += ms;
            n_prompt_tokens_ += n;
            prompt = true;
        }
        n_evaluated_ += n;
        logits_valid_ = true;
    }
    // A draft model evaluates the prompt too, as part of prompt processing (as llama.cpp's speculative decoding
    // does): the first round would otherwise pay for it, and --tree auto would weigh a prefill against one round.
    if (prompt && drafter_) {
        const double t0 = now_ms();
        const int32_t n = drafter_->prefill(std::span<const int32_t>(tokens_.data(), target));
        if (n >= 0) {
            const double ms = now_ms() - t0;
            prompt_ms_ += ms;
            if (tuner_) tuner_->caught_up(n, ms);
        }
    }
    return true;
}

specula_status Session::step(StepResult &out) {
    out = StepResult{};
    auto finish = [&](specula_stop_reason reason) { finish_run(reason, out); };
    if (take_cancel()) {
        finish(SPECULA_STOP_CANCELLED);
        return SPECULA_ERR_CANCELLED;
    }
    if (run_.max_tokens >= 0 && n_run_generated_ >= run_.max_tokens) {
        finish(SPECULA_STOP_MAX_TOKENS);
        return SPECULA_OK;
    }
    require(!tokens_.empty(), SPECULA_ERR_INVALID_ARGUMENT, "the context is empty: append a prompt (at least BOS) first");
    if (!evaluate_pending()) {
        finish(SPECULA_STOP_CANCELLED);
        return SPECULA_ERR_CANCELLED;
    }
    if (tokens_.size() >= size_t(n_ctx()) && !config_.shift.enabled) {
        finish(SPECULA_STOP_CONTEXT_FULL);
        return n_run_generated_ == 0 ? SPECULA_ERR_CONTEXT_FULL : SPECULA_OK;
    }

    const int32_t n_vocab = model_->hparams().n_vocab;
    int32_t token = SPECULA_TOKEN_NULL;
    bool accepted = false;
    // Auto tree: when the tuner expects nothing to pay, this round is a plain decoding step (the pending root is
    // evaluated as plain decoding evaluates a token, and the next token sampled from its logits).
    const int32_t choice = drafter_ && tuner_ && ready_next_ >= ready_.size() ? tuner_->next() : -1;
    const bool plain_round = choice >= 0 && tuner_->choices()[size_t(choice)].plain();
    if (plain_round) {
        const double t0 = now_ms();
        const int32_t n_past = int32_t(tokens_.size()) - 1;
        n_evaluated_ = std::min(n_evaluated_, n_past);
        if (!runner_->eval(tokens_.data() + n_past, 1, n_past, logits_for_eval(), false)) {
            take_cancel();
            finish(SPECULA_STOP_CANCELLED);
            return SPECULA_ERR_CANCELLED;
        }
        n_evaluated_ = n_past + 1;
        logits_valid_ = true;
        token = sampler_.sample(logits_.data(), n_vocab, tokens_);
        if (run_.top_logits > 0) fill_top_logits(run_.top_logits, out);
        const double ms = now_ms() - t0;
        decode_ms_ += ms;
        tuner_->record(choice, 1, 0.0, ms, 0);
        SpeculativeStats &st = spec_stats_;
        ++st.rounds;
        ++st.plain_rounds;
        ++st.produced;
        st.verify_ms += ms;
        st.tree = "auto:plain";
    } else if (drafter_) {
        if (ready_next_ >= ready_.size()) {
            const double t_round = now_ms();
            const bool done = speculate(choice);
            decode_ms_ += now_ms() - t_round;
            if (!done) {
                finish(SPECULA_STOP_CANCELLED);
                return SPECULA_ERR_CANCELLED;
            }
        }
        const size_t i = ready_next_++;
        token = ready_[i].token;
        accepted = ready_[i].accepted;
        logits_row_ = ready_row(i);
        if (run_.top_logits > 0) fill_top_logits(run_.top_logits, out);
    } else {
        const double t_sample = now_ms();
        if (const float *row = logits_row_) std::copy_n(row, size_t(n_vocab), logits_for_eval());  // a drafter was detached
        token = sampler_.sample(logits_.data(), n_vocab, tokens_);
        if (run_.top_logits > 0) fill_top_logits(run_.top_logits, out);
        decode_ms_ += now_ms() - t_sample;
    }

    if (run_.stop_at_eog && model_->vocab().is_eog(token)) {
        finish(SPECULA_STOP_EOS);
        return SPECULA_OK;
    }
    if (tokens_.size() >= size_t(n_ctx())) shift_context();  // only with the shift on (checked above)
    tokens_.push_back(token);
    last_token_generated_ = true;
    if (accepted) {
        // Its keys/values were committed by the round: it counts as evaluated, and the logits after it are
        // the next row of the round.
        ++n_evaluated_;
        logits_row_ = ready_row(ready_next_);
    }
    out.drafted = accepted;
    ++n_generated_;
    ++n_run_generated_;
    if (run_first_token_) {
        ttft_ms_ = now_ms() - run_start_ms_;
        run_first_token_ = false;
    }
    out.token = token;

    bool stopped = false;
    out.text = stops_.push(decoder_.push(model_->vocab().token_to_piece(token, false)), stopped);
    if (stopped) {
        out.stop = SPECULA_STOP_STOP_STRING;
        reset_stream();
    } else if (run_.max_tokens >= 0 && n_run_generated_ >= run_.max_tokens) {
        finish(SPECULA_STOP_MAX_TOKENS);
    } else if (tokens_.size() >= size_t(n_ctx()) && !config_.shift.enabled) {
        finish(SPECULA_STOP_CONTEXT_FULL);
    }
    return SPECULA_OK;
}

void Session::shift_context() {
    const int32_t n = int32_t(tokens_.size()), keep = config_.shift.keep, discard = shift_discard_;
    // A produced token finds the context full only once the cache holds all of it: plain decoding evaluated the
    // last token to sample this one, and a round's accepted tokens sit in slots below n_ctx (its tree never passes
    // the cache's end), so only its bonus token can arrive here.
    require(n_evaluated_ == n && ready_next_ >= ready_.size(), SPECULA_ERR_INTERNAL, "context shift: the context is not fully evaluated");
    runner_->shift_kv(keep, discard, n);
    tokens_.erase(tokens_.begin() + keep, tokens_.begin() + keep + discard);
    n_evaluated_ -= discard;
    if (drafter_) drafter_->shift(keep, discard);
    ++n_shifts_;
    n_discarded_ += discard;
}

void Session::finish_run(specula_stop_reason reason, StepResult &out) {
    out.stop = reason;
    std::string held = decoder_.flush();
    bool stopped = false;
    out.text += stops_.push(held, stopped);
    if (!stopped) out.text += stops_.flush();
    decoder_.reset();
    stops_.reset();
    // A round's accepted tokens not emitted yet still continue the context exactly after a max-tokens stop, so
    // they are kept: "generate N, then M more" then equals "generate N + M" at any temperature (the random draws
    // of the round are not spent twice), which is what exact snapshot resume builds on. Any other stop ends them:
    // after an end-of-generation token they would follow a token that is not in the context.
    if (reason != SPECULA_STOP_MAX_TOKENS) drop_ready();
}

void Session::fill_top_logits(int32_t k, StepResult &out) const {
    const int32_t n_vocab = model_->hparams().n_vocab;
    k = std::min(k, n_vocab);
    const float *logits = current_logits();
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    out.top_ids.assign(ids.begin(), ids.begin() + k);
    for (int32_t id : out.top_ids) out.top_logits.push_back(logits[size_t(id)]);
}

specula_stats Session::stats() const {
    specula_stats s{};
    s.struct_size = sizeof s;
    s.n_prompt_tokens = n_prompt_tokens_;
    s.n_generated = n_generated_;
    s.n_ctx_used = int32_t(tokens_.size());
    s.load_ms = model_->load_ms();
    s.prompt_ms = prompt_ms_;
    s.decode_ms = decode_ms_;
    s.ttft_ms = ttft_ms_;
    s.prompt_tokens_per_s = prompt_ms_ > 0 ? 1000.0 * n_prompt_tokens_ / prompt_ms_ : 0.0;
    s.decode_tokens_per_s = decode_ms_ > 0 ? 1000.0 * n_generated_ / decode_ms_ : 0.0;
    s.n_restored_tokens = n_restored_tokens_;
    s.n_context_shifts = n_shifts_;
    s.n_discarded_tokens = n_discarded_;
    return s;
}

bool Session::draft_logits(float *logits) {
    require(drafter_ != nullptr, SPECULA_ERR_INVALID_ARGUMENT, "draft logits: the session has no drafter attached");
    require(!tokens_.empty(), SPECULA_ERR_INVALID_ARGUMENT, "draft logits: the context is empty");
    if (!evaluate_pending()) return false;
    DraftRequest request;
    request.tokens = tokens_;
    request.n_target_kv = int32_t(tokens_.size()) - 1;
    request.shape = spec_.shape;
    require(drafter_->root_logits(request, logits), SPECULA_ERR_UNSUPPORTED,
            std::string("draft logits: the '") + drafter_->name() + "' drafter has no single next-token distribution");
    return true;
}

// One speculative round. The context ends with a pending token (the root); every earlier token is evaluated.
//  1. the drafter proposes a tree under the root, within the node budget and the room left in the context;
//  2. the target evaluates root + tree in one pass with hybrid tree attention (tree slots follow the context);
//  3. the verifier walks the tree with the session's sampler (exact: see verifier.h);
//  4. the accepted path's keys/values are moved, in every layer, to the slots right after the root, so the
//     cache holds exactly the committed tokens again. (LongSpec's reference moves only the last layer and
//     re-feeds the accepted tokens next round; on the CPU a copy of a few rows per layer is cheaper than
//     recomputing them, and the cache never holds stale rows.)
// The accepted tokens and the bonus token are queued in ready_ and emitted one per step.
bool Session::speculate(int32_t choice) {
    const int32_t n_vocab = model_->hparams().n_vocab;
    const int32_t n_past = int32_t(tokens_.size()) - 1;
    n_evaluated_ = std::min(n_evaluated_, n_past);  // the root is (re-)evaluated as the tree's node 0
    if (logits_row_) {  // the rows are about to be rewritten; the root's own logits come back with node 0
        logits_row_ = nullptr;
        logits_valid_ = false;
    }
    tree_.reset(tokens_.back());
    // The round's tree: the tuner's choice (auto), or the configured one.
    const TreeChoice &round = tuner_ ? tuner_->choices()[size_t(choice)] : fixed_tree_;
    const int32_t budget = std::min(1 + round.max_nodes(), n_ctx() - n_past);
    const double t0 = now_ms();
    if (budget > 1) {
        DraftRequest request;
        request.tokens = tokens_;
        request.n_target_kv = n_past;
        request.shape = round.shape;
        request.node_budget = budget;
        request.sampler = sampler_.greedy() ? nullptr : &sampler_;
        request.history_window = sampler_.history_window();
        if (sampler_.has_logit_processing())
            request.process_logits = [this, n_vocab](float *logits, std::span<const int32_t> history) {
                sampler_.process_logits(logits, n_vocab, history);
            };
        drafter_->draft(request, tree_);
        require(tree_.size() <= budget, SPECULA_ERR_INTERNAL, "speculative: the drafter exceeded its node budget");
    }
    const double t1 = now_ms();
    const int32_t n_nodes = tree_.size();
    tree_positions_.resize(size_t(n_nodes));
    for (int32_t i = 0; i < n_nodes; ++i) tree_positions_[size_t(i)] = n_past + tree_.depth(i);
    tree_.ancestor_mask(tree_mask_);
    // Only the rows the verifier visits get the LM head (at most depth + 1 of the tree's nodes).
    if (!runner_->eval_tree(tree_.tokens().data(), n_nodes, n_past, 0, tree_positions_.data(), tree_mask_.data(), nullptr)) {
        take_cancel();
        return false;
    }
    tree_logits_.resize(size_t(n_nodes) * size_t(n_vocab));
    tree_row_ready_.assign(size_t(n_nodes), 0);
    const auto row = [&](int32_t node) {
        float *r = tree_logits_.data() + size_t(node) * size_t(n_vocab);
        if (!tree_row_ready_[size_t(node)]) {
            runner_->tree_logits(node, r);
            tree_row_ready_[size_t(node)] = 1;
        }
        return static_cast<const float *>(r);
    };
    const VerifyOutcome outcome = verify_tree(tree_, row, n_vocab, sampler_, tokens_, spec_.residual_rule);
    path_nodes_.assign(1, 0);
    path_nodes_.insert(path_nodes_.end(), outcome.path.begin(), outcome.path.end());
    runner_->commit_tree_path(n_past, path_nodes_.data(), int32_t(path_nodes_.size()));
    n_evaluated_ = n_past + 1;
    logits_valid_ = true;

    ready_.clear();
    ready_next_ = 0;
    for (int32_t node : outcome.path) ready_.push_back({tree_.token(node), true});
    ready_.push_back({outcome.bonus, false});

    const double t2 = now_ms();
    if (tuner_) tuner_->record(choice, n_nodes, t1 - t0, t2 - t1, int32_t(outcome.path.size()));

    SpeculativeStats &st = spec_stats_;
    ++st.rounds;
    if (n_nodes == 1) ++st.plain_rounds;
    st.tree = (tuner_ ? "auto:" : "") + round.to_string();
    st.drafted += n_nodes - 1;
    st.accepted += int32_t(outcome.path.size());
    st.produced += int32_t(outcome.path.size()) + 1;
    if (st.accepted_at_depth.size() < outcome.path.size()) st.accepted_at_depth.resize(outcome.path.size(), 0);
    for (size_t d = 0; d < outcome.path.size(); ++d) ++st.accepted_at_depth[d];
    st.draft_ms += t1 - t0;
    st.verify_ms += t2 - t1;
    return true;
}

}  // namespace specula::internal
