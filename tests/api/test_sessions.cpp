// Sessions through the public API (libspecula.so): cancellation, threads, model lifetime, a full context, token
// validation, rewind, stop strings, seeding, load cancellation and versioned options structs.
//
// Statuses are checked on the C functions themselves (what every binding sees); specula.hpp provides the RAII
// handles and is exercised on the way.
#include <specula/specula.hpp>

#include <catch2/catch.hpp>

#include "common/skip.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";
const std::string kPrompt = "Once upon a time, there was a little girl named Lily.";

// One model for the tests that do not care about its lifetime (loading is cheap, but there is no need).
const specula::Model &shared_model() {
    static const specula::Model model = specula::Model::load(kModelPath);
    return model;
}

specula::SamplerOptions greedy() { return specula::SamplerOptions::greedy(); }

// Plain T = 1 sampling over the whole distribution, seeded.
specula::SamplerOptions seeded(uint64_t seed) {
    specula::SamplerOptions s;
    s.temperature = 1.0f;
    s.top_k = 0;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    s.seed = seed;
    return s;
}

specula::Session make_session(const specula::Model &model, const specula::SamplerOptions &sampler = greedy(),
                              int32_t n_ctx = 512) {
    specula::SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_threads = 1;
    return specula::Session(model, so, sampler);
}

// What one specula_session_generate call produced.
struct Run {
    specula_status status = SPECULA_OK;
    specula_stop_reason reason = SPECULA_STOP_NONE;
    std::string message;
    std::vector<int32_t> tokens;
    std::string text;
    int events = 0;
};

int32_t collect(const specula_token_event *ev, void *user) {
    auto *run = static_cast<Run *>(user);
    ++run->events;
    if (ev->token != SPECULA_TOKEN_NULL) run->tokens.push_back(ev->token);
    run->text.append(ev->text, ev->text_len);
    return 1;
}

// Generates with the C API. stop_at_eog is off by default so that runs have a predictable length.
Run generate(specula_session *s, int32_t max_tokens, const std::vector<std::string> &stops = {},
             bool stop_at_eog = false) {
    std::vector<const char *> ptrs;
    for (const auto &str : stops) ptrs.push_back(str.c_str());
    specula_generate_options go;
    specula_generate_options_init(&go);
    go.max_tokens = max_tokens;
    go.stop_at_eog = stop_at_eog ? 1 : 0;
    go.stop_strings = ptrs.empty() ? nullptr : ptrs.data();
    go.n_stop_strings = static_cast<int32_t>(ptrs.size());
    Run run;
    specula_error *err = nullptr;
    run.status = specula_session_generate(s, &go, collect, &run, &run.reason, &err);
    run.message = specula_error_message(err);
    specula_error_destroy(err);
    return run;
}

specula_status append(specula_session *s, const std::vector<int32_t> &tokens) {
    return specula_session_append_tokens(s, tokens.data(), tokens.size(), nullptr);
}

}  // namespace

TEST_CASE("cancel from another thread stops generation within one step", "[session][cancel][concurrency]") {
    specula::Session s = make_session(shared_model());
    s.append_text(kPrompt);
    const int32_t n_prompt = s.n_tokens();

    struct State {
        std::atomic<int> tokens{0};
        std::atomic<bool> first{false};
        std::atomic<bool> cancel_done{false};
        bool wait_for_cancel = false;  // block in the first callback until cancel() has returned
    } st;

    specula_token_fn slow_callback = [](const specula_token_event *ev, void *user) -> int32_t {
        auto *state = static_cast<State *>(user);
        if (ev->token != SPECULA_TOKEN_NULL) state->tokens.fetch_add(1);
        state->first.store(true);
        if (state->wait_for_cancel) {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!state->cancel_done.load() && std::chrono::steady_clock::now() < deadline)
                std::this_thread::yield();
        } else {
            // Slow the tiny model down so the run cannot finish before the other thread gets to cancel it.
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return 1;
    };

    SECTION("while the generating thread is busy") { st.wait_for_cancel = false; }
    SECTION("while the generating thread sits in its callback") { st.wait_for_cancel = true; }

    int tokens_when_cancelled = -1;
    std::thread canceller([&] {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!st.first.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        s.cancel();
        tokens_when_cancelled = st.tokens.load();  // read after cancel() returned: anything later is "after"
        st.cancel_done.store(true);
    });

    specula_generate_options go;
    specula_generate_options_init(&go);
    go.max_tokens = -1;  // until the context is full: far longer than the test waits
    go.stop_at_eog = 0;
    specula_stop_reason reason = SPECULA_STOP_NONE;
    specula_error *err = nullptr;
    const specula_status status = specula_session_generate(s.get(), &go, slow_callback, &st, &reason, &err);
    canceller.join();
    INFO("message: " << specula_error_message(err));
    specula_error_destroy(err);

    CHECK(status == SPECULA_ERR_CANCELLED);
    CHECK(reason == SPECULA_STOP_CANCELLED);
    REQUIRE(tokens_when_cancelled >= 1);
    CHECK(st.tokens.load() - tokens_when_cancelled <= 2);
    CHECK(st.tokens.load() < s.n_ctx() - n_prompt);
    // Tokens generated before the cancel stay in the context.
    CHECK(s.n_tokens() == n_prompt + st.tokens.load());

    // The cancel request was consumed: the next call runs normally.
    const Run next = generate(s.get(), 4);
    CHECK(next.status == SPECULA_OK);
    CHECK(next.reason == SPECULA_STOP_MAX_TOKENS);
    CHECK(next.tokens.size() == 4);
}

