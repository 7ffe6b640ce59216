// Speculative decoding through the public API (libspecula.so): LongSpec draft handles, attaching drafters to a
// session, their error statuses, and the lossless guarantee seen from outside (greedy output identical to plain
// decoding, token for token), with the drafted flags of the token events consistent with the stats.
#include <specula/specula.hpp>

#include "common/api_outcome.h"
#include "common/fixture_files.h"
#include "common/temp_dir.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using test_fixtures::outcome;
using test_fixtures::Outcome;
using test_fixtures::TempDir;
using Catch::Matchers::Contains;

namespace {

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";
const std::string kPrompt = "Once upon a time, there was a little girl named Lily.";
constexpr int32_t kTokens = 64;

fs::path code_model_path() { return test_fixtures::fixtures_dir() / "models" / "code-7m" / "model.gguf"; }

const specula::Model &stories() {
    static const specula::Model model = specula::Model::load(kModelPath);
    return model;
}



specula::Session greedy_session(const specula::Model &model, int32_t n_ctx = 512) {
    specula::SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_threads = 1;
    return specula::Session(model, so, specula::SamplerOptions::greedy());
}

// stories260K drafting a chain of 4 for itself (every greedy guess right), the prompt appended.
specula::Session chain_drafting_session() {
    specula::Session session = greedy_session(stories());
    specula::SpeculativeOptions o;
    o.draft_model = &stories();
    o.tree = specula::SpeculativeOptions::chain(4);
    session.set_speculative(o);
    session.append_text(kPrompt);
    return session;
}

// What one generate call produced.
struct Run {
    std::vector<int32_t> tokens;
    int32_t n_drafted_flags = 0;
    specula_stop_reason reason = SPECULA_STOP_NONE;
    specula_stats stats{};
};

Run generate(specula::Session &session, int32_t n = kTokens) {
    Run run;
    specula::GenerateOptions go(n);
    go.stop_at_eog = false;
    run.reason = session.generate(go, [&](const specula_token_event &ev) {
        if (ev.token != SPECULA_TOKEN_NULL) run.tokens.push_back(ev.token);
        if (ev.drafted) {
            CHECK(ev.token != SPECULA_TOKEN_NULL);
            ++run.n_drafted_flags;
        }
        return true;
    });
    run.stats = session.stats();
    return run;
}

// Plain greedy decoding of kPrompt: the reference every drafter must reproduce.
const std::vector<int32_t> &reference_tokens() {
    static const std::vector<int32_t> tokens = [] {
        specula::Session s = greedy_session(stories());
        s.append_text(kPrompt);
        return generate(s).tokens;
    }();
    return tokens;
}

std::string write_random_draft(const TempDir &dir, const specula::Model &target, const std::string &name) {
    const std::string path = dir.file(name);
    specula::Draft::write_random(target, path, 7, 64);
    return path;
}

}  // namespace

