// Session snapshots and prompt caches through the public API (libspecula.so): exact resume with every drafter at
// temperature 0 and 1, after any emitted token; every damaged or truncated byte refused with the session intact;
// another model, draft, drafter set, n_ctx; buffers, files, forks and the prompt cache directory.
#include <specula/specula.hpp>

#include "common/api_outcome.h"
#include "common/fixture_files.h"
#include "common/test_scale.h"
#include "common/temp_dir.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using test_fixtures::outcome;
using test_fixtures::Outcome;
using test_fixtures::TempDir;
using Catch::Matchers::Contains;

namespace {

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";
const std::string kDraftPath = SPECULA_SOURCE_DIR "/models/drafts/stories260K.longspec.gguf";
const std::string kPrompt = "Once upon a time, there was a little girl named Lily. She loved to";

const specula::Model &stories() {
    static const specula::Model model = specula::Model::load(kModelPath);
    return model;
}



// Which drafters a session gets.
enum class Drafters { None, Ngram, LongSpec, LongSpecNgram, DraftModel };
const char *name_of(Drafters d) {
    switch (d) {
    case Drafters::None: return "none";
    case Drafters::Ngram: return "ngram";
    case Drafters::LongSpec: return "longspec";
    case Drafters::LongSpecNgram: return "longspec+ngram";
    case Drafters::DraftModel: return "draft-model";
    }
    return "";
}

const specula::Draft &trained_draft() {
    static const specula::Draft draft = specula::Draft::load(kDraftPath, stories());
    return draft;
}

specula::Session make_session(Drafters drafters, float temperature, uint64_t seed = 42, int32_t n_ctx = 512,
                              specula_tree_mode tree_mode = SPECULA_TREE_FIXED) {
    specula::SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_threads = 2;
    specula::SamplerOptions sampler;
    sampler.temperature = temperature;
    sampler.seed = seed;
    specula::Session s(stories(), so, sampler);
    specula::SpeculativeOptions spec;
    // Fixed trees by default, so that every round drafts; the automatic tree (its choices follow measured times) is
    // resumed below: with coupled sampled drafts a seed fixes the text whatever the trees.
    spec.tree_mode = tree_mode;
    spec.ngram = drafters == Drafters::Ngram || drafters == Drafters::LongSpecNgram;
    if (drafters == Drafters::LongSpec || drafters == Drafters::LongSpecNgram) spec.draft = &trained_draft();
    if (drafters == Drafters::DraftModel) {
        spec.draft_model = &stories();  // the target as its own draft: same vocabulary, a real second cache
        spec.tree = {1, 1, 1};
    }
    if (drafters != Drafters::None) s.set_speculative(spec);
    return s;
}

std::vector<int32_t> generate(specula::Session &s, int32_t n) {
    std::vector<int32_t> out;
    specula::GenerateOptions go(n);
    go.stop_at_eog = false;
    s.generate(go, [&](const specula_token_event &ev) {
        if (ev.token != SPECULA_TOKEN_NULL) out.push_back(ev.token);
        return true;
    });
    return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("snapshots: generate N, save, load in a new session, generate M equals N + M in one run", "[snapshot][api][concurrency]") {
    // Under ThreadSanitizer (this case is tagged [concurrency] for the thread pool under generation and snapshots) the
    // two drafters that run the most threads' work, the LongSpec draft with n-grams and the draft model: the ten
    // combinations took 103 s there, where each drafter's own code runs in the plain and ASan passes.
    const std::vector<Drafters> all = {Drafters::None, Drafters::Ngram, Drafters::LongSpec, Drafters::LongSpecNgram, Drafters::DraftModel};
    const std::vector<Drafters> under_tsan = {Drafters::LongSpecNgram, Drafters::DraftModel};
    const Drafters drafters = GENERATE_COPY(from_range(test_scale::kThreadSanitized ? under_tsan : all));
    const float temperature = GENERATE(0.0f, 1.0f);
    CAPTURE(name_of(drafters), temperature);
    constexpr int32_t N = 37, M = 43;

    specula::Session whole = make_session(drafters, temperature);
    whole.append_text(kPrompt);
    const std::vector<int32_t> expected = generate(whole, N + M);
    REQUIRE(expected.size() == size_t(N + M));

    specula::Session first = make_session(drafters, temperature);
    first.append_text(kPrompt);
    const std::vector<int32_t> head = generate(first, N);
    const std::vector<uint8_t> bytes = first.save();
    const specula_stats saved_stats = first.stats();

    // The loading session starts with another seed and another context: the snapshot replaces both.
    specula::Session second = make_session(drafters, temperature, /*seed=*/7);
    second.append_text("Tom had a red ball.");
    generate(second, 5);
    second.load(bytes);
    CHECK(second.tokens() == first.tokens());
    const specula_stats loaded_stats = second.stats();
    CHECK(loaded_stats.n_generated == saved_stats.n_generated);
    CHECK(loaded_stats.n_spec_rounds == saved_stats.n_spec_rounds);
    CHECK(loaded_stats.n_accepted == saved_stats.n_accepted);
    CHECK(loaded_stats.n_restored_tokens > 0);
    CHECK(concat(head, generate(second, M)) == expected);
    if (drafters != Drafters::None) CHECK(second.stats().n_spec_rounds > saved_stats.n_spec_rounds);
}

TEST_CASE("snapshots: with the automatic tree at T = 1 a snapshot after any token resumes plain sampling's text", "[snapshot][api][seed]") {
    constexpr int32_t K = 40;
    specula::Session plain = make_session(Drafters::None, 1.0f, 5);
    plain.append_text(kPrompt);
    const std::vector<int32_t> expected = generate(plain, K);
    REQUIRE(expected.size() == size_t(K));
    for (const Drafters drafters : {Drafters::LongSpecNgram, Drafters::DraftModel}) {
        CAPTURE(name_of(drafters));
        specula::Session pulled = make_session(drafters, 1.0f, 5, 512, SPECULA_TREE_AUTO);
        pulled.append_text(kPrompt);
        specula::GenerateOptions go(K);
        go.stop_at_eog = false;
        std::vector<int32_t> got;
        for (int32_t k = 0; k < K; ++k) {
            const specula_token_event ev = pulled.next(go);
            REQUIRE(ev.token != SPECULA_TOKEN_NULL);
            got.push_back(ev.token);
            if (k % 3 != 0) continue;
            specula::Session resumed = make_session(drafters, 1.0f, 99, 512, SPECULA_TREE_AUTO);
            resumed.load(pulled.save());
            std::vector<int32_t> rest;
            for (int32_t j = k + 1; j < K; ++j) {
                const specula_token_event e = resumed.next(go);
                REQUIRE(e.token != SPECULA_TOKEN_NULL);
                rest.push_back(e.token);
            }
            INFO("saved after token " << k);
            CHECK(concat(got, rest) == expected);
        }
        CHECK(got == expected);
    }
}

TEST_CASE("snapshots: a snapshot after any emitted token resumes exactly there", "[snapshot][api]") {
    const Drafters drafters = GENERATE(Drafters::Ngram, Drafters::LongSpecNgram);
    CAPTURE(name_of(drafters));
    constexpr int32_t K = 24;
    specula::Session whole = make_session(drafters, 1.0f, 3);
    whole.append_text(kPrompt);
    const std::vector<int32_t> expected = generate(whole, K);

    // Pull-style, one token per call: the snapshot may fall in the middle of a round's accepted tokens.
    specula::Session pulled = make_session(drafters, 1.0f, 3);
    pulled.append_text(kPrompt);
    specula::GenerateOptions go(K);
    go.stop_at_eog = false;
    std::vector<int32_t> got;
    int mid_round = 0;
    for (int32_t k = 0; k < K; ++k) {
        const specula_token_event ev = pulled.next(go);
        REQUIRE(ev.token != SPECULA_TOKEN_NULL);
        got.push_back(ev.token);
        mid_round += ev.drafted;
        const std::vector<uint8_t> bytes = pulled.save();
        specula::Session resumed = make_session(drafters, 1.0f, 99);
        resumed.load(bytes);
        std::vector<int32_t> rest;
        for (int32_t j = k + 1; j < K; ++j) {
            const specula_token_event e = resumed.next(go);
            REQUIRE(e.token != SPECULA_TOKEN_NULL);
            rest.push_back(e.token);
        }
        CHECK(concat(got, rest) == expected);
    }
    CHECK(got == expected);
    INFO("tokens emitted from a round's accepted path: " << mid_round);
}

TEST_CASE("snapshots: rounds that reach the end of the context save and load up to the last token", "[snapshot][api]") {
    // The target as its own draft accepts every drafted token, so near n_ctx a round's tree fills the context and
    // its pending tokens (accepted path + bonus) reach one past it.
    const int32_t n_ctx = GENERATE(37, 38, 39, 40);  // rounds of 4 tokens: every remainder at the end
    CAPTURE(n_ctx);
    specula::Session s = make_session(Drafters::DraftModel, 0.0f, 42, n_ctx);
    s.append_text(kPrompt);
    std::vector<int32_t> got;
    for (int step = 0; step < n_ctx; ++step) {
        specula::GenerateOptions go(1);
        go.stop_at_eog = false;
        const specula_stop_reason reason = s.generate(go, [&](const specula_token_event &ev) {
            if (ev.token != SPECULA_TOKEN_NULL) got.push_back(ev.token);
            return true;
        });
        const std::vector<uint8_t> bytes = s.save();
        specula::Session resumed = make_session(Drafters::DraftModel, 0.0f, 42, n_ctx);
        resumed.load(bytes);  // every one loads
        CHECK(resumed.tokens() == s.tokens());
        if (reason == SPECULA_STOP_CONTEXT_FULL) break;
    }
    CHECK(s.n_tokens() == n_ctx);
    specula::Session plain = make_session(Drafters::None, 0.0f, 42, n_ctx);
    plain.append_text(kPrompt);
    CHECK(generate(plain, n_ctx) == got);
}

TEST_CASE("snapshots: every damaged or truncated byte is refused and the session keeps working", "[snapshot][api]") {
    // n-gram drafting: every byte of the snapshot; with the LongSpec ring (a larger file): every 61st byte.
    const Drafters drafters = GENERATE(Drafters::Ngram, Drafters::LongSpecNgram);
    const size_t stride = drafters == Drafters::Ngram ? 1 : 61;
    CAPTURE(name_of(drafters));
    specula::Session source = make_session(drafters, 1.0f, 5, 64);
    source.append_text("Once upon a time");
    generate(source, 6);
    const std::vector<uint8_t> good = source.save();
    INFO("snapshot of " << good.size() << " bytes");

    // A session with a context of its own and a twin that never sees a bad snapshot.
    auto prepare = [&] {
        specula::Session s = make_session(drafters, 1.0f, 11, 64);
        s.append_text("Tom had a red ball.");
        generate(s, 4);
        return s;
    };
    specula::Session target = prepare(), twin = prepare();
    const std::vector<int32_t> before = target.tokens();
    const specula_stats stats_before = target.stats();

    specula_error *err = nullptr;
    int64_t refused = 0;
    auto expect_refused = [&](const std::vector<uint8_t> &bad, const std::string &what) {
        const Outcome o = outcome(specula_session_load_buffer(target.get(), bad.data(), bad.size(), &err), &err);
        if (o.status != SPECULA_ERR_FORMAT) FAIL(what << ": status " << specula_status_string(o.status) << " " << o.message);
        if (o.message.empty()) FAIL(what << ": no message");
        if (target.tokens() != before) FAIL(what << ": the context changed");
        if (target.stats().n_generated != stats_before.n_generated) FAIL(what << ": the stats changed");
        ++refused;
    };
    // Each byte flipped (two bit patterns), then cut there; the header and the first section header always.
    for (size_t i = 0; i < good.size(); ++i) {
        if (i >= 168 && i % stride != 0) continue;
        for (uint8_t mask : {uint8_t(0x01), uint8_t(0xA4)}) {
            std::vector<uint8_t> bad = good;
            bad[i] ^= mask;
            expect_refused(bad, "byte " + std::to_string(i) + " ^ " + std::to_string(mask));
        }
        expect_refused(std::vector<uint8_t>(good.begin(), good.begin() + ptrdiff_t(i)), "cut at " + std::to_string(i));
    }
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    expect_refused(longer, "a byte appended");
    INFO("refused " << refused << " damaged snapshots");

    // The refused loads left the session exactly as it was: it continues as its twin does.
    CHECK(generate(target, 12) == generate(twin, 12));
    // And the good snapshot still loads.
    target.load(good);
    CHECK(target.tokens() == source.tokens());
    CHECK(generate(target, 8) == generate(source, 8));
}

TEST_CASE("snapshots: another model, draft, drafter set or n_ctx is refused with its own status", "[snapshot][api]") {
    TempDir dir("specula-snapshots");
    specula::Session source = make_session(Drafters::LongSpec, 0.0f);
    source.append_text(kPrompt);
    generate(source, 10);
    const std::vector<uint8_t> bytes = source.save();
    specula_error *err = nullptr;

    SECTION("a model whose weights differ in one byte (same name, shapes, tokenizer)") {
        const std::string copy = dir.file("stories-changed.gguf");
        fs::copy_file(kModelPath, copy);
        {
            std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
            f.seekg(-3, std::ios::end);
            char c = 0;
            f.read(&c, 1);
            c ^= 0x10;
            f.seekp(-3, std::ios::end);
            f.write(&c, 1);
        }
        const specula::Model other = specula::Model::load(copy);
        CHECK(other.fingerprint() != stories().fingerprint());
        CHECK(other.fingerprint().size() == 32);
        specula::Session s(other);
        s.append_text("Hello");
        const Outcome o = outcome(specula_session_load_buffer(s.get(), bytes.data(), bytes.size(), &err), &err);
        CHECK(o.status == SPECULA_ERR_INCOMPATIBLE);
        CHECK_THAT(o.message, Contains("another model"));
        CHECK(s.n_tokens() == int32_t(stories().tokenize("Hello").size()));
    }
    SECTION("another LongSpec draft, other drafters, none") {
        specula::Draft::write_random(stories(), dir.file("random.gguf"), 3, 64);
        const specula::Draft random = specula::Draft::load(dir.file("random.gguf"), stories());
        specula::Session s = make_session(Drafters::None, 0.0f);
        s.set_speculative(random);
        Outcome o = outcome(specula_session_load_buffer(s.get(), bytes.data(), bytes.size(), &err), &err);
        CHECK(o.status == SPECULA_ERR_INCOMPATIBLE);
        CHECK_THAT(o.message, Contains("another draft"));
        s.clear_speculative();
        o = outcome(specula_session_load_buffer(s.get(), bytes.data(), bytes.size(), &err), &err);
        CHECK(o.status == SPECULA_ERR_INCOMPATIBLE);
        CHECK_THAT(o.message, Contains("'longspec' drafter"));
        specula::Session ng = make_session(Drafters::Ngram, 0.0f);
        o = outcome(specula_session_load_buffer(ng.get(), bytes.data(), bytes.size(), &err), &err);
        CHECK(o.status == SPECULA_ERR_INCOMPATIBLE);
        CHECK(ng.n_tokens() == 0);
    }
    SECTION("a context snapshot loads into any session on the model, and its drafters catch up") {
        const std::vector<uint8_t> context = source.save(specula::SnapshotOptions::context());
        CHECK(context.size() < bytes.size());  // no sampler, no drafter ring
        specula::Session ng = make_session(Drafters::Ngram, 0.0f);
        ng.load(context);
        specula::Session plain = make_session(Drafters::None, 0.0f);
        plain.load(context);
        CHECK(generate(ng, 20) == generate(plain, 20));
        // The evaluated tokens: all of them, or all but a pending last one.
        CHECK(ng.stats().n_restored_tokens >= int32_t(source.tokens().size()) - 1);
        CHECK(ng.stats().n_restored_tokens <= int32_t(source.tokens().size()));
    }
    SECTION("a context that does not fit n_ctx") {
        specula::Session small = make_session(Drafters::LongSpec, 0.0f, 42, 16);
        const Outcome o = outcome(specula_session_load_buffer(small.get(), bytes.data(), bytes.size(), &err), &err);
        CHECK(o.status == SPECULA_ERR_CONTEXT_FULL);
        CHECK_THAT(o.message, Contains("n_ctx 16"));
    }
}

TEST_CASE("snapshots: buffers, files, forks and NULL arguments", "[snapshot][api]") {
    TempDir dir("specula-snapshots");
    specula_error *err = nullptr;
    specula::Session s = make_session(Drafters::Ngram, 1.0f);
    s.append_text(kPrompt);
    generate(s, 16);

    SECTION("two-call buffer: an upper bound, then the bytes") {
        size_t bound = 0;
        Outcome o = outcome(specula_session_save_buffer(s.get(), nullptr, nullptr, 0, &bound, &err), &err);
        CHECK(o.status == SPECULA_ERR_BUFFER_TOO_SMALL);
        std::vector<uint8_t> buf(bound);
        size_t used = 0;
        o = outcome(specula_session_save_buffer(s.get(), nullptr, buf.data(), buf.size(), &used, &err), &err);
        REQUIRE(o.status == SPECULA_OK);
        CHECK(used <= bound);
        CHECK(used < bound);  // compressed
        // A buffer of exactly the compressed size works too; one byte less does not.
        std::vector<uint8_t> exact(used);
        size_t used2 = 0;
        o = outcome(specula_session_save_buffer(s.get(), nullptr, exact.data(), exact.size(), &used2, &err), &err);
        CHECK(o.status == SPECULA_OK);
        CHECK(used2 == used);
        CHECK(std::memcmp(exact.data(), buf.data(), used) == 0);  // deterministic bytes
        o = outcome(specula_session_save_buffer(s.get(), nullptr, exact.data(), used - 1, &used2, &err), &err);
        CHECK(o.status == SPECULA_ERR_BUFFER_TOO_SMALL);
        CHECK(used2 == bound);
        // Uncompressed (level 0) is the bound's size.
        specula::SnapshotOptions raw;
        raw.compression_level = 0;
        CHECK(s.save(raw).size() == bound);
    }
    SECTION("files: atomic save, load, IO errors") {
        const std::string path = dir.file("s.snap");
        s.save_file(path);
        for (const auto &e : fs::directory_iterator(dir.path)) CHECK(e.path().filename() == "s.snap");  // no temporaries left
        specula::Session t = make_session(Drafters::Ngram, 1.0f, 1);
        t.load_file(path);
        CHECK(generate(t, 10) == generate(s, 10));
        Outcome o = outcome(specula_session_load_file(t.get(), dir.file("missing.snap").c_str(), &err), &err);
        CHECK(o.status == SPECULA_ERR_IO);
        o = outcome(specula_session_save_file(t.get(), (dir.path / "no-dir" / "x.snap").c_str(), nullptr, &err), &err);
        CHECK(o.status == SPECULA_ERR_IO);
        // A file that is not a snapshot.
        o = outcome(specula_session_load_file(t.get(), kModelPath.c_str(), &err), &err);
        CHECK(o.status == SPECULA_ERR_FORMAT);
        CHECK_THAT(o.message, Contains("not a Specula snapshot"));
    }
    SECTION("fork: the copy continues exactly as the original") {
        specula::Session copy = make_session(Drafters::Ngram, 1.0f, 1234);
        s.fork_into(copy);
        CHECK(copy.tokens() == s.tokens());
        CHECK(generate(copy, 20) == generate(s, 20));
        Outcome o = outcome(specula_session_fork(s.get(), s.get(), nullptr, &err), &err);
        CHECK(o.status == SPECULA_ERR_INVALID_ARGUMENT);
    }
    SECTION("NULL arguments and bad options") {
        size_t n = 0;
        CHECK(outcome(specula_session_save_file(nullptr, dir.file("x").c_str(), nullptr, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_session_save_file(s.get(), nullptr, nullptr, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_session_load_file(s.get(), nullptr, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_session_load_buffer(nullptr, "x", 1, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_session_load_buffer(s.get(), nullptr, 5, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_session_save_buffer(s.get(), nullptr, nullptr, 0, nullptr, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_session_fork(nullptr, s.get(), nullptr, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        specula_snapshot_options o;
        specula_snapshot_options_init(&o);
        CHECK(o.struct_size == sizeof o);
        CHECK(o.scope == SPECULA_SNAPSHOT_FULL);
        CHECK(o.compression_level == 1);
        o.scope = 7;
        CHECK(outcome(specula_session_save_buffer(s.get(), &o, nullptr, 0, &n, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        specula_snapshot_options_init(&o);
        o.compression_level = 40;
        CHECK(outcome(specula_session_save_buffer(s.get(), &o, nullptr, 0, &n, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        char hex[40];
        size_t len = 0;
        CHECK(outcome(specula_model_fingerprint(nullptr, hex, sizeof hex, &len, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_model_fingerprint(stories().get(), hex, 8, &len, &err), &err).status == SPECULA_ERR_BUFFER_TOO_SMALL);
        CHECK(len == 32);
        CHECK(outcome(specula_model_fingerprint(stories().get(), hex, sizeof hex, &len, &err), &err).status == SPECULA_OK);
        CHECK(std::string(hex) == stories().fingerprint());
        specula_prompt_cache *cache = nullptr;
        CHECK(outcome(specula_prompt_cache_open(nullptr, nullptr, &cache, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_prompt_cache_restore(nullptr, s.get(), nullptr, 0, &n, &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(outcome(specula_prompt_cache_store(nullptr, s.get(), &err), &err).status == SPECULA_ERR_INVALID_ARGUMENT);
        specula_prompt_cache_destroy(nullptr);
    }
}

TEST_CASE("prompt cache: the longest cached prefix is restored and the output is what an uncached run gives", "[snapshot][api]") {
    TempDir dir("specula-snapshots");
    const Drafters drafters = GENERATE(Drafters::None, Drafters::LongSpecNgram);
    const float temperature = GENERATE(0.0f, 1.0f);
    CAPTURE(name_of(drafters), temperature);
    specula::PromptCache cache(dir.file("cache"));
    const std::vector<int32_t> prompt = stories().tokenize(kPrompt);
    const std::vector<int32_t> other = stories().tokenize("Once upon a time, there was a big dog named Max. He liked to");

    // Miss: nothing cached yet; then the context (prompt + output) is stored.
    specula::Session a = make_session(drafters, temperature);
    CHECK(cache.restore(a, prompt) == 0);
    a.append_tokens(prompt);
    const std::vector<int32_t> a_out = generate(a, 20);
    cache.store(a);
    specula_prompt_cache_stats st = cache.stats();
    CHECK(st.n_entries == 1);
    CHECK(st.misses == 1);
    CHECK(st.stores == 1);

    // The same prompt again: all of it is restored, the output is the uncached one.
    specula::Session b = make_session(drafters, temperature);
    CHECK(cache.restore(b, prompt) == prompt.size());
    CHECK(b.tokens() == prompt);
    CHECK(generate(b, 20) == a_out);
    CHECK(b.stats().n_restored_tokens == int32_t(prompt.size()) - 1);  // the last prompt token is evaluated again for its logits

    // A prompt sharing only its beginning: that prefix is restored, the rest evaluated, the output uncached-exact.
    size_t shared = 0;
    while (shared < other.size() && other[shared] == prompt[shared]) ++shared;
    REQUIRE(shared > 2);
    specula::Session c = make_session(drafters, temperature);
    CHECK(cache.restore(c, other) == shared);
    c.append_tokens(other.data() + shared, other.size() - shared);
    specula::Session uncached = make_session(drafters, temperature);
    uncached.append_tokens(other);
    CHECK(generate(c, 20) == generate(uncached, 20));
    st = cache.stats();
    CHECK(st.hits == 2);
    CHECK(st.restored_tokens == int64_t(prompt.size() + shared));

    // b generated what a did: the same context, nothing new is written.
    REQUIRE(b.tokens() == a.tokens());
    cache.store(b);
    CHECK(cache.stats().n_entries == 1);
    CHECK(cache.stats().stores == 1);
    // A context extending an entry replaces it: the entry is a prefix of the new one.
    specula::Session d = make_session(drafters, temperature);
    CHECK(cache.restore(d, a.tokens()) == a.tokens().size());
    generate(d, 5);
    cache.store(d);
    st = cache.stats();
    CHECK(st.n_entries == 1);
    CHECK(st.stores == 2);
    CHECK(st.evictions == 1);
}

TEST_CASE("prompt cache: size limit, damaged entries, another model, several handles on one directory", "[snapshot][api][concurrency]") {
    TempDir dir("specula-snapshots");
    const std::string path = dir.file("cache");
    auto context_of = [](const std::string &text) {
        specula::Session s = make_session(Drafters::None, 0.0f);
        s.append_text(text);
        generate(s, 8);
        return s;
    };
    specula::Session s1 = context_of("One day a cat sat on a mat.");
    specula::Session s2 = context_of("The sun was hot and the sky was blue.");
    specula::Session s3 = context_of("Lily found a shiny stone in the garden.");

    SECTION("least recently used entries go first") {
        specula::PromptCache probe(path, 0);
        probe.store(s1);
        const uint64_t one = probe.stats().bytes;
        REQUIRE(one > 0);
        fs::remove_all(path);
        specula::PromptCache cache(path, 2 * one + one / 2);  // room for two entries
        cache.store(s1);
        cache.store(s2);
        specula::Session user = make_session(Drafters::None, 0.0f);
        CHECK(cache.restore(user, s1.tokens()) > 0);  // s1 is now the most recently used
        cache.store(s3);                              // over the limit: s2 goes
        const specula_prompt_cache_stats st = cache.stats();
        CHECK(st.n_entries == 2);
        CHECK(st.bytes <= 2 * one + one / 2);
        CHECK(st.evictions == 1);
        specula::Session u2 = make_session(Drafters::None, 0.0f);
        CHECK(cache.restore(u2, s2.tokens()) < 4);  // gone (a few tokens of "The" may match another entry)
        specula::Session u1 = make_session(Drafters::None, 0.0f);
        CHECK(cache.restore(u1, s1.tokens()) == s1.tokens().size());
    }
    SECTION("a damaged entry is deleted and counts as a miss") {
        specula::PromptCache cache(path);
        cache.store(s1);
        fs::path entry;
        for (const auto &e : fs::recursive_directory_iterator(path))
            if (e.path().extension() == ".snap") entry = e.path();
        REQUIRE(!entry.empty());
        {
            std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-60, std::ios::end);
            f.put('\x7f');
        }
        specula::PromptCache fresh(path);  // another handle: reads the damaged file's tokens (intact) ...
        specula::Session user = make_session(Drafters::None, 0.0f);
        user.append_text("unchanged");
        const std::vector<int32_t> before = user.tokens();
        CHECK(fresh.restore(user, s1.tokens()) == 0);  // ... and refuses its KV: deleted, a miss
        CHECK(user.tokens() == before);
        CHECK(fresh.stats().misses == 1);
        CHECK(fresh.stats().n_entries == 0);
    }
    SECTION("entries of another model are not used") {
        specula::PromptCache cache(path);
        cache.store(s1);
        const std::string copy = dir.file("changed.gguf");
        fs::copy_file(kModelPath, copy);
        {
            std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-5, std::ios::end);
            f.put('\x01');
        }
        const specula::Model other = specula::Model::load(copy);
        specula::Session s(other);
        CHECK(cache.restore(s, s1.tokens()) == 0);
        CHECK(s.n_tokens() == 0);
    }
    SECTION("two handles (as two processes) share the directory") {
        specula::PromptCache a(path), b(path);
        a.store(s1);
        specula::Session user = make_session(Drafters::None, 0.0f);
        CHECK(b.restore(user, s1.tokens()) == s1.tokens().size());
        CHECK(b.stats().n_entries == 1);
    }
}