TEST_CASE("cancel before generate returns CANCELLED at once and is consumed", "[session][cancel]") {
    specula::Session s = make_session(shared_model());
    s.append_text(kPrompt);
    const int32_t n_prompt = s.n_tokens();

    SECTION("generate") {
        specula_session_cancel(s.get());
        const Run run = generate(s.get(), 8);
        CHECK(run.status == SPECULA_ERR_CANCELLED);
        CHECK(run.reason == SPECULA_STOP_CANCELLED);
        CHECK(run.tokens.empty());
        CHECK_FALSE(run.message.empty());
        CHECK(s.n_tokens() == n_prompt);
    }
    SECTION("next") {
        specula_session_cancel(s.get());
        specula_token_event ev{};
        ev.struct_size = sizeof ev;
        CHECK(specula_session_next(s.get(), nullptr, &ev, nullptr) == SPECULA_ERR_CANCELLED);
        CHECK(ev.stop == SPECULA_STOP_CANCELLED);
        CHECK(ev.token == SPECULA_TOKEN_NULL);
    }
    SECTION("through specula.hpp, which reports it as a stop reason") {
        s.cancel();
        CHECK(s.generate(specula::GenerateOptions(8)) == SPECULA_STOP_CANCELLED);
    }

    const Run run = generate(s.get(), 8);
    CHECK(run.status == SPECULA_OK);
    CHECK(run.reason == SPECULA_STOP_MAX_TOKENS);
    CHECK(run.tokens.size() == 8);
}

TEST_CASE("two sessions on one model in two threads match one session alone", "[session][threads][concurrency]") {
    const specula::Model &model = shared_model();
    const bool use_greedy = GENERATE(true, false);
    const specula::SamplerOptions sampler = use_greedy ? greedy() : seeded(1234);
    INFO((use_greedy ? "greedy" : "seeded T=1"));

    auto run_alone = [&] {
        specula::Session s = make_session(model, sampler);
        s.append_text(kPrompt);
        return generate(s.get(), 64).tokens;
    };
    const std::vector<int32_t> expected = run_alone();
    REQUIRE(expected.size() == 64);

    for (int round = 0; round < 3; ++round) {
        std::vector<int32_t> results[2];
        std::exception_ptr errors[2];
        std::thread threads[2];
        for (int t = 0; t < 2; ++t) {
            threads[t] = std::thread([&, t] {
                try {
                    results[t] = run_alone();
                } catch (...) {
                    errors[t] = std::current_exception();
                }
            });
        }
        for (auto &th : threads) th.join();
        for (int t = 0; t < 2; ++t) {
            if (errors[t]) std::rethrow_exception(errors[t]);
            CHECK(results[t] == expected);
        }
    }
}

// The model's vocabulary for grammars is made on first use and shared: sessions with grammars started at once on a
// fresh model race to make it (ThreadSanitizer watches); each gets the text one session alone gets.
TEST_CASE("sessions with grammars started at once on a fresh model share its grammar vocabulary and match one alone",
          "[session][threads][grammar][concurrency]") {
    specula::SamplerOptions sampler = seeded(7);
    sampler.set_grammar(R"(root ::= " " [a-z]+ (" " [a-z]+){3,8} ".")");
    auto run = [&](const specula::Model &model) {
        specula::Session s = make_session(model, sampler);
        s.append_text(kPrompt);
        return generate(s.get(), 48).tokens;
    };
    const std::vector<int32_t> expected = run(specula::Model::load(kModelPath));
    REQUIRE(!expected.empty());
    for (int round = 0; round < 3; ++round) {
        const specula::Model model = specula::Model::load(kModelPath);
        std::vector<int32_t> results[4];
        std::exception_ptr errors[4];
        std::thread threads[4];
        for (int t = 0; t < 4; ++t) {
            threads[t] = std::thread([&, t] {
                try {
                    results[t] = run(model);
                } catch (...) {
                    errors[t] = std::current_exception();
                }
            });
        }
        for (auto &th : threads) th.join();
        for (int t = 0; t < 4; ++t) {
            if (errors[t]) std::rethrow_exception(errors[t]);
            CHECK(results[t] == expected);
        }
    }
}

TEST_CASE("destroying the model before its session is fine", "[session][lifetime][concurrency]") {
    specula_model *model = nullptr;
    REQUIRE(specula_model_load(kModelPath.c_str(), nullptr, &model, nullptr) == SPECULA_OK);
    specula_session *session = nullptr;
    REQUIRE(specula_session_create(model, nullptr, nullptr, &session, nullptr) == SPECULA_OK);
    specula_model_destroy(model);  // the session still holds its own reference

    REQUIRE(specula_session_append_text(session, kPrompt.data(), kPrompt.size(), SPECULA_TOKENIZE_ADD_SPECIAL,
                                        nullptr) == SPECULA_OK);
    const Run run = generate(session, 16);
    CHECK(run.status == SPECULA_OK);
    CHECK(run.tokens.size() == 16);
    specula_session_destroy(session);

    SECTION("and with the C++ handles, including copies") {
        specula::Model m = specula::Model::load(kModelPath);
        specula::Model copy = m;  // specula_model_retain
        specula::Session s = make_session(copy);
        m.reset();
        copy.reset();
        s.append_text(kPrompt);
        CHECK(s.generate(specula::GenerateOptions(8)) == SPECULA_STOP_MAX_TOKENS);
    }
}

