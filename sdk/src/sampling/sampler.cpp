#include "sampler.h"

#include "core/error.h"
#include "sampling/race_draw.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace specula::internal {

std::string sampler_config_problem(const SamplerConfig &c) {
    if (std::isnan(c.temperature)) return "sampler: temperature is NaN (a number is needed; <= 0 means greedy)";
    if (!(c.top_p >= 0.0f && c.min_p >= 0.0f && c.min_p <= 1.0f)) return "sampler: top_p must be >= 0 and min_p in [0, 1]";
    if (!(c.repeat_penalty > 0.0f)) return "sampler: repeat_penalty must be > 0";
    if (c.penalty_last_n < -1) return "sampler: penalty_last_n must be >= -1";
    if (!(std::isfinite(c.context_penalty) && c.context_penalty > 0.0f)) return "sampler: context_penalty must be a finite number > 0";
    if (c.context_penalty_window < -1) return "sampler: context_penalty_window must be >= -1";
    if (c.draw != DrawRule::Race && c.draw != DrawRule::LlamaCpp) return "sampler: draw must be SPECULA_DRAW_RACE or SPECULA_DRAW_LLAMA_CPP";
    if (c.grammar.size() > kMaxGrammarBytes) return "sampler: the grammar is longer than " + std::to_string(kMaxGrammarBytes) + " bytes";
    if (!c.grammar.empty() && c.grammar_root.empty()) return "sampler: the grammar's start rule has no name";
    return "";
}

Sampler::Sampler(const SamplerConfig &config) : config_(config), rng_(config.seed), rng32_(uint32_t(config.seed)) {
    const bool penalize = config.repeat_penalty != 1.0f || config.frequency_penalty != 0.0f || config.presence_penalty != 0.0f;
    if (penalize && config.penalty_last_n != 0)
        steps_.push_back(make_penalties(config.penalty_last_n, config.repeat_penalty, config.frequency_penalty, config.presence_penalty));
    // TokenSwift's contextual penalty. TokenSwift applies it after the temperature; but the temperature is a
    // positive scale (x / T keeps the sign of x, and (x * theta) / T = (x / T) * theta, (x / theta) / T =
    // (x / T) / theta), so applying it here, before top-k / top-p / min-p and the temperature, gives the same
    // distribution (up to float rounding), and it also acts on the greedy argmax. Drafters apply the very same
    // step to their own logits through process_logits().
    contextual_penalty_ = config.context_penalty != 1.0f && config.context_penalty_window != 0;
    if (contextual_penalty_) steps_.push_back(make_contextual_penalty(config.context_penalty_window, config.context_penalty));
    n_logit_steps_ = steps_.size();
    if (!config.grammar.empty()) {
        require(config.grammar.size() <= kMaxGrammarBytes, SPECULA_ERR_INVALID_ARGUMENT,
                "grammar: longer than " + std::to_string(kMaxGrammarBytes) + " bytes");
        grammar_ = Grammar::parse(config.grammar, config.grammar_root);
        grammar_state_.emplace(grammar_);
    }
    if (greedy()) return;
    // llama.cpp's order: top-k, top-p, min-p, then temperature.
    if (config.top_k > 0) steps_.push_back(make_top_k(config.top_k));
    if (config.top_p < 1.0f) steps_.push_back(make_top_p(config.top_p));
    if (config.min_p > 0.0f) steps_.push_back(make_min_p(config.min_p));
    steps_.push_back(make_temperature(config.temperature));
}

void Sampler::distribution(const float *logits, int32_t n_vocab, std::span<const int32_t> history, Candidates &out,
                           const GrammarMatcher *grammar) const {
    out.reset(logits, n_vocab);
    for (size_t i = 0; i < steps_.size(); ++i) {
        if (i == n_logit_steps_ && grammar_) constrain(out, grammar ? *grammar : *grammar_state_);
        steps_[i]->apply(out, history);
    }
    if (steps_.size() == n_logit_steps_ && grammar_) constrain(out, grammar ? *grammar : *grammar_state_);
    if (greedy()) {
        out.keep_top(1);
        out.items[0].p = 1.0f;
        return;
    }
    out.normalize();
}

