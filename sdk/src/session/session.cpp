#include "session.h"

#include "core/error.h"
#include "core/timer.h"

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
      runner_(model_, choose_n_ctx(*model_, config.n_ctx), choose_threads(config.n_threads)),
      sampler_(sampler) {
    require(config_.n_batch > 0 && config_.n_batch <= 4096, SPECULA_ERR_INVALID_ARGUMENT, "session: n_batch must be in [1, 4096]");
    logits_.resize(size_t(model_->hparams().n_vocab));
}

void Session::set_sampler(const SamplerConfig &config) { sampler_ = Sampler(config); }

void Session::append_tokens(const int32_t *tokens, size_t n) {
    const int32_t n_vocab = model_->hparams().n_vocab;
    for (size_t i = 0; i < n; ++i)
        require(tokens[i] >= 0 && tokens[i] < n_vocab, SPECULA_ERR_INVALID_TOKEN,
                "token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) + " is outside [0, " + std::to_string(n_vocab) + ")");
    require(n <= size_t(n_ctx()) - tokens_.size(), SPECULA_ERR_CONTEXT_FULL,
            "context full: " + std::to_string(tokens_.size()) + " + " + std::to_string(n) + " tokens exceed n_ctx " + std::to_string(n_ctx()));
    if (n == 0) return;
    tokens_.insert(tokens_.end(), tokens, tokens + n);
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

bool Session::evaluate_pending() {
    while (size_t(n_evaluated_) < tokens_.size()) {
        if (take_cancel()) return false;
        const int32_t n = std::min<int32_t>(config_.n_batch, int32_t(tokens_.size()) - n_evaluated_);
        const double t0 = now_ms();
        runner_.eval(tokens_.data() + n_evaluated_, n, n_evaluated_, logits_.data(), false);
        const double ms = now_ms() - t0;
        if (last_token_generated_ && n == 1) {
            decode_ms_ += ms;
        } else {
            prompt_ms_ += ms;
            n_prompt_tokens_ += n;
        }
        n_evaluated_ += n;
        logits_valid_ = true;
    }
    return true;
}

specula_status Session::step(StepResult &out) {
    out = StepResult{};
    auto finish = [&](specula_stop_reason reason) {
        out.stop = reason;
        std::string held = decoder_.flush();
        bool stopped = false;
        out.text += stops_.push(held, stopped);
        if (!stopped) out.text += stops_.flush();
        reset_stream();
    };
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
    if (tokens_.size() >= size_t(n_ctx())) {
        finish(SPECULA_STOP_CONTEXT_FULL);
        return n_run_generated_ == 0 ? SPECULA_ERR_CONTEXT_FULL : SPECULA_OK;
    }

    const double t_sample = now_ms();
    const int32_t n_vocab = model_->hparams().n_vocab;
    const int32_t token = sampler_.sample(logits_.data(), n_vocab, tokens_);
    if (run_.top_logits > 0) fill_top_logits(run_.top_logits, out);
    decode_ms_ += now_ms() - t_sample;

    if (run_.stop_at_eog && model_->vocab().is_eog(token)) {
        finish(SPECULA_STOP_EOS);
        return SPECULA_OK;
    }
    tokens_.push_back(token);
    last_token_generated_ = true;
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
    } else if (tokens_.size() >= size_t(n_ctx())) {
        finish(SPECULA_STOP_CONTEXT_FULL);
    }
    return SPECULA_OK;
}

void Session::fill_top_logits(int32_t k, StepResult &out) const {
    const int32_t n_vocab = model_->hparams().n_vocab;
    k = std::min(k, n_vocab);
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int32_t i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits_[size_t(a)] > logits_[size_t(b)] || (logits_[size_t(a)] == logits_[size_t(b)] && a < b);
    });
    out.top_ids.assign(ids.begin(), ids.begin() + k);
    for (int32_t id : out.top_ids) out.top_logits.push_back(logits_[size_t(id)]);
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
    return s;
}

}  // namespace specula::internal
