#include "metrics.h"

#include <sstream>

namespace specula_serve {

void Metrics::request(const std::string &endpoint) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[endpoint];
}

void Metrics::error(int status) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++errors_[status];
}

void Metrics::completion(const CompletionResult &r) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++completions_;
    if (r.cancelled) ++cancelled_;
    prompt_tokens_ += r.timings.prompt_n;
    prompt_ms_ += r.timings.prompt_ms;
    predicted_tokens_ += r.timings.predicted_n;
    predicted_ms_ += r.timings.predicted_ms;
    cached_tokens_ += r.timings.cache_n;
    if (r.timings.cache_n > 0) ++cache_hits_;
    drafted_ += r.timings.draft_n;
    accepted_ += r.timings.draft_n_accepted;
}

std::string Metrics::prometheus(int busy, int waiting, long long kv_tokens, long long kv_capacity, const specula_batch_stats &batch) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::ostringstream out;
    out.precision(10);
    auto metric = [&](const char *name, const char *type, const char *help, double value) {
        out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << value << "\n";
    };
    metric("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", double(prompt_tokens_));
    metric("llamacpp:prompt_seconds_total", "counter", "Prompt process time", prompt_ms_ / 1e3);
    metric("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", double(predicted_tokens_));
    metric("llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time", predicted_ms_ / 1e3);
    metric("llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
           prompt_ms_ > 0 ? 1e3 * double(prompt_tokens_) / prompt_ms_ : 0.0);
    metric("llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
           predicted_ms_ > 0 ? 1e3 * double(predicted_tokens_) / predicted_ms_ : 0.0);
    metric("llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
           kv_capacity > 0 ? double(kv_tokens) / double(kv_capacity) : 0.0);
    metric("llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens.", double(kv_tokens));
    metric("llamacpp:requests_processing", "gauge", "Number of requests processing.", double(busy));
    metric("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", double(waiting));
    // Continuous batching's passes (0 without it: each slot then computes on its own).
    metric("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls", double(batch.passes));
    metric("llamacpp:n_busy_slots_per_decode", "counter", "Average number of busy slots per llama_decode() call",
           batch.passes > 0 ? double(batch.requests) / double(batch.passes) : 0.0);

    out << "# HELP specula:requests_total HTTP requests by endpoint.\n# TYPE specula:requests_total counter\n";
    for (const auto &[endpoint, n] : requests_) out << "specula:requests_total{endpoint=\"" << endpoint << "\"} " << n << "\n";
    out << "# HELP specula:errors_total Error responses by HTTP status.\n# TYPE specula:errors_total counter\n";
    for (const auto &[status, n] : errors_) out << "specula:errors_total{status=\"" << status << "\"} " << n << "\n";
    metric("specula:completions_total", "counter", "Generations run (completion, infill, chat; warm-ups included).", double(completions_));
    metric("specula:completions_cancelled_total", "counter", "Generations stopped because the client went away.", double(cancelled_));
    metric("specula:prompt_cache_hits_total", "counter", "Generations that reused a cached prefix of their prompt.", double(cache_hits_));
    metric("specula:prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache instead of evaluated.",
           double(cached_tokens_));
    metric("specula:draft_tokens_total", "counter", "Tokens proposed by the drafters.", double(drafted_));
    metric("specula:draft_tokens_accepted_total", "counter", "Drafted tokens the target accepted.", double(accepted_));
    metric("specula:draft_acceptance_ratio", "gauge", "Accepted / drafted tokens since start.",
           drafted_ > 0 ? double(accepted_) / double(drafted_) : 0.0);
    // Tokens per target pass: generated tokens over the passes that produced them (each pass yields one token of
    // its own plus the drafted ones it accepted).
    metric("specula:tau", "gauge", "Mean tokens per target forward pass while generating.",
           predicted_tokens_ > accepted_ ? double(predicted_tokens_) / double(predicted_tokens_ - accepted_) : 0.0);
    return out.str();
}

}  // namespace specula_serve
