// The steps a sampler chain is made of. Each is one small transformation of the candidates, so speculative
// decoding can apply the very same chain to the target's and the draft's distributions.
#pragma once

#include "sampling/candidates.h"

#include <cstdint>
#include <memory>
#include <span>

namespace specula::internal {

class SamplerStep {
public:
    virtual ~SamplerStep() = default;
    virtual const char *name() const = 0;
    // history: the tokens of the context so far, oldest first.
    virtual void apply(Candidates &c, std::span<const int32_t> history) const = 0;
};

// Repetition (divide positive / multiply negative logits), frequency (minus count * f) and presence (minus p)
// penalties over the last `last_n` tokens of the history (-1 = all), as llama.cpp's penalties sampler.
std::unique_ptr<SamplerStep> make_penalties(int32_t last_n, float repeat, float frequency, float presence);
// TokenSwift's contextual penalty: every DISTINCT token among the last `window` tokens of the history (-1 = all)
// has its logit multiplied by theta when negative, divided by theta otherwise, once whatever its count.
std::unique_ptr<SamplerStep> make_contextual_penalty(int32_t window, float theta);
// The same on a dense logits array (ids outside [0, n_vocab) in the history are ignored).
void apply_contextual_penalty(float *logits, int32_t n_vocab, std::span<const int32_t> history, int32_t window, float theta);
// Keeps the k most likely tokens.
std::unique_ptr<SamplerStep> make_top_k(int32_t k);
// Keeps the smallest set of most likely tokens whose probability mass reaches p (at least one).
std::unique_ptr<SamplerStep> make_top_p(float p);
// Keeps tokens whose probability is at least min_p times that of the most likely one.
std::unique_ptr<SamplerStep> make_min_p(float min_p);
// Divides logits by the temperature.
std::unique_ptr<SamplerStep> make_temperature(float temperature);

}  // namespace specula::internal