TEST_CASE("a full context stops generation and refuses appends", "[session][context]") {
    specula::Session s = make_session(shared_model(), greedy(), 16);
    REQUIRE(s.n_ctx() == 16);
    s.append_text("Once upon a time");
    const int32_t n_prompt = s.n_tokens();
    REQUIRE(n_prompt < 16);

    const int32_t max_tokens = GENERATE(-1, 100);
    INFO("max_tokens " << max_tokens);
    const Run run = generate(s.get(), max_tokens);
    CHECK(run.status == SPECULA_OK);  // tokens were generated: a normal stop
    CHECK(run.reason == SPECULA_STOP_CONTEXT_FULL);
    CHECK(run.tokens.size() == size_t(16 - n_prompt));
    CHECK(s.n_tokens() == 16);

    const int32_t one = 1;
    specula_error *err = nullptr;
    CHECK(specula_session_append_tokens(s.get(), &one, 1, &err) == SPECULA_ERR_CONTEXT_FULL);
    CHECK(specula_error_status(err) == SPECULA_ERR_CONTEXT_FULL);
    CHECK(std::strlen(specula_error_message(err)) > 0);
    specula_error_destroy(err);
    CHECK(specula_session_append_text(s.get(), " and", 4, 0, nullptr) == SPECULA_ERR_CONTEXT_FULL);
    CHECK(s.n_tokens() == 16);

    // Nothing more can be generated: CONTEXT_FULL as a status now.
    const Run again = generate(s.get(), 10);
    CHECK(again.status == SPECULA_ERR_CONTEXT_FULL);
    CHECK(again.reason == SPECULA_STOP_CONTEXT_FULL);
    CHECK(again.tokens.empty());
    CHECK(s.n_tokens() == 16);

    // After a rewind there is room again.
    s.rewind(n_prompt);
    CHECK(append(s.get(), {one}) == SPECULA_OK);
}