int32_t Sampler::sample(const float *logits, int32_t n_vocab, std::span<const int32_t> history, const GrammarMatcher *grammar) {
    distribution(logits, n_vocab, history, scratch_, grammar);
    if (greedy()) return scratch_.items[0].id;
    if (config_.draw == DrawRule::LlamaCpp) {
        // llama_sample_dist itself: the standard library's distribution over the candidates in logit order (what
        // llama_sampler_softmax_impl leaves), so the draws are llama.cpp's built with the same library. It takes
        // no word from the generator for a single candidate.
        scratch_.sort();
        weights_.resize(scratch_.items.size());
        for (size_t i = 0; i < weights_.size(); ++i) weights_[i] = scratch_.items[i].p;
        std::discrete_distribution<int32_t> dist(weights_.begin(), weights_.end());
        return scratch_.items[size_t(dist(rng32_))].id;
    }
    return draw(scratch_, next_key());
}

int32_t Sampler::draw_inverse_cdf(Candidates &c, double u) {
    if (c.items.size() < 2) return c.items.front().id;
    // What sample() draws with std::discrete_distribution (libstdc++): the weights normalized in double, their
    // partial sums with the last set to 1, the first index whose sum is not below u (std::lower_bound), where u is
    // std::generate_canonical<double, 53> of two 32-bit words w0, w1: (w0 + w1 * 2^32) / 2^64.
    c.sort();
    double sum = 0.0;
    for (const Candidate &cand : c.items) sum += double(cand.p);
    if (!(sum > 0.0)) return c.items.front().id;
    double cumulative = 0.0;
    for (size_t i = 0; i + 1 < c.items.size(); ++i) {
        cumulative += double(c.items[i].p) / sum;
        if (!(cumulative < u)) return c.items[i].id;
    }
    return c.items.back().id;
}

int32_t Sampler::draw_keyed(const Candidates &c, uint64_t key) const {
    if (config_.draw != DrawRule::LlamaCpp) return draw(c, key);
    const double w0 = double(uint32_t(key)), w1 = double(uint32_t(key >> 32));
    Candidates sorted = c;
    return draw_inverse_cdf(sorted, std::min((w0 + w1 * 0x1.0p32) * 0x1.0p-64, std::nextafter(1.0, 0.0)));
}

int32_t Sampler::draw(const Candidates &c, uint64_t key) {
    // Items in the chain's order, the first of equal arrivals wins (with p > 0 the arrivals tie with probability
    // ~2^-53); a distribution with no positive p (not made by distribution()) gives its first item.
    int32_t best = c.items.front().id;
    double best_time = INFINITY;
    for (const Candidate &cand : c.items) {
        if (best_time < INFINITY && !race::may_arrive_before(key, cand.id, cand.p, best_time)) continue;
        const double t = race::arrival(key, cand.id, cand.p);
        if (t < best_time) {
            best_time = t;
            best = cand.id;
        }
    }
    return best;
}

void Sampler::process_logits(float *logits, int32_t n_vocab, std::span<const int32_t> history) const {
    if (contextual_penalty_) apply_contextual_penalty(logits, n_vocab, history, config_.context_penalty_window, config_.context_penalty);
}

const GrammarVocab &Sampler::vocab() const {
    require(grammar_vocab_ != nullptr, SPECULA_ERR_INTERNAL, "sampler: a grammar without a vocabulary");
    return *grammar_vocab_;
}

