// The keyed exponential race every sampled token is drawn with (sampling/race_draw.h): a candidate wins with exactly
// its probability, the same key always gives the same token, and Sampler::draw's filter (which skips the log for
// candidates that cannot win) never changes the winner.
#include "sampling/race_draw.h"
#include "sampling/sampler.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace specula::internal;

namespace {

// The race without the filter: the smallest arrival, the first of equal ones.
int32_t brute_force(const Candidates &c, uint64_t key) {
    int32_t best = c.items.front().id;
    double best_time = INFINITY;
    for (const Candidate &cand : c.items) {
        const double t = race::arrival(key, cand.id, cand.p);
        if (t < best_time) {
            best_time = t;
            best = cand.id;
        }
    }
    return best;
}

}  // namespace

TEST_CASE("the keyed race draws each candidate with its probability", "[sampling][race]") {
    Candidates c;
    const float p[] = {0.5f, 0.3f, 0.15f, 0.05f};
    for (int32_t i = 0; i < 4; ++i) c.items.push_back({10 + i, 0.0f, p[i]});
    std::mt19937_64 keys(7);
    constexpr int kDraws = 200000;
    std::vector<int> count(4, 0);
    for (int i = 0; i < kDraws; ++i) ++count[size_t(Sampler::draw(c, keys()) - 10)];
    for (size_t i = 0; i < 4; ++i) {
        const double expected = kDraws * p[i], sigma = std::sqrt(expected * (1.0 - p[i]));
        INFO("candidate " << i << ": " << count[i] << " draws, expected " << expected);
        CHECK(std::fabs(count[i] - expected) < 5.0 * sigma);
    }
    const uint64_t key = 0x123456789abcdefull;
    CHECK(Sampler::draw(c, key) == Sampler::draw(c, key));  // a key is a draw
}

TEST_CASE("skipping the candidates that cannot win never changes the winner", "[sampling][race]") {
    std::mt19937 rng(3);
    std::normal_distribution<float> logit(0.0f, 3.0f);
    for (const int32_t n_vocab : {5, 512, 32000}) {
        CAPTURE(n_vocab);
        std::vector<float> logits(static_cast<size_t>(n_vocab));
        for (float &x : logits) x = logit(rng);
        for (const float t : {0.3f, 1.0f, 2.0f}) {
            SamplerConfig sc;
            sc.temperature = t;
            sc.top_k = 0;
            sc.top_p = 1.0f;
            sc.min_p = 0.0f;
            Sampler s(sc);
            Candidates c;
            s.distribution(logits.data(), n_vocab, {}, c);
            std::mt19937_64 keys(uint64_t(n_vocab) * 31 + uint64_t(t * 10));
            for (int i = 0; i < 500; ++i) {
                const uint64_t key = keys();
                REQUIRE(Sampler::draw(c, key) == brute_force(c, key));
            }
        }
    }
}
