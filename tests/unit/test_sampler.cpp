// The sampler chain: each step's semantics, greedy tie-breaking, seeded reproducibility, and a statistical test
// that draws follow the chain's distribution.
#include <catch2/catch.hpp>

#include "sampling/sampler.h"

#include <cmath>
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

std::map<int32_t, float> probabilities(const Sampler &s, const std::vector<float> &logits, const std::vector<int32_t> &history = {}) {
    Candidates c;
    s.distribution(logits.data(), int32_t(logits.size()), history, c);
    std::map<int32_t, float> p;
    for (const Candidate &cand : c.items) p[cand.id] = cand.p;
    return p;
}

}  // namespace

TEST_CASE("greedy takes the argmax and breaks ties toward the lowest id", "[sampler]") {
    Sampler s(plain(0.0f));
    const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    CHECK(s.sample(logits.data(), 5, {}) == 1);
    const std::vector<float> all_equal(7, 0.25f);
    CHECK(s.sample(all_equal.data(), 7, {}) == 0);
}

TEST_CASE("temperature 1 gives the softmax of the logits", "[sampler]") {
    const Sampler s(plain(1.0f));
    const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};
    auto p = probabilities(s, logits);
    CHECK(p[0] == Approx(1.0 / 8));
    CHECK(p[1] == Approx(2.0 / 8));
    CHECK(p[2] == Approx(5.0 / 8));
}

TEST_CASE("temperature sharpens and flattens", "[sampler]") {
    const std::vector<float> logits = {0.0f, 1.0f};
    CHECK(probabilities(Sampler(plain(0.5f)), logits)[1] == Approx(std::exp(2.0) / (1 + std::exp(2.0))));
    CHECK(probabilities(Sampler(plain(2.0f)), logits)[1] == Approx(std::exp(0.5) / (1 + std::exp(0.5))));
}

TEST_CASE("top-k keeps the k largest", "[sampler]") {
    SamplerConfig c = plain(1.0f);
    c.top_k = 2;
    auto p = probabilities(Sampler(c), {0.1f, 5.0f, 4.0f, -1.0f});
    REQUIRE(p.size() == 2);
    CHECK(p.count(1) == 1);
    CHECK(p.count(2) == 1);
}

TEST_CASE("top-p keeps the smallest set reaching the mass", "[sampler]") {
    SamplerConfig c = plain(1.0f);
    c.top_p = 0.7f;  // probabilities 0.5, 0.3, 0.2: 0.5 < 0.7 <= 0.8
    auto p = probabilities(Sampler(c), {std::log(0.5f), std::log(0.3f), std::log(0.2f)});
    REQUIRE(p.size() == 2);
    CHECK(p[0] == Approx(0.625));
    CHECK(p[1] == Approx(0.375));
}

TEST_CASE("min-p drops tokens below min_p times the best", "[sampler]") {
    SamplerConfig c = plain(1.0f);
    c.min_p = 0.5f;  // probabilities 0.5, 0.3, 0.2 -> threshold 0.25
    auto p = probabilities(Sampler(c), {std::log(0.5f), std::log(0.3f), std::log(0.2f)});
    REQUIRE(p.size() == 2);
    CHECK(p.count(2) == 0);
}

TEST_CASE("penalties follow llama.cpp", "[sampler]") {
    SamplerConfig c = plain(0.0f);
    c.repeat_penalty = 2.0f;
    c.frequency_penalty = 0.5f;
    c.presence_penalty = 0.25f;
    const Sampler s(c);
    Candidates cand;
    const std::vector<float> logits = {4.0f, -1.0f, 3.0f};
    const std::vector<int32_t> history = {0, 0, 1};
    // Greedy keeps only the argmax, so inspect the penalised logits through a non-greedy chain as well.
    SamplerConfig t = c;
    t.temperature = 1.0f;
    Sampler(t).distribution(logits.data(), 3, history, cand);
    std::map<int32_t, float> l;
    for (const Candidate &x : cand.items) l[x.id] = x.logit;
    CHECK(l[0] == Approx(4.0f / 2.0f - 2 * 0.5f - 0.25f));  // 0.75
    CHECK(l[1] == Approx(-1.0f * 2.0f - 0.5f - 0.25f));     // -2.75
    CHECK(l[2] == Approx(3.0f));
    CHECK(Sampler(c).sample(logits.data(), 3, history) == 2);
}

TEST_CASE("the same seed reproduces the same draws", "[sampler]") {
    SamplerConfig c = plain(1.0f);
    c.seed = 1234;
    std::vector<float> logits(50);
    for (int i = 0; i < 50; ++i) logits[size_t(i)] = float(std::sin(i * 1.7));
    Sampler a(c), b(c);
    std::vector<int32_t> da, db;
    for (int i = 0; i < 200; ++i) {
        da.push_back(a.sample(logits.data(), 50, {}));
        db.push_back(b.sample(logits.data(), 50, {}));
    }
    CHECK(da == db);
    c.seed = 99;
    Sampler other(c);
    std::vector<int32_t> dc;
    for (int i = 0; i < 200; ++i) dc.push_back(other.sample(logits.data(), 50, {}));
    CHECK(dc != da);
}

