// A seed means the same text (verifier.h, sampling/race_draw.h): at any temperature and sampler chain, the tokens
// sampled for a seed are the same with every drafter (n-grams, the committed trained LongSpec draft, an independent
// draft model, the target as its own draft, merged), every tree shape (sampled chains of 1 to 8, beam trees), the
// automatic tree (whose choices follow measured timings), 1 or 2 threads, and equal to plain sampling's. Each
// position's draw is keyed by the seed and the position alone; drafters only guess it.
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "common/test_inputs.h"
#include "common/test_scale.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace specula::internal;

namespace {

std::shared_ptr<const Model> load(const std::string &rel) {
    const auto path = test_fixtures::fixtures_dir() / rel;
    if (!test_fixtures::have_fixture(path)) return nullptr;
    return Model::load(path.string(), LoadOptions{});
}

struct Sampled {
    std::vector<int32_t> tokens;
    SpeculativeStats stats;
};

Sampled sample(const std::shared_ptr<const Model> &model, const SamplerConfig &sampler, const SpeculativeConfig *spec, int32_t threads,
               const std::vector<int32_t> &prompt, int32_t n) {
    SessionConfig sc;
    sc.n_ctx = 512;
    sc.n_threads = threads;
    Session s(model, sc, sampler);
    if (spec) s.set_speculative(*spec);
    Sampled r;
    r.tokens = test_sessions::generate(s, prompt, n);
    r.stats = s.speculative_stats();
    return r;
}

struct NamedDrafter {
    std::string name;
    SpeculativeConfig spec;
};

// Every (sampler chain, drafter, tree) runs with 1 thread or 2: alternately, or with both when `every_thread_count`
// (the [slow] case; each drafter's trees still meet both counts in the fast one).
void check_seed_fixes_the_text(bool every_thread_count) {
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const auto trained = LongSpecDraft::load(std::string(SPECULA_SOURCE_DIR) + "/models/drafts/stories260K.longspec.gguf", model);
    const auto small = load("models/stories260K-L3.gguf");  // from ../shared: without it, the other drafters still run
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time, there was a little dog. The little dog", true, false);

    std::vector<NamedDrafter> drafters;
    SpeculativeConfig c;
    c.ngram = true;
    drafters.push_back({"n-grams", c});
    c = {};
    c.longspec = trained;
    drafters.push_back({"LongSpec", c});
    c.ngram = true;
    drafters.push_back({"LongSpec + n-grams", c});
    c = {};
    c.draft_model = model;  // the target as its own draft: its coupled chains are always accepted
    drafters.push_back({"target as draft", c});
    if (small) {
        c = {};
        c.draft_model = small;
        drafters.push_back({"stories260K-L3", c});
    }
    const std::vector<TreeShape> shapes = {TreeShape::chain(1), TreeShape::chain(4), TreeShape::chain(8), TreeShape{{4, 4}}, TreeShape{}};

    struct Chain {
        const char *name;
        SamplerConfig config;
    };
    std::vector<Chain> chains;
    SamplerConfig sc;
    sc.temperature = 0.7f;
    sc.seed = 7;
    chains.push_back({"T 0.7, top-k 40, top-p 0.95, min-p 0.05", sc});
    sc.temperature = 1.0f;
    sc.top_k = 0;
    sc.top_p = 1.0f;
    sc.min_p = 0.0f;
    sc.seed = 1234;
    chains.push_back({"T 1, the whole distribution", sc});
    sc.temperature = 1.2f;
    sc.repeat_penalty = 1.1f;
    sc.context_penalty = 1.2f;
    sc.seed = 99;
    chains.push_back({"T 1.2, repetition and contextual penalties", sc});
    sc = {};
    sc.draw = DrawRule::LlamaCpp;  // llama.cpp's generator and distribution (llama-server's defaults otherwise)
    sc.seed = 42;
    chains.push_back({"llama.cpp's draws, T 0.8, top-k 40, top-p 0.95, min-p 0.05", sc});

    // 132 runs of n tokens (252 with every thread count): a third of the length under the sanitizers (the same code
    // paths, 5x slower there).
    constexpr int32_t n = test_scale::count(96, 32);
    for (const Chain &chain : chains) {
        CAPTURE(chain.name);
        const Sampled plain = sample(model, chain.config, nullptr, 2, prompt, n);
        REQUIRE(int32_t(plain.tokens.size()) == n);
        CHECK(sample(model, chain.config, nullptr, 1, prompt, n).tokens == plain.tokens);
        SamplerConfig other = chain.config;
        ++other.seed;
        CHECK(sample(model, other, nullptr, 2, prompt, n).tokens != plain.tokens);  // the seed matters

        int32_t accepted = 0;
        for (const NamedDrafter &d : drafters) {
            CAPTURE(d.name);
            std::vector<SpeculativeConfig> configs;
            for (const TreeShape &shape : shapes) {
                SpeculativeConfig spec = d.spec;
                spec.shape = shape;
                configs.push_back(spec);
            }
            SpeculativeConfig automatic = d.spec;
            automatic.auto_tree = true;
            automatic.shape_is_bound = false;
            configs.push_back(automatic);
            for (size_t i = 0; i < configs.size(); ++i) {
                const SpeculativeConfig &spec = configs[i];
                const std::vector<int32_t> thread_counts =
                    every_thread_count ? std::vector<int32_t>{1, 2} : std::vector<int32_t>{int32_t(1 + i % 2)};
                for (const int32_t threads : thread_counts) {
                    const std::string tree = spec.auto_tree ? std::string("auto") : spec.shape.to_string();
                    CAPTURE(tree, threads);
                    const Sampled got = sample(model, chain.config, &spec, threads, prompt, n);
                    CHECK(got.tokens == plain.tokens);
                    accepted += got.stats.accepted;
                }
            }
        }
        CHECK(accepted > 0);  // drafts were accepted: the runs really speculated
    }
}

}  // namespace

