// Speculative rounds verified on the device (CudaRunner::verify_tree_on_device: the sampler chain and the
// verifier's walk in kernels/sampling.cu, only the accepted nodes and the bonus come back) against the host
// verifier (set_device_verify(false)) and against plain decoding: greedy output equals plain greedy with and without
// penalties; sampled output draws the very tokens the host verifier draws from the same seed; the rows the API
// reads afterwards (top logits, Session::logits) are the host path's, fetched only when asked.
#include "backends/cuda/cuda_runner.h"
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "cuda_draft_fixtures.h"
#include "grammar/json_schema.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <optional>
#include <vector>

using namespace specula::internal;
using namespace cuda_draft_fixtures;
using SPECULA_CUDA_NAMESPACE::CudaRunner;

namespace {

struct Trace {
    std::vector<int32_t> tokens;
    std::vector<std::vector<int32_t>> top_ids;
    std::vector<std::vector<float>> top_logits;
    std::vector<float> last_logits;  // Session::logits() after the run
    SpeculativeStats stats;
};

// n tokens after the prompt; top_logits > 0 asks each step's top logits (rows fetched from the device).
Trace run(const std::shared_ptr<const Model> &model, const SamplerConfig &sampler, const SpeculativeConfig *spec, bool device_verify,
          const std::vector<int32_t> &prompt, int32_t n, int32_t top_logits) {
    Session s(model, cuda_session_config(), sampler);
    dynamic_cast<CudaRunner &>(s.runner()).set_device_verify(device_verify);
    if (spec) s.set_speculative(*spec);
    s.append_tokens(prompt.data(), prompt.size());
    GenerateConfig cfg;
    cfg.max_tokens = n;
    cfg.stop_at_eog = false;
    cfg.top_logits = top_logits;
    s.configure_run(cfg);
    s.begin_run();
    Trace t;
    for (;;) {
        StepResult r;
        s.step(r);
        if (r.token >= 0) {
            t.tokens.push_back(r.token);
            t.top_ids.push_back(r.top_ids);
            t.top_logits.push_back(r.top_logits);
        }
        if (r.stop != SPECULA_STOP_NONE) break;
    }
    if (const float *l = s.logits()) t.last_logits.assign(l, l + model->hparams().n_vocab);
    t.stats = s.speculative_stats();
    return t;
}

SamplerConfig penalized(SamplerConfig c) {
    c.repeat_penalty = 1.3f;
    c.frequency_penalty = 0.1f;
    c.presence_penalty = 0.05f;
    c.penalty_last_n = 16;
    c.context_penalty = 1.5f;
    c.context_penalty_window = 32;
    return c;
}

// The repository's model, a story prompt and its trained LongSpec draft on a 21-node tree; nothing when missing.
struct Story {
    std::shared_ptr<const Model> model;
    std::vector<int32_t> prompt;
    SpeculativeConfig spec;
};

std::optional<Story> load_story() {
    const auto model_path = source_dir() / "models/stories260K.gguf", draft_path = source_dir() / "models/drafts/stories260K.longspec.gguf";
    if (!test_fixtures::have_fixture(model_path) || !test_fixtures::have_fixture(draft_path)) return std::nullopt;
    Story s;
    s.model = Model::load(model_path.string(), LoadOptions{});
    s.prompt = story_prompt(*s.model, 24);
    s.spec.longspec = LongSpecDraft::load(draft_path.string(), s.model);
    s.spec.shape = TreeShape{{4, 8, 8}};  // 21 nodes: the emulator runs every thread of every block on one core
    return s;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("cuda: rounds verified on the device give plain greedy's tokens, with and without penalties", "[cuda][verify][lossless]") {
    const std::optional<Story> story = load_story();
    if (!story) return;
    const auto &[model, prompt, story_spec] = *story;
    SpeculativeConfig spec = story_spec;
    spec.ngram = true;  // LongSpec's beam tree with n-gram candidates merged in
    spec.ngram_nodes = 8;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    for (const SamplerConfig &sampler : {greedy, penalized(greedy)}) {
        INFO("penalties " << (sampler.repeat_penalty != 1.0f));
        const Trace plain = run(model, sampler, nullptr, true, prompt, 32, 0);
        const Trace device = run(model, sampler, &spec, true, prompt, 32, 0);
        CHECK(device.tokens == plain.tokens);
        CHECK(device.stats.rounds > 0);
        CHECK(device.stats.device_verified == device.stats.rounds);  // every round walked on the device
        CHECK(device.stats.accepted > device.stats.rounds / 2);      // real acceptance, not a degenerate walk
        if (sampler.repeat_penalty == 1.0f) continue;  // (the emulator is slow: the host verifier once, with penalties)
        const Trace host = run(model, sampler, &spec, false, prompt, 32, 0);
        CHECK(host.tokens == plain.tokens);
        CHECK(host.stats.device_verified == 0);
        CHECK(device.stats.accepted == host.stats.accepted);
        CHECK(same_bits(device.last_logits, host.last_logits));
    }
}

TEST_CASE("cuda: sampling verified on the device draws the host verifier's tokens and serves the same rows", "[cuda][verify]") {
    const std::optional<Story> story = load_story();
    if (!story) return;
    const auto &[model, prompt, spec] = *story;
    SamplerConfig sampled;
    sampled.temperature = 0.8f;
    sampled.top_k = 40;
    sampled.top_p = 0.95f;
    sampled.min_p = 0.05f;
    sampled.seed = 1234;
    for (const SamplerConfig &sampler : {sampled, penalized(sampled)}) {
        INFO("penalties " << (sampler.repeat_penalty != 1.0f));
        // Top logits asked at every step: each emitted token's row comes from the device on demand.
        const Trace device = run(model, sampler, &spec, true, prompt, 24, 5);
        const Trace host = run(model, sampler, &spec, false, prompt, 24, 5);
        CHECK(device.stats.device_verified == device.stats.rounds);
        CHECK(host.stats.device_verified == 0);
        // Same distribution, same keys, the same walk. (Under the emulator the arithmetic is the host's bit for bit;
        // on a GPU expf and log may differ in their last bit, which could change a draw whose two earliest arrivals
        // of the race are within that rounding: odds of about 1e-7 per token.)
        CHECK(device.tokens == host.tokens);
        CHECK(device.stats.accepted == host.stats.accepted);
        CHECK(device.top_ids == host.top_ids);
        bool rows_equal = device.top_logits.size() == host.top_logits.size();
        for (size_t i = 0; rows_equal && i < device.top_logits.size(); ++i) rows_equal = same_bits(device.top_logits[i], host.top_logits[i]);
        CHECK(rows_equal);
        CHECK(same_bits(device.last_logits, host.last_logits));
        CHECK(device.stats.accepted > 0);
    }
    // A chain the device does not carry (top-k off: the whole vocabulary) stays on the host.
    SamplerConfig no_top_k = sampled;
    no_top_k.top_k = 0;
    const Trace fallback = run(model, no_top_k, &spec, true, prompt, 8, 0);
    CHECK(fallback.stats.rounds > 0);
    CHECK(fallback.stats.device_verified == 0);
}

// A seed means the same text on CUDA too (docs/speculative.md): plain sampling, n-grams, the LongSpec beam tree and
// its coupled sampled chain (whose children are deterministic: verified on the device as well) give the same tokens.
TEST_CASE("cuda: a seed fixes the sampled text: plain, n-grams, a beam tree and a coupled chain give the same tokens", "[cuda][verify][seed]") {
    const std::optional<Story> story = load_story();
    if (!story) return;
    const auto &[model, prompt, tree_spec] = *story;
    SamplerConfig sampled;
    sampled.temperature = 0.9f;
    sampled.seed = 77;
    const Trace plain = run(model, sampled, nullptr, true, prompt, 40, 0);
    REQUIRE(plain.tokens.size() == 40u);
    SpeculativeConfig chain = tree_spec;
    chain.shape = TreeShape::chain(4);
    SpeculativeConfig ngram;
    ngram.ngram = true;
    const std::pair<const char *, SpeculativeConfig> drafters[] = {{"beam tree", tree_spec}, {"coupled chain", chain}, {"n-grams", ngram}};
    for (const auto &[name, spec] : drafters) {
        INFO(name);
        const Trace got = run(model, sampled, &spec, true, prompt, 40, 0);
        CHECK(got.tokens == plain.tokens);
        CHECK(got.stats.rounds > 0);
        CHECK(got.stats.device_verified == got.stats.rounds);
    }
    const Trace chain_run = run(model, sampled, &chain, true, prompt, 40, 0);
    CHECK(chain_run.stats.accepted > 0);  // the trained draft's coupled chain is accepted on this story
}

TEST_CASE("cuda: the round's rows a session may still read come over before the runner overwrites them", "[cuda][verify]") {
    // A round verified on the device leaves its rows there; the session's logits (session/target_logits.h) are the
    // runner's rows holder, told before its next eval or eval_tree. Here the runner evaluates another tree behind the
    // session's back (slots past the context) while the session's current logits are a row it has not read yet.
    const std::optional<Story> story = load_story();
    if (!story) return;
    const auto &[model, prompt, spec] = *story;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    const int32_t n_vocab = model->hparams().n_vocab;
    std::vector<float> rows[2];
    for (int device_verify = 0; device_verify < 2; ++device_verify) {
        Session s(model, cuda_session_config(), greedy);
        dynamic_cast<CudaRunner &>(s.runner()).set_device_verify(device_verify == 1);
        s.set_speculative(spec);
        s.append_tokens(prompt.data(), prompt.size());
        GenerateConfig cfg;
        cfg.max_tokens = 64;
        cfg.stop_at_eog = false;
        s.configure_run(cfg);
        s.begin_run();
        bool accepted = false;
        for (int i = 0; i < 64 && !accepted; ++i) {  // up to the first drafted token: the logits are the next path row
            StepResult r;
            REQUIRE(s.step(r) == SPECULA_OK);
            accepted = r.drafted;
        }
        REQUIRE(accepted);
        CHECK(s.speculative_stats().device_verified == (device_verify == 1 ? s.speculative_stats().rounds : 0));
        // Another tree of two nodes at the end of the cache: the runner's rows and final states are rewritten.
        const int32_t n_past = s.n_ctx() - 3, toks[2] = {5, 6}, positions[2] = {n_past, n_past + 1};
        const uint8_t mask[4] = {1, 0, 1, 1};
        REQUIRE(s.runner().eval_tree(toks, 2, n_past, 0, positions, mask, nullptr));
        const float *l = s.logits();
        REQUIRE(l != nullptr);
        rows[device_verify].assign(l, l + n_vocab);
    }
    CHECK(same_bits(rows[1], rows[0]));  // the device round's row, as the host verifier's session has it
}

// Under a grammar (docs/grammars.md) the device walk does not verify (it has no grammar): the host verifier does,
// on the rows the device computed, and every drafter gives plain constrained decoding's tokens, greedy and sampled.
TEST_CASE("cuda: under a JSON schema's grammar every drafter gives plain constrained decoding's tokens, verified on the host",
          "[cuda][verify][grammar]") {
    const std::optional<Story> story = load_story();
    if (!story) return;
    const auto &[model, prompt, tree_spec] = *story;
    const std::string grammar = json_schema_to_grammar(
        R"({"type": "object", "properties": {"who": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 1, "maximum": 99},
            "friends": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}}, "required": ["who", "age", "friends"]})");
    SpeculativeConfig chain = tree_spec;
    chain.shape = TreeShape::chain(4);
    SpeculativeConfig ngram;
    ngram.ngram = true;
    for (const float temperature : {0.0f, 0.9f}) {
        SamplerConfig sampler;
        sampler.temperature = temperature;
        sampler.seed = 5;
        sampler.grammar = grammar;
        CAPTURE(temperature);
        const Trace plain = run(model, sampler, nullptr, true, prompt, 24, 0);
        REQUIRE(!plain.tokens.empty());
        const std::pair<const char *, SpeculativeConfig> drafters[] = {{"beam tree", tree_spec}, {"chain", chain}, {"n-grams", ngram}};
        for (const auto &[name, spec] : drafters) {
            INFO(name);
            const Trace got = run(model, sampler, &spec, true, prompt, 24, 0);
            CHECK(got.tokens == plain.tokens);
            CHECK(got.stats.rounds > 0);
            CHECK(got.stats.device_verified == 0);
        }
    }
}
