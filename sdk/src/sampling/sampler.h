// A sampler: the configured chain of steps plus a seeded random generator. Greedy (temperature <= 0) takes the
// argmax after the penalties (and TokenSwift's contextual penalty), ties to the lowest id, as llama.cpp.
#pragma once

#include "grammar/grammar_matcher.h"
#include "sampling/candidates.h"
#include "sampling/sampler_steps.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace specula::internal {

// How a sampled token is drawn from the chain's distribution for a seed.
enum class DrawRule : int32_t {
    // An exponential race keyed per output position (sampling/race_draw.h): one word of a 64-bit generator per
    // sampled token; coupled drafters then agree with the target as often as a coupling can (the default).
    Race = 0,
    // llama.cpp's dist sampler (llama-sampling.cpp, llama_sample_dist): std::mt19937 seeded with the seed's low 32
    // bits, std::discrete_distribution over the candidates sorted by logit (the inverse CDF at a uniform made of two
    // 32-bit words, none drawn when one candidate is left). For a seed, model, prompt and settings: llama.cpp's text
    // (the logits' rounding aside: a uniform within ~1e-6 of a cumulative boundary may fall the other way).
    LlamaCpp = 1,
};

struct SamplerConfig {
    float temperature = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int32_t penalty_last_n = 64;
    float context_penalty = 1.0f;  // TokenSwift's contextual penalty theta (1 = off)
    int32_t context_penalty_window = 1024;  // tokens of history it looks at (-1 = all)
    uint64_t seed = 0;
    DrawRule draw = DrawRule::Race;
    // A GBNF grammar the generated text must follow (grammar/grammar.h; empty: none) and its start rule. The
    // sampler draws from the constrained distribution: tokens the grammar cannot continue with are removed after
    // the penalties and before top-k (llama.cpp's grammar sampler, applied to every candidate), an end-of-generation
    // token only where the grammar is complete.
    std::string grammar;
    std::string grammar_root = "root";
};

// The longest grammar text a sampler takes (a JSON schema's grammar is a few kilobytes).
inline constexpr size_t kMaxGrammarBytes = size_t(1) << 20;

// The first setting out of the range a sampler accepts ("sampler: repeat_penalty must be > 0", ...), or "" when all
// are in range. The C ABI refuses such settings; a snapshot holding them is damaged.
std::string sampler_config_problem(const SamplerConfig &config);

class Sampler {
public:
    // Throws Error(INVALID_ARGUMENT, "grammar: ...") for a grammar that does not parse.
    explicit Sampler(const SamplerConfig &config);

    const SamplerConfig &config() const { return config_; }
    bool greedy() const { return config_.temperature <= 0.0f; }

    // The distribution the next token is drawn from: the chain applied to the logits, normalized. For greedy
    // sampling it holds the single argmax token with p = 1. With a grammar, `grammar` is its state before the token
    // (nullptr: the sampler's own, after the tokens accept() was given); Error(INVALID_ARGUMENT) when it allows no token.
    void distribution(const float *logits, int32_t n_vocab, std::span<const int32_t> history, Candidates &out,
                      const GrammarMatcher *grammar = nullptr) const;
    // Draws the next token (unless greedy, takes the next key: one word of the random generator per token).
    int32_t sample(const float *logits, int32_t n_vocab, std::span<const int32_t> history, const GrammarMatcher *grammar = nullptr);

