// Lossless greedy speculative decoding: for every drafter and tree shape, the speculative output equals plain
// greedy output token for token. Drafts with random weights are fine (they are rarely accepted; the target
// as its own draft is always accepted, and n-grams on repetitive text often), including runs that pass the
// LongSpec window many times (window 16) and prompts longer than the window.
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "common/test_scale.h"
#include "common/test_inputs.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <optional>
#include <vector>

using namespace specula::internal;

namespace {

std::shared_ptr<const Model> load_model(const std::string &rel) {
    return Model::load((test_fixtures::fixtures_dir() / rel).string(), LoadOptions{});
}

using test_sessions::generate;

struct Drafters {
    std::shared_ptr<const LongSpecDraft> longspec;
    std::shared_ptr<const Model> self;
};

void check_lossless(const std::shared_ptr<const Model> &model, const SpeculativeConfig &spec, const std::vector<int32_t> &prompt,
                    int32_t n, const std::vector<int32_t> &expected, const std::string &label, std::optional<KvType> kv = std::nullopt) {
    SessionConfig sc;
    sc.n_ctx = 1024;
    sc.n_threads = 2;
    sc.backend.kv_type = kv;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    Session s(model, sc, greedy);
    s.set_speculative(spec);
    const std::vector<int32_t> got = generate(s, prompt, n);
    INFO(label << ": drafter " << s.drafter_name() << ", tree " << spec.shape.to_string() << ", rounds "
               << s.speculative_stats().rounds << ", accepted " << s.speculative_stats().accepted);
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
        INFO("token " << i);
        REQUIRE(got[i] == expected[i]);
    }
    CHECK(s.speculative_stats().rounds > 0);
    CHECK(s.speculative_stats().rounds <= int32_t(expected.size()));
}

void run_matrix(const std::string &rel, int32_t n_gen, const std::vector<TreeShape> &shapes, bool with_ngram_merge,
                std::optional<KvType> kv = std::nullopt) {
    const auto path = test_fixtures::fixtures_dir() / rel;
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = load_model(rel);
    const std::vector<int32_t> prompt = test_inputs::model_text_prompt(*model, 40);  // longer than the window of 16

    SessionConfig sc;
    sc.n_ctx = 1024;
    sc.n_threads = 2;
    sc.backend.kv_type = kv;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    Session plain(model, sc, greedy);
    const std::vector<int32_t> expected = generate(plain, prompt, n_gen);
    REQUIRE(int32_t(expected.size()) == n_gen);

    RandomDraftOptions opt;
    opt.window = 16;
    opt.seed = 3;
    const auto longspec = test_inputs::random_longspec_draft(model, opt, "draft-" + std::filesystem::path(rel).stem().string());

    for (const TreeShape &shape : shapes) {
        SpeculativeConfig c;
        c.shape = shape;
        c.longspec = longspec;
        check_lossless(model, c, prompt, n_gen, expected, rel + " longspec", kv);
        if (with_ngram_merge) {
            c.ngram = true;
            check_lossless(model, c, prompt, n_gen, expected, rel + " longspec+ngram", kv);
            c.ngram = false;
        }
        c.longspec = nullptr;
        c.draft_model = model;  // the target as its own independent draft: everything is accepted
        check_lossless(model, c, prompt, n_gen, expected, rel + " target-as-draft", kv);
    }
    SpeculativeConfig ngram;
    ngram.ngram = true;
    check_lossless(model, ngram, prompt, n_gen, expected, rel + " ngram", kv);
}

const std::vector<TreeShape> kAllShapes = {TreeShape::chain(4), TreeShape{}, TreeShape{{32, 8}}, TreeShape{{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}}};

}  // namespace

TEST_CASE("speculative greedy equals plain greedy on stories260K for every drafter and tree shape", "[speculative][lossless]") {
    run_matrix("models/stories260K.gguf", test_scale::count(256, 112), kAllShapes, true);
}

// The heavier models carry the slow label: the README's test command runs them; the sanitizer pass, ~20x slower
// on these float loops, leaves them out (stories260K above covers the same code paths there).
// The default cache is F16; the other types store rows differently but are read the same way by trees and decoding.
TEST_CASE("speculative greedy equals plain greedy on stories260K with F32 and Q8_0 KV caches", "[speculative][lossless]") {
    for (const KvType kv : {KvType::F32, KvType::Q8_0}) {
        CAPTURE(kv_type_name(kv));
        run_matrix("models/stories260K.gguf", test_scale::count(128, 64), {TreeShape::chain(4), TreeShape{}}, true, kv);
    }
}

