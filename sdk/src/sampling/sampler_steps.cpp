#include "sampler_steps.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace specula::internal {
namespace {

class Penalties final : public SamplerStep {
public:
    Penalties(int32_t last_n, float repeat, float frequency, float presence)
        : last_n_(last_n), repeat_(repeat), frequency_(frequency), presence_(presence) {}
    const char *name() const override { return "penalties"; }
    void apply(Candidates &c, std::span<const int32_t> history) const override {
        const size_t n = last_n_ < 0 ? history.size() : std::min(history.size(), size_t(last_n_));
        std::unordered_map<int32_t, int> counts;
        for (size_t i = history.size() - n; i < history.size(); ++i) ++counts[history[i]];
        if (counts.empty()) return;
        for (Candidate &cand : c.items) {
            auto it = counts.find(cand.id);
            if (it == counts.end()) continue;
            cand.logit = cand.logit <= 0 ? cand.logit * repeat_ : cand.logit / repeat_;
            cand.logit -= float(it->second) * frequency_ + presence_;
        }
        c.sorted = false;
    }

private:
    int32_t last_n_;
    float repeat_, frequency_, presence_;
};

// The distinct ids among the last `window` tokens of the history (window < 0: all of it), ascending.
std::vector<int32_t> distinct_recent(std::span<const int32_t> history, int32_t window) {
    const size_t n = window < 0 ? history.size() : std::min(history.size(), size_t(window));
    std::vector<int32_t> ids(history.end() - ptrdiff_t(n), history.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

float contextual(float logit, float theta) { return logit < 0 ? logit * theta : logit / theta; }

class ContextualPenalty final : public SamplerStep {
public:
    ContextualPenalty(int32_t window, float theta) : window_(window), theta_(theta) {}
    const char *name() const override { return "contextual-penalty"; }
    void apply(Candidates &c, std::span<const int32_t> history) const override {
        const std::vector<int32_t> ids = distinct_recent(history, window_);
        if (ids.empty()) return;
        // Fast path: right after reset() (and any step that keeps the layout) item i holds id i. Ids are unique
        // among the items, so finding id t at index t means it is the only item to change.
        bool direct = true;
        for (int32_t t : ids)
            if (t < 0 || size_t(t) >= c.items.size() || c.items[size_t(t)].id != t) {
                direct = false;
                break;
            }
        if (direct) {
            for (int32_t t : ids) c.items[size_t(t)].logit = contextual(c.items[size_t(t)].logit, theta_);
        } else {
            const std::unordered_set<int32_t> set(ids.begin(), ids.end());
            for (Candidate &cand : c.items)
                if (set.count(cand.id)) cand.logit = contextual(cand.logit, theta_);
        }
        c.sorted = false;
    }

private:
    int32_t window_;
    float theta_;
};

class TopK final : public SamplerStep {
public:
    explicit TopK(int32_t k) : k_(k) {}
    const char *name() const override { return "top-k"; }
    void apply(Candidates &c, std::span<const int32_t>) const override { c.keep_top(size_t(k_)); }

private:
    int32_t k_;
};

class TopP final : public SamplerStep {
public:
    explicit TopP(float p) : p_(p) {}
    const char *name() const override { return "top-p"; }
    void apply(Candidates &c, std::span<const int32_t>) const override {
        c.sort();
        c.normalize();
        double mass = 0.0;
        size_t keep = c.items.size();
        for (size_t i = 0; i < c.items.size(); ++i) {
            mass += c.items[i].p;
            if (mass >= p_) {
                keep = i + 1;
                break;
            }
        }
        c.items.resize(keep);
    }

private:
    float p_;
};

class MinP final : public SamplerStep {
public:
    explicit MinP(float min_p) : min_p_(min_p) {}
    const char *name() const override { return "min-p"; }
    void apply(Candidates &c, std::span<const int32_t>) const override {
        // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p)
        float max = -INFINITY;
        for (const Candidate &cand : c.items) max = std::max(max, cand.logit);
        const float threshold = max + std::log(min_p_);
        std::erase_if(c.items, [&](const Candidate &cand) { return cand.logit < threshold; });
    }

private:
    float min_p_;
};

class Temperature final : public SamplerStep {
public:
    explicit Temperature(float t) : t_(t) {}
    const char *name() const override { return "temperature"; }
    void apply(Candidates &c, std::span<const int32_t>) const override {
        for (Candidate &cand : c.items) cand.logit /= t_;
    }

private:
    float t_;
};

}  // namespace

std::unique_ptr<SamplerStep> make_penalties(int32_t last_n, float repeat, float frequency, float presence) {
    return std::make_unique<Penalties>(last_n, repeat, frequency, presence);
}
std::unique_ptr<SamplerStep> make_contextual_penalty(int32_t window, float theta) {
    return std::make_unique<ContextualPenalty>(window, theta);
}
void apply_contextual_penalty(float *logits, int32_t n_vocab, std::span<const int32_t> history, int32_t window, float theta) {
    for (int32_t t : distinct_recent(history, window))
        if (t >= 0 && t < n_vocab) logits[t] = contextual(logits[t], theta);
}
std::unique_ptr<SamplerStep> make_top_k(int32_t k) { return std::make_unique<TopK>(k); }
std::unique_ptr<SamplerStep> make_top_p(float p) { return std::make_unique<TopP>(p); }
std::unique_ptr<SamplerStep> make_min_p(float min_p) { return std::make_unique<MinP>(min_p); }
std::unique_ptr<SamplerStep> make_temperature(float temperature) { return std::make_unique<Temperature>(temperature); }

}  // namespace specula::internal