TEST_CASE("a seed fixes the sampled text: every drafter, tree, thread count and the automatic tree give plain sampling's tokens",
          "[speculative][sampling][seed]") {
    check_seed_fixes_the_text(false);
}

TEST_CASE("a seed fixes the sampled text: every drafter and tree with 1 thread and with 2", "[speculative][sampling][seed][slow]") {
    check_seed_fixes_the_text(true);
}

// The target as its own draft proposes, with the coupled rule, exactly the target's draws: every drafted token is
// accepted at any temperature (under Leviathan's rule too, but there each acceptance is a coin flip that, for
// p = q, always lands heads; here it is the same race run twice).
TEST_CASE("coupled chains drafted by the target itself are always accepted at any temperature", "[speculative][sampling][seed]") {
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const std::vector<int32_t> prompt = test_inputs::model_text_prompt(*model, 24);
    for (const float t : {0.7f, 1.0f, 1.5f}) {
        CAPTURE(t);
        SamplerConfig sc;
        sc.temperature = t;
        sc.top_k = 0;
        sc.top_p = 1.0f;
        sc.min_p = 0.0f;
        sc.seed = 11;
        SpeculativeConfig spec;
        spec.draft_model = model;
        spec.shape = TreeShape::chain(6);
        const Sampled got = sample(model, sc, &spec, 2, prompt, 70);
        CHECK(got.tokens == sample(model, sc, nullptr, 2, prompt, 70).tokens);
        CHECK(got.stats.rounds > 0);
        CHECK(got.stats.accepted == 6 * got.stats.rounds);  // every round: 6 drafted and accepted, and the bonus
    }
}

// Leviathan's rule stays available (SampledDraftRule::kLeviathan): exact in distribution (test_speculative_sampling),
// but its random words depend on the drafts, so its text differs from plain sampling's for the same seed.
TEST_CASE("under Leviathan's rule a sampled chain's text depends on the draft", "[speculative][sampling][seed]") {
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const auto trained = LongSpecDraft::load(std::string(SPECULA_SOURCE_DIR) + "/models/drafts/stories260K.longspec.gguf", model);
    const std::vector<int32_t> prompt = test_inputs::model_text_prompt(*model, 24);
    SamplerConfig sc;
    sc.temperature = 1.0f;
    sc.seed = 5;
    SpeculativeConfig spec;
    spec.longspec = trained;
    spec.shape = TreeShape::chain(4);
    spec.sampled_drafts = SampledDraftRule::kLeviathan;
    const Sampled leviathan = sample(model, sc, &spec, 2, prompt, 96);
    CHECK(leviathan.stats.accepted > 0);
    CHECK(leviathan.tokens != sample(model, sc, nullptr, 2, prompt, 96).tokens);
    spec.sampled_drafts = SampledDraftRule::kCoupled;
    CHECK(sample(model, sc, &spec, 2, prompt, 96).tokens == sample(model, sc, nullptr, 2, prompt, 96).tokens);
}

TEST_CASE("seeded sampling: a session's automatic tree starts from what the last one learned, and the text stays the seed's",
          "[speculative][seeded]") {
    // TunerMemory (speculative/tuner_memory.h): sessions of the same model, drafter and settings hand on what the
    // tuner measured. Only the trees drafted change; each session's text is plain sampling's for the seed.
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const auto trained = LongSpecDraft::load(std::string(SPECULA_SOURCE_DIR) + "/models/drafts/stories260K.longspec.gguf", model);
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time, there was a little dog. The little dog", true, false);
    SamplerConfig sc;
    sc.temperature = 0.8f;
    sc.seed = 5;
    constexpr int32_t n = test_scale::count(96, 32);
    const Sampled plain = sample(model, sc, nullptr, 2, prompt, n);
    SpeculativeConfig spec;
    spec.longspec = trained;
    spec.ngram = true;
    spec.auto_tree = true;
    const auto run = [&](int32_t threads, float temperature) {
        SessionConfig config;
        config.n_ctx = 512;
        config.n_threads = threads;
        SamplerConfig s = sc;
        s.temperature = temperature;
        Session session(model, config, s);
        session.set_speculative(spec);
        const std::vector<int32_t> got = test_sessions::generate(session, prompt, n);
        REQUIRE(session.tree_tuner() != nullptr);
        return std::make_pair(got, session.tree_tuner()->learned());
    };
    const auto first = run(2, 0.8f);
    CHECK(first.first == plain.tokens);
    CHECK(!first.second);  // the first session of this setup in the process learns from nothing
    const auto second = run(2, 0.8f);
    CHECK(second.first == plain.tokens);
    CHECK(second.second);
    CHECK(!run(1, 0.8f).second);  // one thread: other costs, another entry
    CHECK(!run(2, 0.0f).second);  // greedy: another acceptance, another entry
    CHECK(run(2, 0.0f).second);
}
