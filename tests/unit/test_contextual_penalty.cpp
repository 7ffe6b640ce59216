// TokenSwift's contextual penalty as a sampler step: each distinct recent token penalised once, the window, its
// effect on greedy decoding, bit-identical behaviour when off, and Sampler::process_logits (the drafters' copy of
// the step) agreeing with what distribution() applies.
#include <catch2/catch.hpp>

#include "sampling/sampler.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

using namespace specula::internal;

namespace {

SamplerConfig plain(float temperature) {
    SamplerConfig c;
    c.temperature = temperature;
    c.top_k = 0;
    c.top_p = 1.0f;
    c.min_p = 0.0f;
    return c;
}

SamplerConfig penalised(float temperature, float theta, int32_t window) {
    SamplerConfig c = plain(temperature);
    c.context_penalty = theta;
    c.context_penalty_window = window;
    return c;
}

std::vector<float> processed(const Sampler &s, std::vector<float> logits, const std::vector<int32_t> &history) {
    s.process_logits(logits.data(), int32_t(logits.size()), history);
    return logits;
}

std::map<int32_t, float> probabilities(const Sampler &s, const std::vector<float> &logits, const std::vector<int32_t> &history) {
    Candidates c;
    s.distribution(logits.data(), int32_t(logits.size()), history, c);
    std::map<int32_t, float> p;
    for (const Candidate &cand : c.items) p[cand.id] = cand.p;
    return p;
}

// A deterministic pseudo-random sequence (an LCG), so the tests need no seed plumbing.
struct Lcg {
    uint64_t state;
    uint32_t next() {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return uint32_t(state >> 33);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() % 1000000) / 1000000.0f; }
};

}  // namespace

TEST_CASE("contextual penalty divides positive and multiplies negative logits once per distinct token", "[speculative]") {
    const Sampler s(penalised(1.0f, 2.0f, 1024));
    const std::vector<float> logits = {3.0f, 1.0f, -4.0f, 5.0f, 0.0f};
    // Token 2 appears three times, token 0 once: each is penalised exactly once.
    const std::vector<float> out = processed(s, logits, {2, 2, 2, 0, 4});
    CHECK(out[0] == 1.5f);
    CHECK(out[1] == 1.0f);
    CHECK(out[2] == -8.0f);
    CHECK(out[3] == 5.0f);
    CHECK(out[4] == 0.0f);

    // The distribution applies the same: softmax of the penalised logits.
    auto p = probabilities(s, logits, {2, 2, 2, 0, 4});
    double sum = 0.0;
    for (float x : out) sum += std::exp(double(x));
    for (int32_t i = 0; i < 5; ++i) CHECK(p[i] == Approx(std::exp(double(out[size_t(i)])) / sum));
}

TEST_CASE("contextual penalty looks only at the last window tokens", "[speculative]") {
    const std::vector<float> logits = {4.0f, 4.0f, 4.0f, 4.0f};
    const std::vector<int32_t> history = {0, 1, 2, 1};
    CHECK(processed(Sampler(penalised(1.0f, 2.0f, 2)), logits, history) == std::vector<float>{4.0f, 2.0f, 2.0f, 4.0f});
    CHECK(processed(Sampler(penalised(1.0f, 2.0f, 1)), logits, history) == std::vector<float>{4.0f, 2.0f, 4.0f, 4.0f});
    CHECK(processed(Sampler(penalised(1.0f, 2.0f, -1)), logits, history) == std::vector<float>{2.0f, 2.0f, 2.0f, 4.0f});
    CHECK(processed(Sampler(penalised(1.0f, 2.0f, 100)), logits, history) == std::vector<float>{2.0f, 2.0f, 2.0f, 4.0f});
    // A zero window penalises nothing; an empty history neither.
    CHECK(processed(Sampler(penalised(1.0f, 2.0f, 0)), logits, history) == logits);
    CHECK(processed(Sampler(penalised(1.0f, 2.0f, 8)), logits, {}) == logits);
    // Ids outside the vocabulary in the history are ignored by the dense form.
    CHECK(processed(Sampler(penalised(1.0f, 2.0f, 8)), logits, {7, -1, 3}) == std::vector<float>{4.0f, 4.0f, 4.0f, 2.0f});
}

TEST_CASE("contextual penalty changes the greedy argmax", "[speculative]") {
    const std::vector<float> positive = {5.0f, 4.5f, 1.0f};
    CHECK(Sampler(plain(0.0f)).sample(positive.data(), 3, std::vector<int32_t>{0}) == 0);
    CHECK(Sampler(penalised(0.0f, 1.5f, 64)).sample(positive.data(), 3, std::vector<int32_t>{0}) == 1);
    // Not when the penalised token stays ahead.
    CHECK(Sampler(penalised(0.0f, 1.05f, 64)).sample(positive.data(), 3, std::vector<int32_t>{0}) == 0);
    // Negative logits are pushed further down.
    const std::vector<float> negative = {-1.0f, -1.2f};
    CHECK(Sampler(plain(0.0f)).sample(negative.data(), 2, std::vector<int32_t>{0}) == 0);
    CHECK(Sampler(penalised(0.0f, 1.5f, 64)).sample(negative.data(), 2, std::vector<int32_t>{0}) == 1);
    // The greedy distribution is that single token.
    Candidates c;
    Sampler(penalised(0.0f, 1.5f, 64)).distribution(positive.data(), 3, std::vector<int32_t>{0}, c);
    REQUIRE(c.items.size() == 1);
    CHECK(c.items[0].id == 1);
    CHECK(c.items[0].p == 1.0f);
}

