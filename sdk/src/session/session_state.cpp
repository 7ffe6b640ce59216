#include "session/session_state.h"

#include <cmath>
#include <cstring>

namespace specula::internal {
namespace {

constexpr size_t kMaxHeldText = size_t(1) << 20;  // bound for the stream's held-back text
constexpr int32_t kMaxReady = 64;                 // a round's tokens (depth <= 32, plus the bonus)

void write_sampler_config(ByteWriter &w, const SamplerConfig &c) {
    w.put<float>(c.temperature);
    w.put<int32_t>(c.top_k);
    w.put<float>(c.top_p);
    w.put<float>(c.min_p);
    w.put<float>(c.repeat_penalty);
    w.put<float>(c.presence_penalty);
    w.put<float>(c.frequency_penalty);
    w.put<int32_t>(c.penalty_last_n);
    w.put<float>(c.context_penalty);
    w.put<int32_t>(c.context_penalty_window);
    w.put<uint64_t>(c.seed);
}

SamplerConfig read_sampler_config(ByteReader &r) {
    SamplerConfig c;
    c.temperature = r.get<float>();
    c.top_k = r.get<int32_t>();
    c.top_p = r.get<float>();
    c.min_p = r.get<float>();
    c.repeat_penalty = r.get<float>();
    c.presence_penalty = r.get<float>();
    c.frequency_penalty = r.get<float>();
    c.penalty_last_n = r.get<int32_t>();
    c.context_penalty = r.get<float>();
    c.context_penalty_window = r.get<int32_t>();
    c.seed = r.get<uint64_t>();
    // A sampler a session could never have had is damage: the C ABI's ranges, and finite numbers.
    const std::string problem = sampler_config_problem(c);
    r.check(problem.empty(), "the sampler settings are out of range (" + problem + ")");
    r.check(std::isfinite(c.temperature) && std::isfinite(c.top_p) && std::isfinite(c.min_p) && std::isfinite(c.repeat_penalty) &&
                std::isfinite(c.presence_penalty) && std::isfinite(c.frequency_penalty),
            "the sampler settings are not finite numbers");
    return c;
}

void write_ngram_config(ByteWriter &w, const NgramConfig &c) {
    for (int32_t v : {c.lookup_min, c.lookup_max, c.max_chain, c.table_n, c.table_topk, c.lag}) w.put<int32_t>(v);
}

NgramConfig read_ngram_config(ByteReader &r) {
    NgramConfig c;
    for (int32_t *v : {&c.lookup_min, &c.lookup_max, &c.max_chain, &c.table_n, &c.table_topk, &c.lag}) *v = r.get<int32_t>();
    return c;
}

}  // namespace

uint64_t session_part_bound(int32_t n_vocab) { return 4096 + 4 * uint64_t(n_vocab) + 2 * kMaxHeldText; }

void write_session_part(ByteWriter &w, const SessionPart &p, bool full) {
    w.put<int32_t>(p.n_evaluated);
    w.put<uint8_t>(p.logits_valid ? 1 : 0);
    if (p.logits_valid) w.put_raw(p.logits.data(), p.logits.size() * sizeof(float));
    w.put<uint8_t>(p.last_token_generated ? 1 : 0);
    if (!full) return;
    w.put<int32_t>(p.n_run_generated);
    w.put<uint8_t>(p.run_first_token ? 1 : 0);
    w.put_string(p.decoder_pending);
    w.put_string(p.stops_pending);
    w.put<int32_t>(p.n_prompt_tokens);
    w.put<int32_t>(p.n_generated);
    w.put<int32_t>(p.n_restored_tokens);
    w.put<double>(p.prompt_ms);
    w.put<double>(p.decode_ms);
    w.put<double>(p.ttft_ms);
}

SessionPart read_session_part(ByteReader &r, bool full, int32_t n_vocab, int32_t n_tokens, int32_t n_kv) {
    SessionPart p;
    p.n_evaluated = r.get<int32_t>();
    r.check(p.n_evaluated >= 0 && p.n_evaluated <= n_tokens && p.n_evaluated <= n_kv, "the evaluated count " + std::to_string(p.n_evaluated) + " is out of range");
    p.logits_valid = r.get_bool();
    if (p.logits_valid) {
        p.logits.resize(size_t(n_vocab));
        std::memcpy(p.logits.data(), r.take(p.logits.size() * sizeof(float)), p.logits.size() * sizeof(float));
    }
    // Every token evaluated means the next one is sampled from these logits: they must be there.
    r.check(p.logits_valid || p.n_evaluated < n_tokens || n_tokens == 0, "the whole context is evaluated but its logits are missing");
    p.last_token_generated = r.get_bool();
    if (full) {
        p.n_run_generated = r.get<int32_t>();
        p.run_first_token = r.get_bool();
        p.decoder_pending = r.get_string(3);
        p.stops_pending = r.get_string(kMaxHeldText);
        p.n_prompt_tokens = r.get<int32_t>();
        p.n_generated = r.get<int32_t>();
        p.n_restored_tokens = r.get<int32_t>();
        p.prompt_ms = r.get<double>();
        p.decode_ms = r.get<double>();
        p.ttft_ms = r.get<double>();
        r.check(p.n_run_generated >= 0 && p.n_prompt_tokens >= 0 && p.n_generated >= 0 && p.n_restored_tokens >= 0, "negative counters");
    }
    r.expect_end();
    return p;
}

uint64_t sampler_part_bound() { return (uint64_t(1) << 16) + 2 * uint64_t(kMaxGrammarBytes) + 4 * uint64_t(GrammarMatcher::kMaxSavedWords); }

void write_sampler_part(ByteWriter &w, const Sampler &sampler) {
    write_sampler_config(w, sampler.config());
    w.put_string(sampler.rng_state());
    // A grammar, after the rest (a snapshot without one reads as before): its text, start rule and parse state.
    if (sampler.has_grammar()) {
        w.put_string(sampler.config().grammar);
        w.put_string(sampler.config().grammar_root);
        const std::vector<uint32_t> state = sampler.grammar_state()->save();
        w.put_array(std::span<const uint32_t>(state));
    }
}

std::unique_ptr<Sampler> read_sampler_part(ByteReader &r) {
    SamplerConfig config = read_sampler_config(r);
    const std::string rng = r.get_string(16384);
    std::vector<uint32_t> grammar_state;
    if (r.remaining() > 0) {
        config.grammar = r.get_string(kMaxGrammarBytes);
        config.grammar_root = r.get_string(4096);
        r.check(!config.grammar.empty(), "an empty grammar");
        grammar_state = r.get_array<uint32_t>(GrammarMatcher::kMaxSavedWords);
    }
    r.expect_end();
    // The draw rule is told by the generator's state (Sampler::rng_state: llama.cpp's 32-bit one is tagged), so
    // snapshots written before the rule existed read as the race they used.
    config.draw = Sampler::rng_state_rule(rng);
    std::unique_ptr<Sampler> sampler;
    try {
        sampler = std::make_unique<Sampler>(config);
    } catch (const Error &e) {
        // The grammar parsed when it was saved: now it does not, so the bytes are damaged.
        if (e.status() == SPECULA_ERR_INVALID_ARGUMENT) r.check(false, std::string("its grammar does not parse (") + e.what() + ")");
        throw;
    }
    sampler->set_rng_state(rng);
    if (sampler->has_grammar()) sampler->set_grammar_state(GrammarMatcher::restore(sampler->grammar(), grammar_state));
    return sampler;
}

uint64_t speculative_part_bound(int32_t n_vocab) { return (uint64_t(1) << 30) + uint64_t(kMaxReady) * 4 * uint64_t(n_vocab); }

void write_speculative_part(ByteWriter &w, const SpeculativePart &p, int32_t n_vocab) {
    w.put_string(p.drafter);
    w.put<uint8_t>(p.has_ngram ? 1 : 0);
    if (p.has_ngram) write_ngram_config(w, p.ngram);
    for (int32_t v : {p.stats.rounds, p.stats.drafted, p.stats.accepted, p.stats.produced}) w.put<int32_t>(v);
    w.put<double>(p.stats.draft_ms);
    w.put<double>(p.stats.verify_ms);
    w.put_array<int32_t>(p.stats.accepted_at_depth);
    w.put<uint64_t>(p.ready.size());
    for (size_t i = 0; i < p.ready.size(); ++i) {
        w.put<int32_t>(p.ready[i].token);
        w.put<uint8_t>(p.ready[i].accepted ? 1 : 0);
        w.put_raw(p.ready_rows.data() + i * size_t(n_vocab), size_t(n_vocab) * sizeof(float));
    }
    w.put_array<uint8_t>(p.drafter_state);
    w.put<int32_t>(p.own_slots);
}

SpeculativePart read_speculative_part(ByteReader &r, int32_t n_vocab) {
    SpeculativePart p;
    p.drafter = r.get_string(256);
    p.has_ngram = r.get_bool();
    if (p.has_ngram) p.ngram = read_ngram_config(r);
    for (int32_t *v : {&p.stats.rounds, &p.stats.drafted, &p.stats.accepted, &p.stats.produced}) *v = r.get<int32_t>();
    p.stats.draft_ms = r.get<double>();
    p.stats.verify_ms = r.get<double>();
    p.stats.accepted_at_depth = r.get_array<int32_t>(4096);
    const uint64_t n_ready = r.get<uint64_t>();
    r.check(n_ready <= uint64_t(kMaxReady), "a round with " + std::to_string(n_ready) + " pending tokens");
    p.ready_rows.resize(size_t(n_ready) * size_t(n_vocab));
    for (size_t i = 0; i < size_t(n_ready); ++i) {
        const int32_t token = r.get<int32_t>();
        const bool accepted = r.get_bool();
        r.check(token >= 0 && token < n_vocab, "a pending token id is outside the vocabulary");
        // A round's tokens: accepted ones, then the target's own (bonus) token last.
        r.check(accepted == (i + 1 < size_t(n_ready)), "the pending tokens are not a round's accepted path and bonus");
        p.ready.push_back({token, accepted});
        std::memcpy(p.ready_rows.data() + i * size_t(n_vocab), r.take(size_t(n_vocab) * sizeof(float)), size_t(n_vocab) * sizeof(float));
    }
    p.drafter_state = r.get_array<uint8_t>(uint64_t(1) << 30);
    p.own_slots = r.get<int32_t>();
    r.expect_end();
    return p;
}

}  // namespace specula::internal