TEST_CASE("speculative greedy equals plain greedy on code-7m for every drafter and tree shape", "[speculative][lossless][slow]") {
    run_matrix("models/code-7m/model.gguf", 256, kAllShapes, true);
}

TEST_CASE("speculative greedy equals plain greedy with an independent weaker draft model", "[speculative][lossless]") {
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K-L3.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = load_model("models/stories260K.gguf");
    const auto draft = load_model("models/stories260K-L3.gguf");
    const std::vector<int32_t> prompt = test_inputs::model_text_prompt(*model, 40);
    SessionConfig sc;
    sc.n_ctx = 1024;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    Session plain(model, sc, greedy);
    const int32_t n_gen = test_scale::count(256, 112);
    const std::vector<int32_t> expected = generate(plain, prompt, n_gen);
    for (const TreeShape &shape : kAllShapes) {
        SpeculativeConfig c;
        c.shape = shape;
        c.draft_model = draft;
        check_lossless(model, c, prompt, n_gen, expected, "stories260K-L3");
        c.ngram = true;
        check_lossless(model, c, prompt, n_gen, expected, "stories260K-L3+ngram");
    }
}

// The synthetic models have 32000-token vocabularies: every tree node costs a full LM head in the target and in
// the draft; they run under the slow label (chain and default tree here, wide and deep trees below).
const char *const kSynthetic[] = {"models/synth-qwen2-bias-f32.gguf", "models/synth-llama-gqa-f16.gguf", "models/synth-llama-q8_0.gguf",
                                  "models/synth-llama-q4_0.gguf", "models/synth-llama-q4_k_m.gguf"};

TEST_CASE("speculative greedy equals plain greedy on the synthetic architectures over 256 tokens", "[speculative][lossless][slow]") {
    for (const char *rel : kSynthetic) run_matrix(rel, 256, {TreeShape::chain(4), TreeShape{}}, false);
}

TEST_CASE("speculative greedy equals plain greedy with the contextual and repetition penalties on", "[speculative][lossless]") {
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = load_model("models/stories260K.gguf");
    const std::vector<int32_t> prompt = test_inputs::model_text_prompt(*model, 40);
    SessionConfig sc;
    sc.n_ctx = 1024;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    greedy.context_penalty = 1.3f;  // TokenSwift's penalty over a short window, so it changes the text
    greedy.context_penalty_window = 24;
    greedy.repeat_penalty = 1.1f;
    greedy.penalty_last_n = 16;
    Session plain(model, sc, greedy);
    const std::vector<int32_t> expected = generate(plain, prompt, 200);
    SamplerConfig unpenalized = greedy;
    unpenalized.context_penalty = 1.0f;
    unpenalized.repeat_penalty = 1.0f;
    Session other(model, sc, unpenalized);
    CHECK(generate(other, prompt, 200) != expected);  // the penalties really act

    RandomDraftOptions opt;
    opt.window = 16;
    SpeculativeConfig c;
    c.longspec = test_inputs::random_longspec_draft(model, opt, "draft-penalty");
    c.ngram = true;
    SpeculativeConfig self;
    self.draft_model = model;
    self.shape = TreeShape{{2, 2, 2, 2}};
    for (const SpeculativeConfig &spec : {c, self}) {
        Session s(model, sc, greedy);
        s.set_speculative(spec);
        const std::vector<int32_t> got = generate(s, prompt, 200);
        INFO("drafter " << s.drafter_name() << " accepted " << s.speculative_stats().accepted);
        CHECK(got == expected);
    }
}

TEST_CASE("speculative greedy equals plain greedy on the synthetic architectures with wide and deep trees", "[speculative][lossless][slow]") {
    // The target as its own draft, merged with n-grams: long accepted paths through wide-shallow and deep trees.
    for (const char *rel : kSynthetic) {
        const auto path = test_fixtures::fixtures_dir() / rel;
        if (!test_fixtures::have_fixture(path)) return;
        const auto model = load_model(rel);
        const std::vector<int32_t> prompt = test_inputs::model_text_prompt(*model, 40);
        SessionConfig sc;
        sc.n_ctx = 1024;
        SamplerConfig greedy;
        greedy.temperature = 0.0f;
        Session plain(model, sc, greedy);
        const std::vector<int32_t> expected = generate(plain, prompt, 256);
        for (const TreeShape &shape : {TreeShape{{32, 8}}, TreeShape{{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}}}) {
            SpeculativeConfig c;
            c.shape = shape;
            c.draft_model = model;
            c.ngram = true;
            check_lossless(model, c, prompt, 256, expected, std::string(rel) + " target-as-draft+ngram");
        }
    }
}
