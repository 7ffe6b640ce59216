#include "session.h"

#include "session/phase_hook.h"
#include "core/thread_pool.h"
#include "core/error.h"
#include "core/timer.h"
#include "sampling/candidates.h"

#include <algorithm>
#include <cmath>
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
    return default_thread_count();
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model, const SessionConfig &config, const SamplerConfig &sampler)
    : model_(std::move(model)),
      config_(config),
      pool_(std::make_unique<ThreadPool>(choose_threads(config.n_threads))),
      runner_(config.make_runner ? config.make_runner(model_, choose_n_ctx(*model_, config.n_ctx), *pool_)
                                 : make_target_runner(model_, choose_n_ctx(*model_, config.n_ctx), *pool_, config.backend, backend_note_)),
      sampler_(sampler) {
    if (sampler_.has_grammar()) sampler_.bind_vocab(model_->grammar_vocab());
    runner_->set_cancel_flag(&cancel_requested_);
    require(config_.n_batch > 0 && config_.n_batch <= 4096, SPECULA_ERR_INVALID_ARGUMENT, "session: n_batch must be in [1, 4096]");
    logits_.init(model_->hparams().n_vocab);
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
    Sampler sampler(config);
    if (sampler.has_grammar()) sampler.bind_vocab(model_->grammar_vocab());
    sampler_ = std::move(sampler);
    spec_.set_temperature(sampler_.config().temperature);
    drop_ready();  // verified under the old sampler
}