void Sampler::constrain(Candidates &c, const GrammarMatcher &state) const {
    const GrammarVocab &v = vocab();
    // Greedy and top-k keep only the most likely allowed tokens: look for them among the most likely tokens first,
    // one by one, before matching the whole vocabulary (the same tokens either way: the allowed ones in the order
    // of Candidates::sort, first `need` of them).
    const size_t need = greedy() ? 1 : config_.top_k > 0 ? size_t(config_.top_k) : 0;
    if (need > 0 && need <= 16) {
        const size_t probe = std::min(c.items.size(), size_t(64));
        const auto before = [](const Candidate &a, const Candidate &b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
        std::partial_sort(c.items.begin(), c.items.begin() + ptrdiff_t(probe), c.items.end(), before);
        c.sorted = false;
        size_t picked[16];
        size_t found = 0;
        for (size_t i = 0; i < probe && found < need; ++i)
            if (state.allows(v, c.items[i].id)) picked[found++] = i;
        if (found == need || probe == c.items.size()) {
            require(found > 0, SPECULA_ERR_INVALID_ARGUMENT, "grammar: no token of the vocabulary can continue the text here");
            for (size_t j = 0; j < found; ++j) c.items[j] = c.items[picked[j]];  // picked[j] >= j: read before written
            c.items.resize(found);
            c.sorted = true;
            return;
        }
        // Not enough among them: the whole vocabulary.
    }
    std::vector<uint8_t> allowed;
    state.allowed_tokens(v, allowed);
    size_t kept = 0;
    for (size_t i = 0; i < c.items.size(); ++i)
        if (size_t(c.items[i].id) < allowed.size() && allowed[size_t(c.items[i].id)]) c.items[kept++] = c.items[i];  // ids past the vocabulary: padding
    require(kept > 0, SPECULA_ERR_INVALID_ARGUMENT, "grammar: no token of the vocabulary can continue the text here");
    c.items.resize(kept);
}

void Sampler::accept(int32_t token) {
    if (grammar_state_) advance(*grammar_state_, token);
}

void Sampler::advance(GrammarMatcher &state, int32_t token) const {
    require(state.accept_token(vocab(), token), SPECULA_ERR_INTERNAL, "sampler: the grammar does not allow an emitted token");
}

bool Sampler::allows(const GrammarMatcher *state, int32_t token) const {
    if (!grammar_) return true;
    return (state ? *state : *grammar_state_).allows(vocab(), token);
}

void Sampler::set_grammar_state(GrammarMatcher state) {
    require(grammar_ != nullptr, SPECULA_ERR_INTERNAL, "sampler: a grammar state without a grammar");
    grammar_state_.emplace(std::move(state));
}

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

std::vector<uint64_t> Sampler::peek_keys(size_t n) const {
    std::vector<uint64_t> keys(n);
    if (config_.draw == DrawRule::LlamaCpp) {
        std::mt19937 rng = rng32_;
        for (uint64_t &k : keys) {
            const uint64_t w0 = rng(), w1 = rng();
            k = w0 | (w1 << 32);
        }
        return keys;
    }
    std::mt19937_64 rng = rng_;
    for (uint64_t &k : keys) k = rng();
    return keys;
}

namespace {

constexpr const char *kMt19937Tag = "mt19937 ";

// A generator's state read back from its text (the standard's operator>>), all of the text or Error(FORMAT).
template <typename Engine>
Engine parse_engine_state(std::istringstream &in) {
    Engine rng;
    in >> rng;
    require(!in.fail() && (in >> std::ws).eof(), SPECULA_ERR_FORMAT, "snapshot: the sampler's random generator state does not parse");
    return rng;
}

}  // namespace

DrawRule Sampler::rng_state_rule(const std::string &state) {
    return state.rfind(kMt19937Tag, 0) == 0 ? DrawRule::LlamaCpp : DrawRule::Race;
}

std::string Sampler::rng_state() const {
    std::ostringstream out;
    // A stream swallows a bad_alloc of its buffer (it only sets badbit): the snapshot then held a truncated state and
    // the save returned OK (found by tests/alloc). With badbit in exceptions() the stream rethrows it.
    out.exceptions(std::ios_base::badbit);
    out.imbue(std::locale::classic());
    if (config_.draw == DrawRule::LlamaCpp)
        out << kMt19937Tag << rng32_;
    else
        out << rng_;
    return out.str();
}

void Sampler::set_rng_state(const std::string &state) {
    const bool tagged = rng_state_rule(state) == DrawRule::LlamaCpp;
    require(tagged == (config_.draw == DrawRule::LlamaCpp), SPECULA_ERR_FORMAT,
            "snapshot: the sampler's random generator is not the one its draw rule uses");
    const std::string numbers = tagged ? state.substr(std::char_traits<char>::length(kMt19937Tag)) : state;
    require(state.size() <= 16384 && numbers.find_first_not_of("0123456789 ") == std::string::npos, SPECULA_ERR_FORMAT,
            "snapshot: the sampler's random generator state is not a list of numbers");
    std::istringstream in(numbers);
    in.exceptions(std::ios_base::badbit);  // a bad_alloc inside is OUT_OF_MEMORY, not "does not parse" (see rng_state)
    in.imbue(std::locale::classic());
    if (tagged)
        rng32_ = parse_engine_state<std::mt19937>(in);
    else
        rng_ = parse_engine_state<std::mt19937_64>(in);
}

int32_t Sampler::history_window() const {
    const bool penalize = config_.repeat_penalty != 1.0f || config_.frequency_penalty != 0.0f || config_.presence_penalty != 0.0f;
    int32_t window = 0;
    for (const int32_t w : {penalize ? config_.penalty_last_n : 0, contextual_penalty_ ? config_.context_penalty_window : 0}) {
        if (w < 0) return -1;
        window = std::max(window, w);
    }
    return window;
}

}  // namespace specula::internal