TEST_CASE("speculative: NULL handles and bad options are INVALID_ARGUMENT with a message", "[speculative][api]") {
    TempDir dir("specula-speculative-api");
    specula_error *err = nullptr;
    specula_draft *draft = nullptr;
    const std::string draft_path = write_random_draft(dir, stories(), "d.gguf");

    SECTION("draft load and write") {
        Outcome o = outcome(specula_draft_load(nullptr, stories().get(), &draft, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(o.message, Contains("path"));
        CHECK(draft == nullptr);
        o = outcome(specula_draft_load(draft_path.c_str(), nullptr, &draft, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(o.message, Contains("target"));
        CHECK(draft == nullptr);
        o = outcome(specula_draft_load(draft_path.c_str(), stories().get(), nullptr, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(o.message, Contains("out"));
        o = outcome(specula_draft_load(dir.file("missing.gguf").c_str(), stories().get(), &draft, &err), &err);
        CHECK(o.status == SPECULA_ERR_IO);
        CHECK(draft == nullptr);

        o = outcome(specula_draft_write_random(nullptr, dir.file("x.gguf").c_str(), 1, 0, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(o.message, Contains("target"));
        o = outcome(specula_draft_write_random(stories().get(), nullptr, 1, 0, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(o.message, Contains("path"));
        o = outcome(specula_draft_write_random(stories().get(), dir.file("x.gguf").c_str(), 1, -1, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(o.message, Contains("window"));
        o = outcome(specula_draft_write_random(stories().get(), (dir.path / "no-such-dir" / "x.gguf").string().c_str(), 1, 0, &err), &err);
        CHECK(o.status == SPECULA_ERR_IO);
        CHECK_FALSE(o.message.empty());

        // Getters and destroy accept NULL.
        CHECK(specula_draft_window(nullptr) == 0);
        CHECK(specula_draft_n_params(nullptr) == 0);
        CHECK(specula_draft_retain(nullptr) == nullptr);
        specula_draft_destroy(nullptr);
        CHECK(std::string(specula_session_drafter_name(nullptr)).empty());

        // A vocab-only model cannot be a target.
        specula::ModelOptions mo;
        mo.vocab_only = true;
        specula::Model vocab = specula::Model::load(kModelPath, mo);
        o = outcome(specula_draft_load(draft_path.c_str(), vocab.get(), &draft, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(o.message, Contains("vocab-only"));
        o = outcome(specula_draft_write_random(vocab.get(), dir.file("x.gguf").c_str(), 1, 0, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
    }

    SECTION("set_speculative") {
        specula::Session session = greedy_session(stories());
        specula::Draft d = specula::Draft::load(draft_path, stories());
        specula_speculative_options o;
        specula_speculative_options_init(&o);
        CHECK(o.struct_size == sizeof o);
        CHECK(o.draft == nullptr);
        CHECK(o.draft_model == nullptr);
        CHECK(o.ngram == 0);
        CHECK(o.grammar == 0);
        CHECK(o.tree_widths == nullptr);
        CHECK(o.n_tree_levels == 0);
        CHECK(o.ngram_nodes == 16);
        CHECK(o.ngram_lookup_min >= 1);
        CHECK(o.ngram_lookup_max >= o.ngram_lookup_min);

        Outcome r = outcome(specula_session_set_speculative(nullptr, &o, &err), &err);
        CHECK(r.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(r.message, Contains("session"));

        auto expect_bad = [&](const specula_speculative_options &bad, const char *fragment) {
            const Outcome out = outcome(specula_session_set_speculative(session.get(), &bad, &err), &err);
            CHECK(out.status == SPECULA_ERR_INVALID_ARGUMENT);
            CHECK_THAT(out.message, Contains(fragment));
            CHECK(session.drafter_name().empty());  // nothing was attached
        };
        specula_speculative_options bad = o;
        bad.struct_size = 0;
        expect_bad(bad, "struct_size");

        bad = o;
        bad.draft = d.get();
        bad.draft_model = stories().get();
        expect_bad(bad, "not both");

        const int32_t zero_width[] = {4, 0, 16};
        const int32_t too_wide[] = {257};
        bad = o;
        bad.draft = d.get();
        bad.tree_widths = zero_width;
        bad.n_tree_levels = 3;
        expect_bad(bad, "tree_widths[1]");
        bad.tree_widths = too_wide;
        bad.n_tree_levels = 1;
        expect_bad(bad, "[1, 256]");
        bad.tree_widths = nullptr;
        bad.n_tree_levels = 2;
        expect_bad(bad, "tree_widths is NULL");
        std::vector<int32_t> deep(33, 1);
        bad.tree_widths = deep.data();
        bad.n_tree_levels = 33;
        expect_bad(bad, "n_tree_levels");
        bad.n_tree_levels = -1;
        expect_bad(bad, "n_tree_levels");

        bad = o;
        bad.ngram = 2;
        expect_bad(bad, "ngram");
        bad = o;
        bad.grammar = 2;
        expect_bad(bad, "grammar");
        bad = o;
        bad.ngram = 1;
        bad.ngram_nodes = -1;
        expect_bad(bad, "ngram_nodes");
        bad.ngram_nodes = 1025;
        expect_bad(bad, "ngram_nodes");
        bad = o;
        bad.ngram = 1;
        bad.ngram_lookup_min = 0;
        expect_bad(bad, "ngram_lookup_min");
        bad = o;
        bad.ngram = 1;
        bad.ngram_lookup_min = 5;
        bad.ngram_lookup_max = 4;
        expect_bad(bad, "ngram_lookup_max");
        bad = o;
        bad.ngram = 1;
        bad.ngram_table_n = 1;
        expect_bad(bad, "ngram_table_n");
        bad = o;
        bad.ngram = 1;
        bad.ngram_lag = -1;
        expect_bad(bad, "ngram_lag");

        // A vocab-only model cannot draft.
        specula::ModelOptions mo;
        mo.vocab_only = true;
        specula::Model vocab = specula::Model::load(kModelPath, mo);
        bad = o;
        bad.draft_model = vocab.get();
        expect_bad(bad, "vocab-only");

        // A failed call leaves the previous drafters attached.
        specula_speculative_options good = o;
        good.ngram = 1;
        REQUIRE(outcome(specula_session_set_speculative(session.get(), &good, &err), &err).status == SPECULA_OK);
        CHECK(session.drafter_name() == "ngram");
        bad = o;
        bad.ngram = 1;
        bad.ngram_nodes = -1;
        CHECK(outcome(specula_session_set_speculative(session.get(), &bad, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(session.drafter_name() == "ngram");
    }

    SECTION("sampler: the contextual penalty's settings") {
        specula::SamplerOptions sp;
        CHECK(sp.context_penalty == 1.0f);
        CHECK(sp.context_penalty_window == 1024);
        specula::Session session = greedy_session(stories());
        sp.context_penalty = 0.0f;
        CHECK(outcome(specula_session_set_sampler(session.get(), &sp, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        sp.context_penalty = 1.2f;
        sp.context_penalty_window = -2;
        const Outcome r = outcome(specula_session_set_sampler(session.get(), &sp, &err), &err);
        CHECK(r.status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(r.message, Contains("context_penalty_window"));
    }
}

TEST_CASE("speculative: a draft made for another target is INCOMPATIBLE", "[speculative][api]") {
    if (!test_fixtures::have_fixture(code_model_path())) return;
    TempDir dir("specula-speculative-api");
    const std::string path = write_random_draft(dir, stories(), "stories-draft.gguf");
    const specula::Model code = specula::Model::load(code_model_path().string());
    specula_draft *draft = nullptr;
    specula_error *err = nullptr;
    const Outcome o = outcome(specula_draft_load(path.c_str(), code.get(), &draft, &err), &err);
    CHECK(o.status == SPECULA_ERR_INCOMPATIBLE);
    CHECK_FALSE(o.message.empty());
    CHECK(draft == nullptr);

    // The same file against its own target loads.
    specula::Draft ok = specula::Draft::load(path, stories());
    CHECK(ok.window() == 64);
    CHECK(ok.n_params() > 0);
}

TEST_CASE("speculative: a draft loaded for one model handle cannot serve a session on another", "[speculative][api]") {
    TempDir dir("specula-speculative-api");
    const std::string path = write_random_draft(dir, stories(), "d.gguf");
    const specula::Model a = specula::Model::load(kModelPath);
    const specula::Model b = specula::Model::load(kModelPath);  // the same file, another loaded model
    specula::Draft draft = specula::Draft::load(path, a);

    specula::Session on_b = greedy_session(b);
    specula_speculative_options o;
    specula_speculative_options_init(&o);
    o.draft = draft.get();
    specula_error *err = nullptr;
    const Outcome r = outcome(specula_session_set_speculative(on_b.get(), &o, &err), &err);
    CHECK(r.status == SPECULA_ERR_INCOMPATIBLE);
    CHECK_THAT(r.message, Contains("another model"));
    CHECK(on_b.drafter_name().empty());

    // A handle retained from a (the same loaded model) is fine.
    const specula::Model a2 = a;  // specula_model_retain
    specula::Session on_a2 = greedy_session(a2);
    CHECK(outcome(specula_session_set_speculative(on_a2.get(), &o, &err), &err).status == SPECULA_OK);
    CHECK(on_a2.drafter_name() == "longspec");
}

TEST_CASE("speculative: a draft model with another vocabulary is INCOMPATIBLE", "[speculative][api]") {
    if (!test_fixtures::have_fixture(code_model_path())) return;
    const specula::Model code = specula::Model::load(code_model_path().string());
    specula::Session session = greedy_session(stories());
    specula_speculative_options o;
    specula_speculative_options_init(&o);
    o.draft_model = code.get();
    specula_error *err = nullptr;
    const Outcome r = outcome(specula_session_set_speculative(session.get(), &o, &err), &err);
    CHECK(r.status == SPECULA_ERR_INCOMPATIBLE);
    CHECK_THAT(r.message, Contains("vocabulary"));
    CHECK(session.drafter_name().empty());
}

TEST_CASE("speculative: a truncated draft file is IO or FORMAT and yields no handle", "[speculative][api]") {
    TempDir dir("specula-speculative-api");
    const std::string path = write_random_draft(dir, stories(), "d.gguf");
    const std::string bytes = test_fixtures::read_file(path);
    REQUIRE(bytes.size() > 1024);
    for (const size_t keep : {size_t(0), size_t(3), size_t(16), size_t(100), bytes.size() / 2, bytes.size() - 1}) {
        CAPTURE(keep);
        const std::string cut = dir.file("cut-" + std::to_string(keep) + ".gguf");
        {
            std::ofstream out(cut, std::ios::binary);
            out.write(bytes.data(), std::streamsize(keep));
        }
        int dummy = 0;
        specula_draft *draft = reinterpret_cast<specula_draft *>(&dummy);  // must be overwritten with NULL
        specula_error *err = nullptr;
        const Outcome o = outcome(specula_draft_load(cut.c_str(), stories().get(), &draft, &err), &err);
        CHECK((o.status == SPECULA_ERR_IO || o.status == SPECULA_ERR_FORMAT));
        CHECK_FALSE(o.message.empty());
        CHECK(draft == nullptr);
    }
}

TEST_CASE("speculative: greedy output equals plain greedy decoding with every drafter", "[speculative][api][concurrency]") {
    TempDir dir("specula-speculative-api");
    const std::string draft_path = write_random_draft(dir, stories(), "d.gguf");
    const std::vector<int32_t> &expected = reference_tokens();
    REQUIRE(expected.size() == size_t(kTokens));

    struct Case {
        const char *name;
        bool draft, target_as_draft, ngram;
        std::vector<int32_t> tree;
        const char *drafter;
    };
    const Case cases[] = {
        {"ngram", false, false, true, {}, "ngram"},
        {"longspec", true, false, false, {}, "longspec"},
        {"longspec chain", true, false, false, {1, 1, 1, 1}, "longspec"},
        {"target as draft", false, true, false, {}, "draft-model"},
        {"target as draft chain", false, true, false, {1, 1, 1}, "draft-model"},
        {"longspec and ngram", true, false, true, {2, 4}, "longspec+ngram"},
        {"target as draft and ngram", false, true, true, {}, "draft-model+ngram"},
    };
    for (const Case &c : cases) {
        SECTION(c.name) {
            specula::Session session = greedy_session(stories());
            {
                // The session keeps its own references: the handles may go right after attaching.
                specula::Draft draft = c.draft ? specula::Draft::load(draft_path, stories()) : specula::Draft();
                specula::Model target_copy = c.target_as_draft ? stories() : specula::Model();
                specula::SpeculativeOptions o;
                o.draft = c.draft ? &draft : nullptr;
                o.draft_model = c.target_as_draft ? &target_copy : nullptr;
                o.ngram = c.ngram;
                o.tree = c.tree;
                // The target drafting for itself is checked for its acceptance: always draft. Otherwise no tree given
                // means auto (the session may well decode plainly on this tiny model: output is the same).
                if (c.target_as_draft) o.tree_mode = SPECULA_TREE_FIXED;
                session.set_speculative(o);
            }
            CHECK(session.drafter_name() == c.drafter);
            CHECK(session.tree_shape().empty());  // no round yet
            session.append_text(kPrompt);
            const Run run = generate(session);
            CHECK(run.reason == SPECULA_STOP_MAX_TOKENS);
            CHECK(test_fixtures::ids_to_string(run.tokens) == test_fixtures::ids_to_string(expected));

            const bool auto_tree = c.tree.empty() && !c.target_as_draft;
            INFO("last tree: " << session.tree_shape());
            CHECK(session.tree_shape().rfind("auto:", 0) == (auto_tree ? 0u : std::string::npos));
            const specula_stats &st = run.stats;
            CHECK(st.n_generated == kTokens);
            CHECK(st.n_spec_rounds > 0);
            CHECK(st.tau >= 1.0);
            CHECK(st.tau == Approx(double(st.n_accepted + st.n_spec_rounds) / st.n_spec_rounds));
            CHECK(st.n_accepted <= st.n_drafted);
            CHECK(run.n_drafted_flags <= st.n_accepted);  // accepted tokens past max_tokens are never emitted
            CHECK(st.accepted_at_depth[0] <= st.n_spec_rounds);
            int32_t depth_sum = 0;
            for (int d = 0; d < 16; ++d) {
                depth_sum += st.accepted_at_depth[d];
                if (d > 0) CHECK(st.accepted_at_depth[d] <= st.accepted_at_depth[d - 1]);
            }
            CHECK(depth_sum <= st.n_accepted);
            CHECK(st.draft_ms >= 0.0);
            CHECK(st.verify_ms > 0.0);
            CHECK(st.drafter_bytes > 0);
            if (c.target_as_draft) {
                // The target drafting for itself: every greedy guess is right.
                CHECK(run.n_drafted_flags > 0);
                CHECK(st.n_accepted > 0);
                CHECK(st.tau > 2.0);
            }
        }
    }
}

TEST_CASE("speculative: specula_session_accepted_at_depth reports every level, past the stats' 16", "[speculative][api]") {
    // stories260K drafting a chain of 24 for itself: every greedy guess is right, so rounds reach depth 24.
    specula::Session session = greedy_session(stories());
    CHECK(specula_session_accepted_at_depth(session.get(), nullptr, 0) == 0);  // no round yet
    CHECK(specula_session_accepted_at_depth(nullptr, nullptr, 0) == 0);
    specula::SpeculativeOptions o;
    o.draft_model = &stories();
    o.tree = specula::SpeculativeOptions::chain(24);
    session.set_speculative(o);
    session.append_text(kPrompt);
    const Run run = generate(session, 96);
    const int32_t levels = specula_session_accepted_at_depth(session.get(), nullptr, 0);
    CHECK(levels > 16);
    CHECK(levels <= 24);
    std::vector<int32_t> counts(32, -1);
    CHECK(specula_session_accepted_at_depth(session.get(), counts.data(), int32_t(counts.size())) == levels);
    int64_t sum = 0;
    for (int32_t d = 0; d < levels; ++d) {
        if (d < 16) CHECK(counts[size_t(d)] == run.stats.accepted_at_depth[d]);
        if (d > 0) CHECK(counts[size_t(d)] <= counts[size_t(d - 1)]);
        sum += counts[size_t(d)];
    }
    CHECK(counts[size_t(levels)] == -1);  // nothing written past the levels reached
    CHECK(sum == run.stats.n_accepted);   // every accepted token is one level of one round
    std::vector<int32_t> few(3, -1);
    CHECK(specula_session_accepted_at_depth(session.get(), few.data(), 3) == levels);  // a short buffer: its first 3
    CHECK(few[0] == counts[0]);
    CHECK(few[2] == counts[2]);
    CHECK(session.accepted_at_depth() == std::vector<int32_t>(counts.begin(), counts.begin() + levels));  // the wrapper
}

TEST_CASE("speculative: pull-style next reports drafted tokens and the same output", "[speculative][api]") {
    specula::Session session = chain_drafting_session();
    std::vector<int32_t> tokens;
    int32_t drafted = 0;
    specula::GenerateOptions go(kTokens);
    go.stop_at_eog = false;
    for (int guard = 0; guard < kTokens + 4; ++guard) {
        const specula_token_event ev = session.next(go);
        if (ev.token != SPECULA_TOKEN_NULL) tokens.push_back(ev.token);
        if (ev.drafted) ++drafted;
        REQUIRE(ev.stats != nullptr);
        CHECK(ev.stats->n_spec_rounds > 0);
        if (ev.stop != SPECULA_STOP_NONE) break;
    }
    CHECK(test_fixtures::ids_to_string(tokens) == test_fixtures::ids_to_string(reference_tokens()));
    const specula_stats st = session.stats();
    CHECK(drafted > 0);
    CHECK(drafted <= st.n_accepted);
}

TEST_CASE("speculative: the logits after each token are plain decoding's, bit for bit, attached or detached", "[speculative][api]") {
    // The logits of the last evaluated position: after a token plain decoding produced, the distribution it was
    // drawn from; after a drafted token the round also evaluated (its keys/values are committed), the next one.
    // After a round they are the verifier's rows (the session points at them instead of copying a vocabulary per
    // token); they must be the bits plain decoding computed for that position.
    specula::Session plain = greedy_session(stories());
    plain.append_text(kPrompt);
    const size_t n_vocab = size_t(stories().n_vocab());
    specula::GenerateOptions go(kTokens);
    go.stop_at_eog = false;
    std::vector<std::vector<float>> dist;  // [k]: the distribution token k was drawn from
    std::vector<int32_t> tokens;
    for (int i = 0; i < 49; ++i) {
        tokens.push_back(plain.next(go).token);
        REQUIRE(plain.logits() != nullptr);
        dist.emplace_back(plain.logits(), plain.logits() + n_vocab);
    }
    specula::Session spec = chain_drafting_session();
    int32_t drafted = 0;
    for (size_t k = 0; k < 48; ++k) {
        if (k == 32) spec.clear_speculative();  // detached with a round's rows pending
        const specula_token_event b = spec.next(go);
        REQUIRE(b.token == tokens[k]);
        if (b.drafted) ++drafted;
        const float *lb = spec.logits();
        REQUIRE(lb != nullptr);
        CHECK(std::memcmp(lb, dist[k + (b.drafted ? 1 : 0)].data(), n_vocab * sizeof(float)) == 0);
    }
    CHECK(drafted > 0);
}

TEST_CASE("speculative: detaching returns to plain decoding", "[speculative][api]") {
    specula::Session session = greedy_session(stories());
    session.set_speculative([] {
        specula::SpeculativeOptions o;
        o.ngram = true;
        return o;
    }());
    session.append_text(kPrompt);
    const Run first = generate(session, kTokens / 2);
    CHECK(first.stats.n_spec_rounds > 0);

    session.clear_speculative();
    CHECK(session.drafter_name().empty());
    const Run second = generate(session, kTokens / 2);
    CHECK(second.n_drafted_flags == 0);
    CHECK(second.stats.n_spec_rounds == first.stats.n_spec_rounds);  // no more rounds
    CHECK(second.stats.drafter_bytes == 0);

    std::vector<int32_t> all = first.tokens;
    all.insert(all.end(), second.tokens.begin(), second.tokens.end());
    CHECK(test_fixtures::ids_to_string(all) == test_fixtures::ids_to_string(reference_tokens()));

    // Options with no drafter at all detach as well (and attaching again works mid-context).
    session.set_speculative([] {
        specula::SpeculativeOptions o;
        o.ngram = true;
        return o;
    }());
    CHECK(session.drafter_name() == "ngram");
    specula_speculative_options none;
    specula_speculative_options_init(&none);
    specula_error *err = nullptr;
    CHECK(outcome(specula_session_set_speculative(session.get(), &none, &err), &err).status == SPECULA_OK);
    CHECK(session.drafter_name().empty());
}

TEST_CASE("speculative: the contextual penalty stays lossless under speculation", "[speculative][api]") {
    specula::SamplerOptions sp = specula::SamplerOptions::greedy();
    sp.context_penalty = 1.5f;
    sp.context_penalty_window = 64;
    auto run = [&](bool speculate) {
        specula::SessionOptions so;
        so.n_ctx = 512;
        so.n_threads = 1;
        specula::Session session(stories(), so, sp);
        if (speculate) {
            specula::SpeculativeOptions o;
            o.draft_model = &stories();
            o.ngram = true;
            session.set_speculative(o);
        }
        session.append_text(kPrompt);
        return generate(session).tokens;
    };
    const std::vector<int32_t> plain = run(false);
    CHECK(test_fixtures::ids_to_string(run(true)) == test_fixtures::ids_to_string(plain));
    // The penalty reaches the sampler: the output is not plain greedy's.
    CHECK(test_fixtures::ids_to_string(plain) != test_fixtures::ids_to_string(reference_tokens()));
}

TEST_CASE("speculative: stats are written only up to the caller's struct_size", "[speculative][api]") {
    specula::Session session = greedy_session(stories());
    specula::SpeculativeOptions o;
    o.ngram = true;
    session.set_speculative(o);
    session.append_text(kPrompt);
    generate(session, 16);

    // A caller compiled against the 0.1 header: its struct ends before the speculative counters.
    alignas(specula_stats) unsigned char buf[sizeof(specula_stats)];
    std::memset(buf, 0xAB, sizeof buf);
    specula_stats *old = reinterpret_cast<specula_stats *>(buf);
    old->struct_size = offsetof(specula_stats, n_spec_rounds);
    specula_error *err = nullptr;
    REQUIRE(outcome(specula_session_stats(session.get(), old, &err), &err).status == SPECULA_OK);
    CHECK(old->n_generated == 16);
    for (size_t i = offsetof(specula_stats, n_spec_rounds); i < sizeof buf; ++i) CHECK(buf[i] == 0xAB);

    const specula_stats full = session.stats();
    CHECK(full.n_spec_rounds > 0);
    CHECK(full.drafter_bytes > 0);
}

TEST_CASE("speculative: draft logits are deterministic, change nothing, and misuse is an error",
          "[speculative][api]") {
    TempDir dir("specula-speculative-api");
    const specula::Model &model = stories();
    const specula::Draft draft = specula::Draft::load(write_random_draft(dir, model, "d.gguf"), model);
    const int32_t n_vocab = model.n_vocab();
    specula_error *err = nullptr;
    std::vector<float> buf(size_t(n_vocab) + 1, 0.0f);

    specula::Session session = greedy_session(model);
    // No drafter attached, then an n-gram drafter (no single distribution): refused with a message.
    session.append_text(kPrompt);
    Outcome o = outcome(specula_session_draft_logits(session.get(), buf.data(), buf.size(), &err), &err);
    CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(o.message.find("no drafter") != std::string::npos);
    session.set_speculative([] {
        specula::SpeculativeOptions s;
        s.ngram = true;
        return s;
    }());
    o = outcome(specula_session_draft_logits(session.get(), buf.data(), buf.size(), &err), &err);
    CHECK(o.status == SPECULA_ERR_UNSUPPORTED);

    specula::SpeculativeOptions with_draft;
    with_draft.draft = &draft;
    session.set_speculative(with_draft);
    CHECK(outcome(specula_session_draft_logits(nullptr, buf.data(), buf.size(), &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(outcome(specula_session_draft_logits(session.get(), nullptr, buf.size(), &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(outcome(specula_session_draft_logits(session.get(), buf.data(), size_t(n_vocab) - 1, &err), &err).status ==
          SPECULA_ERR_BUFFER_TOO_SMALL);

    const std::vector<float> first = session.draft_logits(n_vocab);
    const std::vector<float> again = session.draft_logits(n_vocab);
    CHECK(first == again);
    bool finite = true, varied = false;
    for (float v : first) {
        finite = finite && std::isfinite(v);
        varied = varied || v != first[0];
    }
    CHECK(finite);
    CHECK(varied);

    // Asking changes nothing: the output is still plain greedy decoding's.
    const Run run = generate(session);
    CHECK(test_fixtures::ids_to_string(run.tokens) == test_fixtures::ids_to_string(reference_tokens()));

    // A different context gives different logits; an empty one is an error.
    session.rewind(1);
    CHECK(session.draft_logits(n_vocab) != first);
    session.rewind(0);
    CHECK(outcome(specula_session_draft_logits(session.get(), buf.data(), buf.size(), &err), &err).status ==
          SPECULA_ERR_INVALID_ARGUMENT);
}

// The trained drafts committed under models/drafts/ (tools/train; docs/training.md): lossless like any draft, and
// trained: a deterministic (greedy) run accepts several tokens per round where an untrained draft accepts ~0.
// The thresholds sit well below what the files measure (bench_draft_quality: tau 5.3 stories, 5.1 code), so
// they catch a broken file or a broken draft forward pass, not noise.
TEST_CASE("speculative: the committed trained drafts are lossless and accept several tokens per round", "[speculative][api]") {
    struct Case {
        fs::path model;
        const char *draft;
        std::string prompt;
    };
    const Case cases[] = {
        {kModelPath, "stories260K.longspec.gguf", kPrompt},
        {code_model_path(), "code-7m.longspec.gguf",
         "import os\nimport sys\n\n\ndef main(argv):\n    \"\"\"Print the arguments.\"\"\"\n    for arg in argv:\n"},
    };
    for (const Case &c : cases) {
        if (!test_fixtures::have_fixture(c.model)) continue;
        INFO(c.draft);
        const specula::Model model = specula::Model::load(c.model.string());
        specula::Session plain = greedy_session(model);
        plain.append_text(c.prompt);
        const Run expected = generate(plain);

        const specula::Draft draft = specula::Draft::load(std::string(SPECULA_SOURCE_DIR "/models/drafts/") + c.draft, model);
        specula::Session fast = greedy_session(model);
        specula::SpeculativeOptions o;
        o.draft = &draft;
        o.tree_mode = SPECULA_TREE_FIXED;  // the default tree every round: its acceptance is what is checked
        fast.set_speculative(o);
        fast.append_text(c.prompt);
        const Run run = generate(fast);
        CHECK(test_fixtures::ids_to_string(run.tokens) == test_fixtures::ids_to_string(expected.tokens));
        CHECK(run.stats.tau >= 3.0);
        CHECK(fast.tree_shape() == "4,16,16,16,16");
    }
}