void Session::set_speculative(const SpeculativeConfig &config) {
    spec_.attach(config, model_, *runner_, *pool_, int32_t(tokens_.size()));
    spec_.set_temperature(sampler_.config().temperature);
    drafter_behind_ = spec_.attached() && !tokens_.empty();
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
    if (spec_.tuner()) spec_.tuner()->context_grew(int32_t(n));
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
    spec_.shadow_clear();
    if (spec_.attached()) spec_.drafter()->rewind(n_tokens);
    // KV slots beyond n_tokens are simply overwritten later. If the cut removes evaluated tokens, the last kept
    // token is evaluated again so that the next step has its logits; otherwise the KV cache and the logits of
    // the last evaluated position stay as they are.
    if (n_tokens < n_evaluated_) {
        n_evaluated_ = std::max(n_tokens - 1, 0);
        logits_.invalidate();
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
    const size_t target = spec_.attached() ? tokens_.size() - 1 : tokens_.size();
    // Without a drafter on a runner whose prompt batches depend on the batch, the last token is evaluated alone too:
    // a speculative session stops its batches one token earlier (above), and both must batch alike to stay equal.
    const size_t batched = !spec_.attached() && !runner_->capabilities().prompt_batches_invariant && target > size_t(n_evaluated_) + 1 ? target - 1 : target;
    bool prompt = false;
    while (size_t(n_evaluated_) < target) {
        if (take_cancel()) return false;
        const int32_t n = size_t(n_evaluated_) < batched ? std::min<int32_t>(config_.n_batch, int32_t(batched) - n_evaluated_) : 1;
        at_phase(last_token_generated_ && n == 1 ? Phase::Decode : Phase::Prefill);
        const double t0 = now_ms();
        if (!runner_->eval(tokens_.data() + n_evaluated_, n, n_evaluated_, logits_.eval_row(), false)) {
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
        logits_.set_evaluated();
    }
    // A draft model evaluates the prompt too, as part of prompt processing (as llama.cpp's speculative decoding
    // does): the first round would otherwise pay for it, and --tree auto would weigh a prefill against one round.
    // So does a drafter attached to a context evaluated before it (a session forked from a cached prompt, a
    // restored snapshot): its first round would pay for the whole context (LongSpec's ring, a draft model's cache),
    // and --tree auto, counting that as the cost of resuming, kept away from model shapes for the whole run.
    if ((prompt || drafter_behind_) && spec_.attached()) {
        drafter_behind_ = false;
        const double t0 = now_ms();
        const int32_t n = spec_.drafter()->prefill(std::span<const int32_t>(tokens_.data(), target));
        if (n >= 0) {
            const double ms = now_ms() - t0;
            prompt_ms_ += ms;
            if (spec_.tuner()) spec_.tuner()->caught_up(n, ms);
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
    // The n-gram-only choices are drafted first (counterfactual rounds), which also tells the tuner whether the
    // n-grams propose anything at this root.
    int32_t choice = -1;
    if (spec_.attached() && !spec_.has_ready() && spec_.tuner() != nullptr) {
        choice = spec_.next_choice(spec_.shadow_draft(tokens_, n_ctx()), int32_t(tokens_.size()));
        spec_.shadow_played(choice);
    }
    const bool plain_round = spec_.plain(choice);
    if (plain_round) {
        const double t0 = now_ms();
        const int32_t n_past = int32_t(tokens_.size()) - 1;
        n_evaluated_ = std::min(n_evaluated_, n_past);
        at_phase(Phase::Decode);
        if (!runner_->eval(tokens_.data() + n_past, 1, n_past, logits_.eval_row(), false)) {
            take_cancel();
            finish(SPECULA_STOP_CANCELLED);
            return SPECULA_ERR_CANCELLED;
        }
        n_evaluated_ = n_past + 1;
        logits_.set_evaluated();
        token = sampler_.sample(logits_.current(), n_vocab, tokens_);
        report_distribution(token, out);
        const double ms = now_ms() - t0;
        decode_ms_ += ms;
        spec_.record_plain(choice, ms);
    } else if (spec_.attached()) {
        if (!spec_.has_ready()) {
            const double t_round = now_ms();
            const bool done = speculate(choice);
            decode_ms_ += now_ms() - t_round;
            if (!done) {
                finish(SPECULA_STOP_CANCELLED);
                return SPECULA_ERR_CANCELLED;
            }
        }
        logits_.point_at(spec_.next_index());
        const SpeculativeRound::Ready next = spec_.take();
        token = next.token;
        accepted = next.accepted;
        report_distribution(token, out);
    } else {
        const double t_sample = now_ms();
        token = sampler_.sample(logits_.current(), n_vocab, tokens_);  // a drafter was detached: maybe a round's row
        report_distribution(token, out);
        decode_ms_ += now_ms() - t_sample;
    }

    if (run_.stop_at_eog && model_->vocab().is_eog(token)) {
        finish(SPECULA_STOP_EOS);
        return SPECULA_OK;
    }
    if (tokens_.size() >= size_t(n_ctx())) shift_context();  // only with the shift on (checked above)
    sampler_.accept(token);  // the grammar's state follows the emitted tokens
    tokens_.push_back(token);
    last_token_generated_ = true;
    if (spec_.attached()) spec_.shadow_settle(tokens_);
    if (accepted) {
        // Its keys/values were committed by the round: it counts as evaluated, and the logits after it are
        // the next row of the round.
        ++n_evaluated_;
        logits_.point_at(spec_.next_index());
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
    require(n_evaluated_ == n && !spec_.has_ready(), SPECULA_ERR_INTERNAL, "context shift: the context is not fully evaluated");
    runner_->shift_kv(keep, discard, n);
    tokens_.erase(tokens_.begin() + keep, tokens_.begin() + keep + discard);
    n_evaluated_ -= discard;
    if (spec_.attached()) spec_.drafter()->shift(keep, discard);
    spec_.shadow_clear();
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

void Session::report_distribution(int32_t token, StepResult &out) const {
    if (run_.top_logits <= 0 && run_.top_probs <= 0) return;
    const int32_t n_vocab = model_->hparams().n_vocab;
    const float *logits = logits_.current();
    // Raw logits, largest first (ties: the lower id), as many as either report needs.
    const int32_t k = std::min(std::max(run_.top_logits, run_.top_probs), n_vocab);
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    if (run_.top_logits > 0) {
        out.top_ids.assign(ids.begin(), ids.begin() + std::min(run_.top_logits, n_vocab));
        for (int32_t id : out.top_ids) out.top_logits.push_back(logits[size_t(id)]);
        // log(sum(exp)) over the whole vocabulary, in double and in id order (the same bits on every run).
        const double max = logits[size_t(ids[0])];
        double sum = 0.0;
        for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[size_t(i)]) - max);
        out.logsumexp = float(max + std::log(sum));
        out.token_logit = logits[size_t(token)];
    }
    if (run_.top_probs > 0) {
        // The distribution the token was drawn from: the sampler chain over these logits and the history before
        // the token (greedy: the argmax alone, p = 1). Tokens the chain removed follow with p = 0, by raw logit.
        Candidates dist;
        sampler_.distribution(logits, n_vocab, tokens_, dist);
        std::sort(dist.items.begin(), dist.items.end(),
                  [](const Candidate &a, const Candidate &b) { return a.p > b.p || (a.p == b.p && a.id < b.id); });
        const size_t want = size_t(std::min(run_.top_probs, n_vocab));
        for (const Candidate &c : dist.items) {
            if (c.id == token) out.token_prob = c.p;
            if (out.top_prob_ids.size() < want) out.top_prob_ids.push_back(c.id), out.top_probs.push_back(c.p);
        }
        // Only the first k ids are sorted by logit.
        for (size_t i = 0; i < size_t(k) && out.top_prob_ids.size() < want; ++i) {
            if (std::find(out.top_prob_ids.begin(), out.top_prob_ids.end(), ids[i]) == out.top_prob_ids.end())
                out.top_prob_ids.push_back(ids[i]), out.top_probs.push_back(0.0f);
        }
    }
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
    s.n_grammar_drafted = spec_.stats().grammar_drafted;
    s.n_grammar_accepted = spec_.stats().grammar_accepted;
    s.n_grammar_pruned = spec_.stats().grammar_pruned;
    s.n_ctx_evaluated = n_evaluated_;
    const SpeculativeStats &sp = spec_.stats();
    s.n_spec_rounds = sp.rounds;
    s.n_drafted = sp.drafted;
    s.n_accepted = sp.accepted;
    s.tau = sp.rounds > 0 ? double(sp.produced) / sp.rounds : 0.0;
    s.draft_ms = sp.draft_ms;
    s.verify_ms = sp.verify_ms;
    const size_t n_depth = sizeof s.accepted_at_depth / sizeof s.accepted_at_depth[0];
    for (size_t d = 0; d < n_depth; ++d) s.accepted_at_depth[d] = d < sp.accepted_at_depth.size() ? sp.accepted_at_depth[d] : 0;
    s.drafter_bytes = drafter_bytes();
    return s;
}

bool Session::draft_logits(float *logits) {
    require(spec_.attached(), SPECULA_ERR_INVALID_ARGUMENT, "draft logits: the session has no drafter attached");
    require(!tokens_.empty(), SPECULA_ERR_INVALID_ARGUMENT, "draft logits: the context is empty");
    if (!evaluate_pending()) return false;
    DraftRequest request;
    request.tokens = tokens_;
    request.n_target_kv = int32_t(tokens_.size()) - 1;
    request.shape = spec_.config().shape;
    require(spec_.drafter()->root_logits(request, logits), SPECULA_ERR_UNSUPPORTED,
            std::string("draft logits: the '") + spec_.drafter()->name() + "' drafter has no single next-token distribution");
    return true;
}

// A round (SpeculativeRound::run) re-evaluates the pending root as the tree's node 0 and rewrites the rows the
// session's logits may point at; afterwards the cache holds every committed token and the root's logits are row 0.
bool Session::speculate(int32_t choice) {
    const int32_t n_past = int32_t(tokens_.size()) - 1;
    n_evaluated_ = std::min(n_evaluated_, n_past);
    logits_.invalidate();  // the round evaluates the root again: nothing of the last round is read any more
    if (!spec_.run(choice, tokens_, *runner_, sampler_, n_ctx(), logits_)) {
        take_cancel();
        return false;
    }
    n_evaluated_ = n_past + 1;
    return true;
}

}  // namespace specula::internal
