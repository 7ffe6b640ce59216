#include "sampler_steps.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

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
std::unique_ptr<SamplerStep> make_top_k(int32_t k) { return std::make_unique<TopK>(k); }
std::unique_ptr<SamplerStep> make_top_p(float p) { return std::make_unique<TopP>(p); }
std::unique_ptr<SamplerStep> make_min_p(float min_p) { return std::make_unique<MinP>(min_p); }
std::unique_ptr<SamplerStep> make_temperature(float temperature) { return std::make_unique<Temperature>(temperature); }

}  // namespace specula::internal