TEST_CASE("with the context shift a full context drops old tokens and generation goes on", "[session][context][shift]") {
    specula::SessionOptions so;
    CHECK(so.context_policy == SPECULA_CONTEXT_STOP);  // the default
    CHECK(so.n_keep == 4);
    CHECK(so.n_discard == 0);
    so.n_ctx = 32;
    so.n_threads = 1;
    so.context_policy = SPECULA_CONTEXT_SHIFT;
    specula::Session s(shared_model(), so, greedy());
    s.append_text("Once upon a time");
    const int32_t n_prompt = s.n_tokens();
    // Unbounded generation stops only at max_tokens now: ask for 200 in a context of 32.
    const Run run = generate(s.get(), 200);
    CHECK(run.status == SPECULA_OK);
    CHECK(run.reason == SPECULA_STOP_MAX_TOKENS);
    CHECK(run.tokens.size() == 200);
    CHECK(s.n_tokens() <= 32);
    const specula_stats st = s.stats();
    // Each shift drops (32 - 4) / 2 = 14 tokens; the context holds the prompt and 200 tokens less those.
    CHECK(st.n_context_shifts >= (n_prompt + 200 - 32) / 14);
    CHECK(st.n_discarded_tokens == int64_t(st.n_context_shifts) * 14);
    CHECK(s.n_tokens() == n_prompt + 200 - st.n_discarded_tokens);
    CHECK(st.n_ctx_used == s.n_tokens());
    // The sinks are still the prompt's first tokens.
    specula::Session fresh = make_session(shared_model(), greedy(), 32);
    fresh.append_text("Once upon a time");
    const std::vector<int32_t> now = s.tokens(), prompt = fresh.tokens();
    REQUIRE(prompt.size() >= 4);
    CHECK(std::vector<int32_t>(now.begin(), now.begin() + 4) == std::vector<int32_t>(prompt.begin(), prompt.begin() + 4));

    // Policies and sizes are checked.
    specula_session *bad = nullptr;
    specula_session_options o = so;
    o.context_policy = 7;
    CHECK(specula_session_create(shared_model().get(), &o, nullptr, &bad, nullptr) == SPECULA_ERR_INVALID_ARGUMENT);
    o = so;
    o.n_keep = 31;  // n_ctx - 1: no room to drop anything
    CHECK(specula_session_create(shared_model().get(), &o, nullptr, &bad, nullptr) == SPECULA_ERR_INVALID_ARGUMENT);
    o = so;
    o.n_discard = 28;  // with 4 kept, nothing would be left
    CHECK(specula_session_create(shared_model().get(), &o, nullptr, &bad, nullptr) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(bad == nullptr);
}

TEST_CASE("a prompt longer than the context is refused whole", "[session][context]") {
    specula::Session s = make_session(shared_model(), greedy(), 16);
    const std::vector<int32_t> many(17, 300);
    CHECK(append(s.get(), many) == SPECULA_ERR_CONTEXT_FULL);
    CHECK(s.n_tokens() == 0);
    const std::vector<int32_t> exact(16, 300);
    CHECK(append(s.get(), exact) == SPECULA_OK);
    CHECK(s.n_tokens() == 16);
}

TEST_CASE("out-of-range token ids are refused and nothing is appended", "[session][tokens]") {
    const specula::Model &model = shared_model();
    specula::Session s = make_session(model);
    REQUIRE(append(s.get(), {1, 5}) == SPECULA_OK);

    const int32_t bad = GENERATE_COPY(-1, model.n_vocab(), 99999, INT32_MAX, INT32_MIN);
    INFO("bad id " << bad);
    specula_error *err = nullptr;
    const std::vector<int32_t> batch = {7, 8, bad, 9};  // valid ids before and after: still all or nothing
    CHECK(specula_session_append_tokens(s.get(), batch.data(), batch.size(), &err) == SPECULA_ERR_INVALID_TOKEN);
    CHECK(specula_error_status(err) == SPECULA_ERR_INVALID_TOKEN);
    const std::string c_message = specula_error_message(err);
    CHECK_FALSE(c_message.empty());
    specula_error_destroy(err);

    CHECK(s.n_tokens() == 2);
    CHECK(s.tokens() == std::vector<int32_t>{1, 5});

    // The C++ wrapper turns it into specula::Error with the same status and the library's message.
    try {
        s.append_tokens(batch);
        FAIL("append_tokens did not throw");
    } catch (const specula::Error &e) {
        CHECK(e.status() == SPECULA_ERR_INVALID_TOKEN);
        CHECK(std::string(e.what()) == c_message);
    }
    CHECK(s.n_tokens() == 2);
}

TEST_CASE("rewind and regenerate greedily gives the same continuation", "[session][rewind]") {
    specula::Session s = make_session(shared_model());
    s.append_text(kPrompt);
    const int32_t n_prompt = s.n_tokens();
    const Run first = generate(s.get(), 32);
    REQUIRE(first.tokens.size() == 32);
    REQUIRE(s.n_tokens() == n_prompt + 32);

    SECTION("to the end of the prompt") {
        s.rewind(n_prompt);
        CHECK(s.n_tokens() == n_prompt);
        CHECK(s.logits() == nullptr);  // documented: no logits after a rewind
        const Run again = generate(s.get(), 32);
        CHECK(again.tokens == first.tokens);
        CHECK(again.text == first.text);  // the streaming text state was reset too
    }
    SECTION("into the generated part") {
        s.rewind(n_prompt + 10);
        CHECK(s.n_tokens() == n_prompt + 10);
        const Run again = generate(s.get(), 22);
        CHECK(again.tokens == std::vector<int32_t>(first.tokens.begin() + 10, first.tokens.end()));
    }
    SECTION("to nothing, then the same prompt again") {
        s.rewind(0);
        CHECK(s.n_tokens() == 0);
        s.append_text(kPrompt);
        CHECK(s.n_tokens() == n_prompt);
        const Run again = generate(s.get(), 32);
        CHECK(again.tokens == first.tokens);
    }
    SECTION("out of range") {
        CHECK(specula_session_rewind(s.get(), -1, nullptr) == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(specula_session_rewind(s.get(), s.n_tokens() + 1, nullptr) == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(s.n_tokens() == n_prompt + 32);
    }
}

TEST_CASE("stop strings cut the text before the stop string", "[session][stop]") {
    specula::Session s = make_session(shared_model());
    s.append_text(kPrompt);
    const int32_t n_prompt = s.n_tokens();
    const Run full = generate(s.get(), 64);
    REQUIRE(full.reason == SPECULA_STOP_MAX_TOKENS);
    REQUIRE(full.text.size() > 20);

    // A stop string taken from the middle of the greedy text, so it is known to occur; the expected output is
    // everything before its first occurrence.
    const std::string stop = full.text.substr(full.text.size() / 2, 5);
    const size_t cut = full.text.find(stop);
    INFO("stop string '" << stop << "' at " << cut << " in: " << full.text);

    SECTION("one stop string") {
        s.rewind(n_prompt);
        const Run run = generate(s.get(), 64, {stop});
        CHECK(run.status == SPECULA_OK);
        CHECK(run.reason == SPECULA_STOP_STOP_STRING);
        CHECK(run.text == full.text.substr(0, cut));
        CHECK(run.tokens.size() < full.tokens.size());
    }
    SECTION("the earliest of several wins") {
        s.rewind(n_prompt);
        const Run run = generate(s.get(), 64, {"\x01never", stop, full.text.substr(cut + 1, 6)});
        CHECK(run.reason == SPECULA_STOP_STOP_STRING);
        CHECK(run.text == full.text.substr(0, std::min(cut, full.text.find(full.text.substr(cut + 1, 6)))));
    }
    SECTION("text held back for a stop string that never completes is flushed at the end") {
        // Starts like the end of the output, so the library must hold the tail back until the run ends.
        const std::string tail = full.text.substr(full.text.size() - 3) + "\x01";
        s.rewind(n_prompt);
        const Run run = generate(s.get(), 64, {tail});
        CHECK(run.reason == SPECULA_STOP_MAX_TOKENS);
        CHECK(run.text == full.text);
    }
    SECTION("via specula.hpp") {
        s.rewind(n_prompt);
        specula::GenerateOptions go(64);
        go.stop_at_eog = false;
        go.stop_strings = {stop};
        std::string text;
        const auto reason = s.generate(go, [&](const specula_token_event &ev) {
            text.append(ev.text, ev.text_len);
            return true;
        });
        CHECK(reason == SPECULA_STOP_STOP_STRING);
        CHECK(text == full.text.substr(0, cut));
    }
}

TEST_CASE("seeded sampling is reproducible", "[session][sampling]") {
    const specula::Model &model = shared_model();
    auto sample = [&](uint64_t seed) {
        specula::Session s = make_session(model, seeded(seed));
        s.append_text(kPrompt);
        return generate(s.get(), 64).tokens;
    };
    const std::vector<int32_t> a = sample(1234);
    REQUIRE(a.size() == 64);
    CHECK(sample(1234) == a);
    CHECK(sample(4321) != a);  // 64 tokens at T = 1: equal only by an astronomically unlikely accident

    SECTION("set_sampler reseeds") {
        specula::Session s = make_session(model, seeded(99));
        s.append_text(kPrompt);
        const int32_t n_prompt = s.n_tokens();
        generate(s.get(), 16);  // move the RNG on
        s.rewind(n_prompt);
        s.set_sampler(seeded(1234));
        CHECK(generate(s.get(), 64).tokens == a);
    }
}

TEST_CASE("each token reports its log-probability and the distribution it was drawn from", "[session][sampling]") {
    // What llama-server's n_probs needs: logit - logsumexp is a log-probability before sampling; top_probs is the
    // distribution after the chain (post_sampling_probs). The same reports with n-gram speculation as without.
    struct Report {
        std::vector<int32_t> tokens;
        std::vector<float> lse, token_logit, token_prob, top_logit0;
        std::vector<std::vector<int32_t>> prob_ids;
        std::vector<std::vector<float>> probs;
    };
    auto run = [](specula::Session &s, int32_t n) {
        specula::GenerateOptions go(n);
        go.stop_at_eog = false;
        go.top_logits = 5;
        go.top_probs = 10;
        Report r;
        s.generate(go, [&](const specula_token_event &ev) {
            if (ev.token == SPECULA_TOKEN_NULL) return true;
            REQUIRE(ev.struct_size >= sizeof(specula_token_event));
            r.tokens.push_back(ev.token);
            r.lse.push_back(ev.logsumexp);
            r.token_logit.push_back(ev.token_logit);
            r.token_prob.push_back(ev.token_prob);
            r.top_logit0.push_back(ev.top_logits[0]);
            r.prob_ids.emplace_back(ev.top_prob_ids, ev.top_prob_ids + ev.n_top_probs);
            r.probs.emplace_back(ev.top_probs, ev.top_probs + ev.n_top_probs);
            return true;
        });
        return r;
    };
    const specula::Model &model = shared_model();

    SECTION("greedy: the argmax with p = 1, then the rest at 0, and log-probabilities at most 0") {
        specula::Session s = make_session(model);
        s.append_text(kPrompt);
        const Report r = run(s, 16);
        REQUIRE(r.tokens.size() == 16);
        for (size_t i = 0; i < r.tokens.size(); ++i) {
            REQUIRE(r.probs[i].size() == 10);
            CHECK(r.prob_ids[i][0] == r.tokens[i]);
            CHECK(r.probs[i][0] == 1.0f);
            CHECK(r.token_prob[i] == 1.0f);
            for (size_t k = 1; k < 10; ++k) CHECK(r.probs[i][k] == 0.0f);
            CHECK(r.token_logit[i] == r.top_logit0[i]);  // greedy takes the largest logit
            CHECK(r.token_logit[i] - r.lse[i] <= 0.0f);
            CHECK(r.lse[i] > r.top_logit0[i]);  // other tokens have some mass
        }
        // With n-gram speculation: the same tokens and the same reports, bit for bit.
        specula::Session spec = make_session(model);
        specula::SpeculativeOptions so;
        so.ngram = 1;
        spec.set_speculative(so);
        spec.append_text(kPrompt);
        const Report q = run(spec, 16);
        CHECK(q.tokens == r.tokens);
        CHECK(q.lse == r.lse);
        CHECK(q.token_logit == r.token_logit);
        CHECK(q.prob_ids == r.prob_ids);
    }

    SECTION("T = 1 over the whole vocabulary: the probabilities are the softmax of the logits") {
        specula::Session s = make_session(model, seeded(7));
        s.append_text(kPrompt);
        const Report r = run(s, 16);
        for (size_t i = 0; i < r.tokens.size(); ++i) {
            CHECK(std::abs(std::exp(double(r.token_logit[i]) - r.lse[i]) - r.token_prob[i]) < 1e-5);
            CHECK(std::abs(std::exp(double(r.top_logit0[i]) - r.lse[i]) - r.probs[i][0]) < 1e-5);
            for (size_t k = 1; k < r.probs[i].size(); ++k) CHECK(r.probs[i][k] <= r.probs[i][k - 1]);
        }
    }
}

TEST_CASE("a progress callback returning 0 cancels the load", "[model][load]") {
    struct Calls {
        int n = 0;
        int cancel_at = 1;  // return 0 on this call
        float last = -1.0f;
        bool in_range = true, monotonic = true;
    };
    specula_progress_fn fn = [](float p, void *user) -> int32_t {
        auto *c = static_cast<Calls *>(user);
        ++c->n;
        if (!(p >= 0.0f && p <= 1.0f)) c->in_range = false;
        if (p < c->last) c->monotonic = false;
        c->last = p;
        return c->n == c->cancel_at ? 0 : 1;
    };
    specula_model_options mo;
    specula_model_options_init(&mo);
    mo.progress = fn;

    // A full load first: how often is progress reported, and are the values sane?
    Calls full;
    full.cancel_at = -1;
    mo.progress_user_data = &full;
    specula_model *model = nullptr;
    REQUIRE(specula_model_load(kModelPath.c_str(), &mo, &model, nullptr) == SPECULA_OK);
    specula_model_destroy(model);
    REQUIRE(full.n >= 1);
    CHECK(full.in_range);
    CHECK(full.monotonic);

    // Then cancel at the first report and, when there are several, at the last one.
    for (int cancel_at : {1, full.n}) {
        Calls c;
        c.cancel_at = cancel_at;
        mo.progress_user_data = &c;
        model = reinterpret_cast<specula_model *>(&c);  // must be overwritten with NULL
        specula_error *err = nullptr;
        CHECK(specula_model_load(kModelPath.c_str(), &mo, &model, &err) == SPECULA_ERR_CANCELLED);
        CHECK(specula_error_status(err) == SPECULA_ERR_CANCELLED);
        CHECK(model == nullptr);
        CHECK(c.n == cancel_at);  // no further calls once cancelled
        specula_error_destroy(err);
    }

    SECTION("through specula.hpp: false cancels, an exception is rethrown as is") {
        specula::ModelOptions opts;
        opts.progress = [](float) { return false; };
        try {
            specula::Model::load(kModelPath, opts);
            FAIL("load was not cancelled");
        } catch (const specula::Error &e) {
            CHECK(e.status() == SPECULA_ERR_CANCELLED);
        }
        opts.progress = [](float) -> bool { throw std::logic_error("from progress"); };
        CHECK_THROWS_AS(specula::Model::load(kModelPath, opts), std::logic_error);
    }
}

TEST_CASE("options structs are read only up to their struct_size", "[api][options]") {
    const specula::Model &model = shared_model();

    SECTION("session options: fields past struct_size keep their defaults") {
        specula_session_options so;
        specula_session_options_init(&so);
        so.struct_size = offsetof(specula_session_options, n_threads);  // a caller that only knows n_ctx
        so.n_ctx = 32;
        so.n_threads = -7;  // invalid if it were read
        so.n_batch = -7;
        specula_session *s = nullptr;
        specula_error *err = nullptr;
        REQUIRE(specula_session_create(model.get(), &so, nullptr, &s, &err) == SPECULA_OK);
        CHECK(specula_session_n_ctx(s) == 32);
        specula_session_destroy(s);
    }
    SECTION("sampler options: a truncated struct still takes the fields it has") {
        specula_sampler_options sp;
        specula_sampler_options_init(&sp);
        sp.struct_size = offsetof(specula_sampler_options, top_k);  // only temperature
        sp.temperature = 0.0f;                                      // greedy
        sp.repeat_penalty = -1.0f;                                  // invalid if it were read
        specula_session *s = nullptr;
        REQUIRE(specula_session_create(model.get(), nullptr, &sp, &s, nullptr) == SPECULA_OK);
        specula::Session owner(s);
        owner.append_text(kPrompt);
        specula::Session reference = make_session(model, greedy());
        reference.append_text(kPrompt);
        CHECK(generate(s, 16).tokens == generate(reference.get(), 16).tokens);
    }
    SECTION("generate options: stop strings and top logits past struct_size are ignored") {
        specula::Session s = make_session(model);
        s.append_text(kPrompt);
        const char *stops[] = {"e", " "};  // would stop at once if read
        specula_generate_options go;
        specula_generate_options_init(&go);
        go.struct_size = offsetof(specula_generate_options, stop_at_eog);  // only max_tokens
        go.max_tokens = 3;
        go.stop_strings = stops;
        go.n_stop_strings = 2;
        go.top_logits = 5;
        struct Seen {
            int tokens = 0;
            int with_top = 0;
        } seen;
        specula_stop_reason reason = SPECULA_STOP_NONE;
        REQUIRE(specula_session_generate(
                    s.get(), &go,
                    [](const specula_token_event *ev, void *user) -> int32_t {
                        auto *sn = static_cast<Seen *>(user);
                        if (ev->token != SPECULA_TOKEN_NULL) ++sn->tokens;
                        if (ev->n_top != 0) ++sn->with_top;
                        return 1;
                    },
                    &seen, &reason, nullptr) == SPECULA_OK);
        CHECK(reason == SPECULA_STOP_MAX_TOKENS);
        CHECK(seen.tokens == 3);
        CHECK(seen.with_top == 0);
    }
    SECTION("model options: a progress callback past struct_size is never called") {
        specula_model_options mo;
        specula_model_options_init(&mo);
        mo.struct_size = offsetof(specula_model_options, progress);
        bool called = false;
        mo.progress = [](float, void *user) -> int32_t {
            *static_cast<bool *>(user) = true;
            return 0;
        };
        mo.progress_user_data = &called;
        specula_model *m = nullptr;
        REQUIRE(specula_model_load(kModelPath.c_str(), &mo, &m, nullptr) == SPECULA_OK);
        specula_model_destroy(m);
        CHECK_FALSE(called);
    }
    SECTION("a struct_size too small to hold even struct_size is a bad options struct") {
        specula_session_options so;
        specula_session_options_init(&so);
        so.struct_size = 0;
        specula_session *s = nullptr;
        specula_error *err = nullptr;
        CHECK(specula_session_create(model.get(), &so, nullptr, &s, &err) == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(s == nullptr);
        CHECK(std::strlen(specula_error_message(err)) > 0);
        specula_error_destroy(err);

        specula::Session session = make_session(model);
        session.append_text(kPrompt);
        specula_generate_options go;
        specula_generate_options_init(&go);
        go.struct_size = 2;
        CHECK(specula_session_generate(session.get(), &go, nullptr, nullptr, nullptr, nullptr) ==
              SPECULA_ERR_INVALID_ARGUMENT);
    }
    SECTION("a struct from a newer header (larger struct_size) is accepted") {
        struct Newer {
            specula_session_options base;
            int64_t field_from_the_future;
        } newer{};
        specula_session_options_init(&newer.base);
        newer.base.struct_size = sizeof newer;
        newer.base.n_ctx = 48;
        newer.field_from_the_future = 12345;
        specula_session *s = nullptr;
        REQUIRE(specula_session_create(model.get(), &newer.base, nullptr, &s, nullptr) == SPECULA_OK);
        CHECK(specula_session_n_ctx(s) == 48);
        specula_session_destroy(s);
    }
    SECTION("output structs: the library writes only up to struct_size") {
        specula::Session s = make_session(model);
        s.append_text(kPrompt);
        generate(s.get(), 4);
        unsigned char buf[sizeof(specula_stats) + 16];
        std::memset(buf, 0xAB, sizeof buf);
        const uint32_t size = offsetof(specula_stats, n_ctx_used);  // an old caller: two counters only
        std::memcpy(buf, &size, sizeof size);
        REQUIRE(specula_session_stats(s.get(), reinterpret_cast<specula_stats *>(buf), nullptr) == SPECULA_OK);
        int32_t n_generated = 0;
        std::memcpy(&n_generated, buf + offsetof(specula_stats, n_generated), sizeof n_generated);
        CHECK(n_generated == 4);
        bool untouched = true;
        for (size_t i = size; i < sizeof buf; ++i) untouched = untouched && buf[i] == 0xAB;
        CHECK(untouched);
    }
}

// What an application built against an older header gets from a newer library: its struct is shorter, and the
// initialisation must write no byte past it (0.16's *_init functions wrote the library's whole struct).
TEST_CASE("an options struct from an older header is initialised within its own bytes", "[api][options]") {
    constexpr unsigned char kCanary = 0xC5;
    SECTION("the _init_sized functions write only the bytes they are given, and struct_size says how many") {
        // A sampler struct as a header that stopped at top_k declared it, inside a buffer with a canary tail.
        const size_t old_size = offsetof(specula_sampler_options, top_k) + sizeof(int32_t);
        alignas(8) unsigned char buf[sizeof(specula_sampler_options) + 16];
        std::memset(buf, kCanary, sizeof buf);
        specula_sampler_options_init_sized(reinterpret_cast<specula_sampler_options *>(buf), old_size);
        for (size_t i = old_size; i < sizeof buf; ++i) CHECK(int(buf[i]) == int(kCanary));
        specula_sampler_options head;
        std::memcpy(&head, buf, old_size);
        CHECK(head.struct_size == old_size);
        specula_sampler_options full;
        specula_sampler_options_init(&full);
        CHECK(head.temperature == full.temperature);
        CHECK(head.top_k == full.top_k);
        // That struct works: the fields it does not have keep the library's defaults.
        head.temperature = 0.0f;
        const specula::Model &model = shared_model();
        specula_session *s = nullptr;
        REQUIRE(specula_session_create(model.get(), nullptr, &head, &s, nullptr) == SPECULA_OK);
        specula::Session owner(s);
        owner.append_text(kPrompt);
        specula::Session reference = make_session(model, greedy());
        reference.append_text(kPrompt);
        CHECK(generate(s, 8).tokens == generate(reference.get(), 8).tokens);
    }
    SECTION("the header's _init macro passes the size of the struct it is given") {
        specula_speculative_options so;
        std::memset(&so, kCanary, sizeof so);
        specula_speculative_options_init(&so);
        CHECK(so.struct_size == sizeof so);
        CHECK(so.ngram == 0);
        CHECK(so.tree_widths == nullptr);
    }
    SECTION("a size below struct_size's own 4 bytes writes nothing, and NULL is accepted") {
        alignas(8) unsigned char buf[8];
        std::memset(buf, kCanary, sizeof buf);
        specula_generate_options_init_sized(reinterpret_cast<specula_generate_options *>(buf), 3);
        for (unsigned char b : buf) CHECK(int(b) == int(kCanary));
        specula_generate_options_init_sized(nullptr, sizeof(specula_generate_options));
    }
    SECTION("the exported functions that applications built before 0.17 call write the structs as 0.16 declared them") {
        // (Parenthesised names call the exported function, not the header's macro.)
        struct Case {
            size_t written, size;
        };
        alignas(8) unsigned char buf[1024];
        const auto legacy = [&](auto init, size_t size) {
            std::memset(buf, kCanary, sizeof buf);
            init(buf);
            uint32_t struct_size = 0;
            std::memcpy(&struct_size, buf, sizeof struct_size);
            size_t written = sizeof buf;
            while (written > 0 && buf[written - 1] == kCanary) --written;
            return Case{std::max<size_t>(written, struct_size), size};
        };
        const Case cases[] = {
            legacy([](void *p) { (specula_model_options_init)(static_cast<specula_model_options *>(p)); },
                   offsetof(specula_model_options, vocab_only) + sizeof(int32_t)),
            legacy([](void *p) { (specula_chat_options_init)(static_cast<specula_chat_options *>(p)); },
                   offsetof(specula_chat_options, enable_thinking) + sizeof(int32_t)),
            legacy([](void *p) { (specula_session_options_init)(static_cast<specula_session_options *>(p)); },
                   offsetof(specula_session_options, n_discard) + sizeof(int32_t)),
            legacy([](void *p) { (specula_sampler_options_init)(static_cast<specula_sampler_options *>(p)); },
                   offsetof(specula_sampler_options, draw) + sizeof(int32_t)),
            legacy([](void *p) { (specula_generate_options_init)(static_cast<specula_generate_options *>(p)); },
                   offsetof(specula_generate_options, top_probs) + sizeof(int32_t)),
            legacy([](void *p) { (specula_speculative_options_init)(static_cast<specula_speculative_options *>(p)); },
                   offsetof(specula_speculative_options, grammar) + sizeof(int32_t)),
            legacy([](void *p) { (specula_snapshot_options_init)(static_cast<specula_snapshot_options *>(p)); },
                   offsetof(specula_snapshot_options, compression_level) + sizeof(int32_t)),
            legacy([](void *p) { (specula_prompt_cache_options_init)(static_cast<specula_prompt_cache_options *>(p)); },
                   offsetof(specula_prompt_cache_options, compression_level) + sizeof(int32_t)),
            legacy([](void *p) { (specula_batch_options_init)(static_cast<specula_batch_options *>(p)); },
                   offsetof(specula_batch_options, n_threads) + sizeof(int32_t)),
        };
        for (const Case &c : cases) CHECK(c.written <= c.size);
    }
}

TEST_CASE("pull-style next produces the same tokens as generate", "[session][next]") {
    specula::Session s = make_session(shared_model());
    s.append_text(kPrompt);
    const int32_t n_prompt = s.n_tokens();
    const Run pushed = generate(s.get(), 12);
    s.rewind(n_prompt);

    specula::GenerateOptions go(12);
    go.stop_at_eog = false;
    std::vector<int32_t> pulled;
    std::string text;
    for (int i = 0; i < 20; ++i) {
        const specula_token_event ev = s.next(go);
        if (ev.token != SPECULA_TOKEN_NULL) pulled.push_back(ev.token);
        text.append(ev.text, ev.text_len);
        if (ev.stop != SPECULA_STOP_NONE) {
            CHECK(ev.stop == SPECULA_STOP_MAX_TOKENS);
            break;
        }
    }
    CHECK(pulled == pushed.tokens);
    CHECK(text == pushed.text);
}

TEST_CASE("an exception thrown by a C++ token callback stops generation and reaches the caller",
          "[session][hpp]") {
    specula::Session s = make_session(shared_model());
    s.append_text(kPrompt);
    const int32_t n_prompt = s.n_tokens();
    int calls = 0;
    CHECK_THROWS_AS(s.generate(specula::GenerateOptions(32),
                               [&](const specula_token_event &) -> bool {
                                   if (++calls == 3) throw std::runtime_error("stop here");
                                   return true;
                               }),
                    std::runtime_error);
    CHECK(calls == 3);
    CHECK(s.n_tokens() == n_prompt + 3);  // generation stopped right there
    // The session is still usable.
    CHECK(s.generate(specula::GenerateOptions(2)) == SPECULA_STOP_MAX_TOKENS);
}

TEST_CASE("C++ wrapper: vocab-only load, token pieces, chat template", "[wrapper]") {
    const std::string vocab = std::string(SPECULA_FIXTURES_DIR) + "/tokenizer/ggml-vocab-qwen2.gguf";
    if (!std::filesystem::exists(vocab)) {
        SPECULA_SKIP(vocab << " not found");
        return;
    }
    specula::ModelOptions opts;
    opts.vocab_only = true;
    const specula::Model model = specula::Model::load(vocab, opts);
    const std::vector<int32_t> ids = model.tokenize("Hello world", 0);
    REQUIRE(ids.size() == 2);
    CHECK(model.token_to_piece(ids[1]) == " world");
    const std::string prompt = model.apply_chat_template({{"user", "Hi"}});
    CHECK(prompt == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    CHECK_THROWS_AS(specula::Model::load(std::string(SPECULA_SOURCE_DIR) + "/models/stories260K.gguf").apply_chat_template({{"user", "Hi"}}),
                    specula::Error);
}