TEST_CASE("sampled frequencies follow the chain's distribution (chi-square)", "[sampler]") {
    SamplerConfig c = plain(0.7f);
    c.top_k = 6;
    c.seed = 7;
    const std::vector<float> logits = {0.3f, 1.2f, -0.4f, 2.0f, 0.9f, 1.5f, -3.0f, 0.0f};
    Sampler s(c);
    auto p = probabilities(s, logits);
    REQUIRE(p.size() == 6);
    const int n = 60000;
    std::map<int32_t, int> counts;
    for (int i = 0; i < n; ++i) ++counts[s.sample(logits.data(), int32_t(logits.size()), {})];
    double chi2 = 0.0;
    for (const auto &[id, prob] : p) {
        const double expected = prob * n;
        chi2 += (counts[id] - expected) * (counts[id] - expected) / expected;
    }
    for (const auto &[id, count] : counts) CHECK(p.count(id) == 1);  // never a token outside the distribution
    // 5 degrees of freedom: P(chi2 > 20.5) = 0.001.
    CHECK(chi2 < 20.5);
}

// DrawRule::LlamaCpp is llama_sample_dist: std::mt19937 seeded with the seed's low 32 bits, one
// std::discrete_distribution draw over the candidates in logit order per sampled token, and no word taken from the
// generator where one candidate is left (libstdc++ returns index 0 without calling it).
TEST_CASE("llama.cpp's draw rule draws as llama_sample_dist, none where one candidate is left", "[sampler]") {
    SamplerConfig c = plain(0.9f);
    c.top_k = 8;
    c.min_p = 0.05f;
    c.seed = (uint64_t(77) << 32) | 3000000000u;  // only the low 32 bits seed the generator, as llama.cpp's uint32_t seed
    c.draw = DrawRule::LlamaCpp;
    Sampler s(c);
    std::mt19937 rng(3000000000u);
    int single = 0;
    for (int step = 0; step < 400; ++step) {
        std::vector<float> logits(40);
        for (int i = 0; i < 40; ++i) logits[size_t(i)] = float(std::sin(i * 1.3 + step * 0.7) * 3.0);
        if (step % 5 == 0) logits[size_t(step % 40)] = 40.0f;  // min-p leaves one candidate: no draw
        Candidates d;
        s.distribution(logits.data(), 40, {}, d);
        d.sort();
        int32_t want = d.items.front().id;
        if (d.items.size() >= 2) {
            std::vector<float> w;
            for (const Candidate &cand : d.items) w.push_back(cand.p);
            std::discrete_distribution<int> dist(w.begin(), w.end());
            want = d.items[size_t(dist(rng))].id;
        } else {
            ++single;
        }
        REQUIRE(s.sample(logits.data(), 40, {}) == want);
    }
    CHECK(single == 80);
    // The generator's state round-trips through a snapshot's text, tagged with the rule.
    const std::string state = s.rng_state();
    CHECK(Sampler::rng_state_rule(state) == DrawRule::LlamaCpp);
    Sampler t(c);
    t.set_rng_state(state);
    std::vector<float> logits(40);
    for (int i = 0; i < 40; ++i) logits[size_t(i)] = float(std::cos(i * 0.9));
    for (int i = 0; i < 50; ++i) REQUIRE(t.sample(logits.data(), 40, {}) == s.sample(logits.data(), 40, {}));
    // A race-rule state is refused by a llama.cpp-rule sampler, and the other way round.
    SamplerConfig race = c;
    race.draw = DrawRule::Race;
    Sampler r(race);
    CHECK_THROWS(t.set_rng_state(r.rng_state()));
    CHECK_THROWS(r.set_rng_state(state));
}

// A coupled drafter draws with the words peek_keys gives: where every position draws, its inverse CDF is the one
// std::discrete_distribution computes, so it picks the target's tokens from the same distribution.
TEST_CASE("llama.cpp's draw rule: keyed draws with the peeked words equal the sampler's own draws", "[sampler]") {
    SamplerConfig c = plain(1.1f);
    c.draw = DrawRule::LlamaCpp;
    c.seed = 42;
    Sampler s(c);
    const std::vector<uint64_t> keys = s.peek_keys(300);
    for (size_t step = 0; step < keys.size(); ++step) {
        std::vector<float> logits(64);
        for (int i = 0; i < 64; ++i) logits[size_t(i)] = float(std::sin(i * 2.1 + double(step)) * 2.0);
        Candidates d;
        s.distribution(logits.data(), 64, {}, d);
        REQUIRE(d.items.size() >= 2);
        const int32_t keyed = s.draw_keyed(d, keys[step]);
        REQUIRE(s.sample(logits.data(), 64, {}) == keyed);
    }
}