TEST_CASE("contextual penalty comes after the repetition penalties", "[speculative]") {
    SamplerConfig config = penalised(1.0f, 2.0f, 16);
    config.repeat_penalty = 2.0f;
    config.presence_penalty = 1.0f;
    config.penalty_last_n = 16;
    const Sampler s(config);
    const std::vector<float> logits = {9.0f, 0.0f};
    Candidates c;
    s.distribution(logits.data(), 2, std::vector<int32_t>{0}, c);
    // (9 / 2 - 1) / 2 = 1.75 (the other way round it would be 9 / 2 / 2 - 1 = 1.25).
    for (const Candidate &cand : c.items)
        if (cand.id == 0) CHECK(cand.logit == 1.75f);
}

TEST_CASE("contextual penalty step works on sorted and filtered candidates", "[speculative]") {
    const auto step = make_contextual_penalty(3, 2.0f);
    const std::vector<float> logits = {1.0f, -2.0f, 6.0f, 3.0f, -0.5f, 8.0f};
    const std::vector<int32_t> history = {5, 0, 1, 4, 4};
    Candidates dense;
    dense.reset(logits.data(), int32_t(logits.size()));
    step->apply(dense, history);
    Candidates shuffled;
    shuffled.reset(logits.data(), int32_t(logits.size()));
    shuffled.keep_top(5);  // sorted, the last (id 1, -2) dropped
    step->apply(shuffled, history);
    CHECK_FALSE(shuffled.sorted);
    std::map<int32_t, float> want;
    for (const Candidate &cand : dense.items) want[cand.id] = cand.logit;
    CHECK(want[0] == 1.0f);  // outside the window of 3
    CHECK(want[1] == -4.0f);
    CHECK(want[4] == -1.0f);
    CHECK(want[5] == 8.0f);  // outside the window
    REQUIRE(shuffled.items.size() == 5);
    for (const Candidate &cand : shuffled.items) CHECK(cand.logit == want[cand.id]);
}

TEST_CASE("contextual penalty theta 1 leaves the chain bit-identical", "[speculative]") {
    Lcg rng{42};
    for (int round = 0; round < 20; ++round) {
        SamplerConfig config;  // the default chain: top-k 40, top-p 0.95, min-p 0.05, T 0.8
        config.repeat_penalty = round % 2 ? 1.1f : 1.0f;
        config.temperature = round % 5 == 0 ? 0.0f : 0.8f;
        config.context_penalty = 1.0f;
        config.context_penalty_window = round % 3 == 0 ? -1 : 1024;
        std::vector<float> logits(200);
        for (float &x : logits) x = rng.uniform(-8.0f, 8.0f);
        std::vector<int32_t> history(50);
        for (int32_t &t : history) t = int32_t(rng.next() % 200);

        Candidates got;
        Sampler(config).distribution(logits.data(), 200, history, got);
        // The chain as it was before the contextual penalty existed, built from the steps by hand.
        Candidates want;
        want.reset(logits.data(), 200);
        if (config.repeat_penalty != 1.0f) make_penalties(config.penalty_last_n, config.repeat_penalty, 0.0f, 0.0f)->apply(want, history);
        if (config.temperature <= 0.0f) {
            want.keep_top(1);
            want.items[0].p = 1.0f;
        } else {
            make_top_k(config.top_k)->apply(want, history);
            make_top_p(config.top_p)->apply(want, history);
            make_min_p(config.min_p)->apply(want, history);
            make_temperature(config.temperature)->apply(want, history);
            want.normalize();
        }
        REQUIRE(got.items.size() == want.items.size());
        for (size_t i = 0; i < got.items.size(); ++i) {
            CHECK(got.items[i].id == want.items[i].id);
            CHECK(got.items[i].logit == want.items[i].logit);
            CHECK(got.items[i].p == want.items[i].p);
        }
        // process_logits is a no-op when the penalty is off.
        const Sampler off(config);
        CHECK(processed(off, logits, history) == logits);
        CHECK_FALSE(off.has_logit_processing());
        // And so is the step itself with theta 1.
        Candidates cc;
        cc.reset(logits.data(), 200);
        make_contextual_penalty(-1, 1.0f)->apply(cc, history);
        for (int32_t i = 0; i < 200; ++i) CHECK(cc.items[size_t(i)].logit == logits[size_t(i)]);
    }
}

TEST_CASE("process_logits applies exactly what distribution applies for the contextual penalty", "[speculative]") {
    Lcg rng{7};
    for (int round = 0; round < 20; ++round) {
        SamplerConfig config;  // default top-k / top-p / min-p
        config.temperature = round % 4 == 0 ? 0.0f : 0.7f;
        config.context_penalty = 1.0f + 0.1f * float(round % 7 + 1);
        config.context_penalty_window = round % 3 == 0 ? -1 : 16;
        SamplerConfig without = config;
        without.context_penalty = 1.0f;
        const int32_t n_vocab = 64;
        std::vector<float> logits(static_cast<size_t>(n_vocab));
        for (float &x : logits) x = rng.uniform(-6.0f, 6.0f);
        std::vector<int32_t> history(40);
        for (int32_t &t : history) t = int32_t(rng.next() % uint32_t(n_vocab));

        const Sampler with_penalty(config), plain_chain(without);
        REQUIRE(with_penalty.has_logit_processing());
        Candidates direct, via_process;
        with_penalty.distribution(logits.data(), n_vocab, history, direct);
        const std::vector<float> pre = processed(with_penalty, logits, history);
        plain_chain.distribution(pre.data(), n_vocab, history, via_process);
        REQUIRE(direct.items.size() == via_process.items.size());
        for (size_t i = 0; i < direct.items.size(); ++i) {
            CHECK(direct.items[i].id == via_process.items[i].id);
            CHECK(direct.items[i].p == via_process.items[i].p);
        }
    }
}
