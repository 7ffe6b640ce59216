// Server counters for /metrics (Prometheus text format 0.0.4): llama-server's llamacpp:* names, so existing
// dashboards work, plus Specula's own (speculation and prompt-cache figures) under specula:*.
#pragma once

#include "completion.h"

#include <map>
#include <mutex>
#include <string>

namespace specula_serve {

class Metrics {
public:
    void request(const std::string &endpoint);
    void error(int status);
    void completion(const CompletionResult &r);
    // busy slots, waiting requests, tokens held in the slots' contexts and their total capacity.
    std::string prometheus(int busy, int waiting, long long kv_tokens, long long kv_capacity, const specula_batch_stats &batch) const;

private:
    mutable std::mutex mutex_;
    std::map<std::string, long long> requests_;
    std::map<int, long long> errors_;
    long long prompt_tokens_ = 0, predicted_tokens_ = 0, cached_tokens_ = 0, cache_hits_ = 0, completions_ = 0,
              cancelled_ = 0, drafted_ = 0, accepted_ = 0;
    double prompt_ms_ = 0, predicted_ms_ = 0;
};

}  // namespace specula_serve