    // The grammar (SamplerConfig::grammar): its state follows the tokens given to accept() since the sampler was
    // made (the session gives it every token it emits). The vocabulary it matches tokens in is the model's, bound by
    // the session before the first use.
    bool has_grammar() const { return grammar_ != nullptr; }
    const std::shared_ptr<const Grammar> &grammar() const { return grammar_; }
    void bind_vocab(std::shared_ptr<const GrammarVocab> vocab) { grammar_vocab_ = std::move(vocab); }
    const GrammarVocab *grammar_vocab() const { return grammar_vocab_.get(); }
    const GrammarMatcher *grammar_state() const { return grammar_state_ ? &*grammar_state_ : nullptr; }
    // Advances the sampler's grammar by an emitted token (nothing without a grammar, or for an end-of-generation
    // token); advance() the same on another state (a speculative tree's path). Error(INTERNAL) for a token the
    // grammar does not allow (the sampler never draws one).
    void accept(int32_t token);
    void advance(GrammarMatcher &state, int32_t token) const;
    // Whether the grammar state allows the token (true without a grammar): drafters drop the branches it rejects.
    bool allows(const GrammarMatcher *state, int32_t token) const;
    // A state read back from a snapshot (GrammarMatcher::restore's format).
    void set_grammar_state(GrammarMatcher state);
    // Applies, in place on a dense logits array, only the steps that must act identically on a drafter's logits
    // and the target's (today: TokenSwift's contextual penalty, when enabled; otherwise nothing). Speculative
    // drafters call it on their raw logits, with the history the drafted token would have.
    void process_logits(float *logits, int32_t n_vocab, std::span<const int32_t> history) const;
    // Whether process_logits() changes anything (drafters may skip it otherwise).
    bool has_logit_processing() const { return contextual_penalty_; }
    // How many of the newest history tokens the chain looks at: 0 = none, -1 = all of them.
    int32_t history_window() const;
    // The draw of a distribution() with a key: the exponential race of sampling/race_draw.h (the candidate with the
    // smallest -log(U_id) / p, U_id a uniform made from key and id). How sample() picks with its next key under
    // DrawRule::Race; a drafter that holds the next positions' keys (peek_keys) draws its own tokens with them (the
    // coupled rule, verifier.h).
    static int32_t draw(const Candidates &c, uint64_t key);
    // The coupled draw under the configured rule: draw(c, key) for Race; for LlamaCpp, the inverse CDF of c in
    // logit order at the uniform the key's two words make (llama.cpp's, when every position before drew).
    int32_t draw_keyed(const Candidates &c, uint64_t key) const;
    // draw(c, next_key()): a drafter sampling with its own draws (the Leviathan rule; Race only).
    int32_t draw(const Candidates &c) { return draw(c, next_key()); }
    // The key of the next sampled token (advances the generator by one word), reproducible for a given seed.
    uint64_t next_key() { return rng_(); }
    // A uniform draw in [0, 1) from the same generator (one word): the Leviathan rule's accept test and residual.
    double uniform();
    // The next n keys next_key() would give, without advancing the generator (the coupled drafters and a device
    // verifier get them up front), and advancing it past n words afterwards: peek_keys(n) then skip_draws(m <= n)
    // leaves the generator where m next_key() calls would have. Under LlamaCpp a key is the two 32-bit words of a
    // position that draws (a position left with one candidate draws none, so the keys past it are a guess: a
    // drafter's tokens may then differ from the target's, never the output), and skip_draws is not used (the
    // device walk, its only caller, verifies Race draws only: tree_sampling_plan.cpp).
    std::vector<uint64_t> peek_keys(size_t n) const;
    void skip_draws(size_t n) { rng_.discard(n); }
    // The generator's position as text (the standard's mt19937_64 state: 312 words and an index; under LlamaCpp
    // "mt19937 " and the 32-bit generator's 624 words and index), for snapshots; set_rng_state() puts a generator
    // exactly there. Throws Error(FORMAT) for text that is not such a state or is the other rule's.
    std::string rng_state() const;
    void set_rng_state(const std::string &state);
    // The rule a saved rng_state() was written under (Race for text that is not LlamaCpp's).
    static DrawRule rng_state_rule(const std::string &state);

private:
    // Removes what the grammar rejects from the candidates (the top `need` allowed ones suffice when need > 0).
    void constrain(Candidates &c, const GrammarMatcher &state) const;
    const GrammarVocab &vocab() const;

    SamplerConfig config_;
    bool contextual_penalty_ = false;
    std::vector<std::unique_ptr<SamplerStep>> steps_;
    size_t n_logit_steps_ = 0;  // steps_[0, n) act on each token's logit alone (penalties); the grammar follows them
    std::shared_ptr<const Grammar> grammar_;
    std::optional<GrammarMatcher> grammar_state_;
    std::shared_ptr<const GrammarVocab> grammar_vocab_;
    // LlamaCpp: the inverse CDF of c (sorted by logit) at uniform u, as std::discrete_distribution.
    static int32_t draw_inverse_cdf(Candidates &c, double u);

    std::mt19937_64 rng_;
    std::mt19937 rng32_;  // DrawRule::LlamaCpp's generator
    Candidates scratch_;
    std::vector<float> weights_;
};

}  // namespace specula::internal
