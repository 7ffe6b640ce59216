#include "sampler.h"

#include <cmath>

namespace specula::internal {

Sampler::Sampler(const SamplerConfig &config) : config_(config), rng_(config.seed) {
    const bool penalize = config.repeat_penalty != 1.0f || config.frequency_penalty != 0.0f || config.presence_penalty != 0.0f;
    if (penalize && config.penalty_last_n != 0)
        steps_.push_back(make_penalties(config.penalty_last_n, config.repeat_penalty, config.frequency_penalty, config.presence_penalty));
    if (greedy()) return;
    // llama.cpp's order: top-k, top-p, min-p, then temperature.
    if (config.top_k > 0) steps_.push_back(make_top_k(config.top_k));
    if (config.top_p < 1.0f) steps_.push_back(make_top_p(config.top_p));
    if (config.min_p > 0.0f) steps_.push_back(make_min_p(config.min_p));
    steps_.push_back(make_temperature(config.temperature));
}

void Sampler::distribution(const float *logits, int32_t n_vocab, std::span<const int32_t> history, Candidates &out) const {
    out.reset(logits, n_vocab);
    for (const auto &step : steps_) step->apply(out, history);
    if (greedy()) {
        out.keep_top(1);
        out.items[0].p = 1.0f;
        return;
    }
    out.normalize();
}

int32_t Sampler::sample(const float *logits, int32_t n_vocab, std::span<const int32_t> history) {
    distribution(logits, n_vocab, history, scratch_);
    if (greedy()) return scratch_.items[0].id;
    const double u = uniform();
    double cumulative = 0.0;
    for (const Candidate &c : scratch_.items) {
        cumulative += c.p;
        if (u < cumulative) return c.id;
    }
    return scratch_.items.back().id;  // rounding left u above the total
}

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

}  // namespace specula::internal
