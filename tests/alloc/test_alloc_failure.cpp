// Allocation-failure injection through the public C API (issue 21, "Reliability"): for every operation, the n-th
// allocation of the call fails (alloc_hook.h: on the calling thread only), for n = 1, 2, ... until the call
// completes without reaching n. For every n the call must return SPECULA_ERR_OUT_OF_MEMORY with a message (or succeed
// with the right result, where the library could do without the memory), never crash or terminate; the objects
// involved must stay usable (the same operation retried without injection gives the baseline result) or destroyable;
// and nothing may leak (the process's live allocations are the same before and after each attempt, and
// LeakSanitizer checks the sanitizer build at exit).
// The quick cases try every n for the cheap operations and every n up to kDense, then a stride, for the expensive
// ones; the [slow] cases try every n of those.
#include "alloc_hook.h"
#include "common/skip.h"
#include "common/temp_dir.h"
#include "common/test_scale.h"

#include <catch2/catch.hpp>
#include <specula/specula.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace {

const std::string kModel = SPECULA_SOURCE_DIR "/models/stories260K.gguf";
const std::string kDraft = SPECULA_SOURCE_DIR "/models/drafts/stories260K.longspec.gguf";
const std::string kDraftModel = SPECULA_FIXTURES_DIR "/models/stories260K-L3.gguf";
const std::string kQuantModel = SPECULA_FIXTURES_DIR "/models/synth-llama-q4_k_m.gguf";
const char *const kPrompt = "Once upon a time, there was a little dog";
constexpr int kGen = 12;

// What one attempt found.
struct Attempt {
    bool fired = false;        // the n-th allocation was reached (and failed)
    std::string problem;       // empty when everything checked
};

struct LoopResult {
    int64_t attempts = 0, failures_returned = 0, ok_despite_failure = 0, allocations = 0;
    std::set<void *> sites;
    std::vector<std::string> problems;
};

// Runs one(n) for n = 1, 2, ... (after `dense`, every `stride`-th n) until an attempt no longer reaches n. Checks the
// live allocation count around each attempt.
LoopResult inject_loop(const char *name, const std::function<Attempt(int64_t)> &one, int64_t dense = 0, int64_t stride = 1) {
    LoopResult r;
    const auto t0 = std::chrono::steady_clock::now();
    // Debugging aid: SPECULA_ALLOC_ONLY=<text> runs only the loops whose name contains it.
    const char *only = std::getenv("SPECULA_ALLOC_ONLY");
    if (only != nullptr && std::string(name).find(only) == std::string::npos) {
        r.attempts = 2;
        return r;
    }
    // Under the sanitizers a loop that would try every n tries every n to 200, then every 4th: the plain build's pass
    // tries them all, and the sanitizers' question (does a failure path touch freed or uninitialised memory, or
    // leak?) is answered by the same sites reached at a lower density (the loops of ~1200 allocations, the snapshot
    // loads and the prompt cache's restore, took ~25 s each there).
    if (test_scale::kSanitized && dense == 0 && stride == 1) {
        dense = 200;
        stride = 4;
    }
    for (int64_t n = 1;; n += (dense > 0 && n >= dense) ? stride : 1) {
        const int64_t live_before = alloc_hook::live();
        const Attempt a = one(n);
        const int64_t live_after = alloc_hook::live();
        r.attempts++;
        if (a.fired) r.sites.insert(alloc_hook::fired_site());
        if (!a.problem.empty()) r.problems.push_back("n=" + std::to_string(n) + ": " + a.problem);
        if (live_after != live_before)
            r.problems.push_back("n=" + std::to_string(n) + ": " + std::to_string(live_after - live_before) +
                                 " allocations leaked");
        if (!a.fired) {
            r.allocations = n - 1;
            break;
        }
        if (r.problems.size() > 20) break;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("alloc: %-30s %6lld allocations on the calling thread, %6lld attempts, %4zu distinct failing sites, %6.1f s%s\n",
                name, (long long)r.allocations, (long long)r.attempts, r.sites.size(), secs,
                dense > 0 ? (" (every n to " + std::to_string(dense) + ", then every " + std::to_string(stride) + ")").c_str() : "");
    std::fflush(stdout);
    return r;
}

void require_clean(const LoopResult &r) {
    for (const std::string &p : r.problems) FAIL_CHECK(p);
    CHECK(r.problems.empty());
    CHECK(r.attempts > 1);  // the operation allocates: at least one attempt failed an allocation
}

// The status check of an injected call: OK, or OUT_OF_MEMORY with a message. Returns the problem, or "".
std::string g_escaped;  // what() of an exception that escaped the C API (armed())

std::string check_status(specula_status st, specula_error *err, bool fired) {
    if (st == SPECULA_OK) return "";
    if (!fired) return std::string("failed without an injected failure: ") + specula_status_string(st) + ": " + specula_error_message(err);
    if (int(st) == -1) return "an exception escaped the C API: " + g_escaped;
    if (st != SPECULA_ERR_OUT_OF_MEMORY)
        return std::string("status ") + specula_status_string(st) + " (" + specula_error_message(err) + "), not OUT_OF_MEMORY";
    if (err == nullptr || std::strlen(specula_error_message(err)) == 0) return "OUT_OF_MEMORY without a message";
    return "";
}

// Runs call() armed to fail its n-th allocation; returns its status and whether the failure happened.
// An exception out of the C API (it must never throw) is reported as status -1 (its what() in g_escaped).
template <typename F> specula_status armed(int64_t n, bool &fired, F &&call) {
    alloc_hook::arm(n);
    specula_status st;
    try {
        st = call();
    } catch (const std::exception &e) {
        alloc_hook::disarm();
        g_escaped = e.what();
        st = specula_status(-1);
    } catch (...) {
        alloc_hook::disarm();
        g_escaped = "?";
        st = specula_status(-1);
    }
    alloc_hook::disarm();
    fired = alloc_hook::fired();
    return st;
}

struct Model {
    specula_model *m = nullptr;
    explicit Model(const std::string &path) {
        specula_error *err = nullptr;
        if (specula_model_load(path.c_str(), nullptr, &m, &err) != SPECULA_OK) FAIL(specula_error_message(err));
    }
    ~Model() { specula_model_destroy(m); }
};

enum Drafter { D_NONE, D_NGRAM, D_LONGSPEC, D_DRAFT_MODEL, D_LONGSPEC_NGRAM };
const char *const kDrafterNames[] = {"none", "ngram", "longspec", "draft-model", "longspec+ngram"};

struct Env {
    Model model{kModel};
    specula_draft *draft = nullptr;
    specula_model *draft_model = nullptr;
    Env() {
        specula_error *err = nullptr;
        if (specula_draft_load(kDraft.c_str(), model.m, &draft, &err) != SPECULA_OK) FAIL(specula_error_message(err));
        if (std::filesystem::exists(kDraftModel)) {
            if (specula_model_load(kDraftModel.c_str(), nullptr, &draft_model, &err) != SPECULA_OK) FAIL(specula_error_message(err));
        } else {
            draft_model = specula_model_retain(model.m);  // without the fixtures: the target drafts itself
        }
    }
    ~Env() {
        specula_draft_destroy(draft);
        specula_model_destroy(draft_model);
    }

    specula_session *new_session(int drafter = D_NONE) const {
        specula_session_options so;
        specula_session_options_init(&so);
        so.n_ctx = 256;
        // One thread: the session runs everything on the calling thread, where the injection counts (and a spinning
        // pool would be slow on a loaded CI machine); the session_create loop covers a pool's thread creation.
        so.n_threads = 1;
        so.backend = SPECULA_BACKEND_CPU;
        specula_sampler_options sa;
        specula_sampler_options_init(&sa);
        sa.temperature = 0.0f;
        specula_session *s = nullptr;
        specula_error *err = nullptr;
        if (specula_session_create(model.m, &so, &sa, &s, &err) != SPECULA_OK) {
            std::string msg = specula_error_message(err);
            specula_error_destroy(err);
            FAIL(msg);
        }
        if (drafter != D_NONE) {
            specula_status st = set_drafter(s, drafter, &err);
            if (st != SPECULA_OK) FAIL(specula_error_message(err));
        }
        return s;
    }

    specula_status set_drafter(specula_session *s, int drafter, specula_error **err) const {
        specula_speculative_options sp;
        specula_speculative_options_init(&sp);
        static const int32_t widths[] = {2, 2, 2};
        sp.tree_widths = widths;
        sp.n_tree_levels = 3;
        sp.tree_mode = SPECULA_TREE_FIXED;
        if (drafter == D_NGRAM || drafter == D_LONGSPEC_NGRAM) sp.ngram = 1;
        if (drafter == D_LONGSPEC || drafter == D_LONGSPEC_NGRAM) sp.draft = draft;
        if (drafter == D_DRAFT_MODEL) sp.draft_model = draft_model;
        return specula_session_set_speculative(s, &sp, err);
    }
};

std::vector<int32_t> context_of(specula_session *s) {
    size_t n = 0;
    specula_session_tokens(s, nullptr, 0, &n, nullptr);
    std::vector<int32_t> t(n);
    if (n > 0) specula_session_tokens(s, t.data(), t.size(), &n, nullptr);
    return t;
}

// Callbacks must not throw (specula.h): the vector has room reserved before the call, so push_back never allocates.
int32_t collect(const specula_token_event *ev, void *user) {
    auto *v = static_cast<std::vector<int32_t> *>(user);
    if (ev->token != SPECULA_TOKEN_NULL && v->size() < v->capacity()) v->push_back(ev->token);
    return 1;
}

specula_status generate(specula_session *s, int n, std::vector<int32_t> *out, specula_error **err) {
    specula_generate_options go;
    specula_generate_options_init(&go);
    go.max_tokens = n;
    go.stop_at_eog = 0;
    // Room for every token the callback may get (it must not allocate); callers that run this armed reserve first.
    if (out->capacity() < out->size() + size_t(n) + 64) out->reserve(out->size() + size_t(n) + 64);
    return specula_session_generate(s, &go, collect, out, nullptr, err);
}

specula_status append_prompt(specula_session *s, specula_error **err) {
    return specula_session_append_text(s, kPrompt, std::strlen(kPrompt), SPECULA_TOKENIZE_ADD_SPECIAL, err);
}

// Plain greedy: the prompt's tokens followed by kGen generated ones (stories260K).
std::vector<int32_t> greedy_context(const Env &env) {
    specula_session *s = env.new_session();
    specula_error *err = nullptr;
    std::vector<int32_t> out;
    REQUIRE(append_prompt(s, &err) == SPECULA_OK);
    REQUIRE(generate(s, kGen, &out, &err) == SPECULA_OK);
    std::vector<int32_t> ctx = context_of(s);
    specula_session_destroy(s);
    return ctx;
}

std::string join(const std::vector<int32_t> &v) {
    std::string s;
    for (int32_t t : v) s += std::to_string(t) + " ";
    return s;
}

// The generation attempt for one drafter: append + generate armed; on failure the session must continue to exactly
// the baseline context.
Attempt generate_attempt(const Env &env, int drafter, const std::vector<int32_t> &want, size_t n_prompt, int64_t n) {
    Attempt a;
    specula_session *s = env.new_session(drafter);
    specula_error *err = nullptr;
    std::vector<int32_t> emitted;
    emitted.reserve(256);
    const specula_status st = armed(n, a.fired, [&] {
        specula_status r = append_prompt(s, &err);
        if (r == SPECULA_OK) r = generate(s, kGen, &emitted, &err);
        return r;
    });
    a.problem = check_status(st, err, a.fired);
    specula_error_destroy(err);
    err = nullptr;
    if (a.problem.empty()) {
        // Whatever happened, the context is a prefix of the baseline and the emitted tokens are what it added.
        std::vector<int32_t> ctx = context_of(s);
        if (ctx.size() > want.size() || !std::equal(ctx.begin(), ctx.end(), want.begin()))
            a.problem = "context after the call " + join(ctx) + "is not a prefix of " + join(want);
        else if (ctx.size() > 0 && ctx.size() < n_prompt)
            a.problem = "a failed append left part of the prompt (" + std::to_string(ctx.size()) + " tokens)";
        else if (n_prompt + emitted.size() > want.size() ||
                 !std::equal(emitted.begin(), emitted.end(), want.begin() + long(n_prompt)))
            a.problem = "emitted tokens " + join(emitted) + "differ from the baseline";
        else if (st == SPECULA_OK && ctx != want)
            a.problem = "OK with context " + join(ctx) + "instead of " + join(want);
        else if (st != SPECULA_OK) {
            // Retry without injection: the session continues to exactly the baseline.
            specula_status r = SPECULA_OK;
            if (ctx.empty()) r = append_prompt(s, &err);
            const int done = ctx.empty() ? 0 : int(ctx.size() - n_prompt);
            std::vector<int32_t> more;
            if (r == SPECULA_OK) r = generate(s, kGen - done, &more, &err);
            ctx = context_of(s);
            if (r != SPECULA_OK) a.problem = std::string("retry failed: ") + specula_error_message(err);
            else if (ctx != want) a.problem = "retry gave context " + join(ctx) + "instead of " + join(want);
            specula_error_destroy(err);
        }
    }
    specula_session_destroy(s);
    return a;
}

size_t prompt_length(const Env &env) {
    int32_t ids[256];
    size_t n = 0;
    REQUIRE(specula_model_tokenize(env.model.m, kPrompt, std::strlen(kPrompt), SPECULA_TOKENIZE_ADD_SPECIAL, ids, 256, &n,
                                   nullptr) == SPECULA_OK);
    return n;
}

// A session holding the prompt + kGen greedy tokens (drafter attached), for the snapshot operations.
specula_session *prepared_session(const Env &env, int drafter) {
    specula_session *s = env.new_session(drafter);
    std::vector<int32_t> out;
    REQUIRE(append_prompt(s, nullptr) == SPECULA_OK);
    REQUIRE(generate(s, kGen, &out, nullptr) == SPECULA_OK);
    return s;
}

// The next kGen tokens of a session (greedy).
std::vector<int32_t> continuation(specula_session *s, specula_status *st) {
    std::vector<int32_t> out;
    *st = generate(s, kGen, &out, nullptr);
    return out;
}

void model_load_loop(const char *name, const std::string &path, int64_t dense, int64_t stride) {
    specula_model *base = nullptr;
    REQUIRE(specula_model_load(path.c_str(), nullptr, &base, nullptr) == SPECULA_OK);
    const int32_t n_vocab = specula_model_n_vocab(base);
    const uint64_t n_params = specula_model_n_params(base);
    specula_model_destroy(base);
    const LoopResult r = inject_loop(name, [&](int64_t n) {
        Attempt a;
        specula_model *m = nullptr;
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] { return specula_model_load(path.c_str(), nullptr, &m, &err); });
        a.problem = check_status(st, err, a.fired);
        if (st != SPECULA_OK && m != nullptr) a.problem = "*out set on failure";
        if (st == SPECULA_OK && (specula_model_n_vocab(m) != n_vocab || specula_model_n_params(m) != n_params))
            a.problem = "loaded a different model";
        specula_error_destroy(err);
        if (st == SPECULA_OK) specula_model_destroy(m);
        return a;
    }, dense, stride);
    require_clean(r);
}

}  // namespace

// The *_init functions return void: they cannot report a failure, so they must not allocate (a bad_alloc would
// unwind into the C caller; specula_speculative_options_init did).
TEST_CASE("the options init functions do not allocate", "[alloc]") {
    alloc_hook::arm(0);
    specula_model_options mo;
    specula_model_options_init(&mo);
    specula_session_options so;
    specula_session_options_init(&so);
    specula_sampler_options sa;
    specula_sampler_options_init(&sa);
    specula_generate_options go;
    specula_generate_options_init(&go);
    specula_speculative_options sp;
    specula_speculative_options_init(&sp);
    specula_snapshot_options sn;
    specula_snapshot_options_init(&sn);
    specula_prompt_cache_options pc;
    specula_prompt_cache_options_init(&pc);
    const int64_t count = alloc_hook::disarm();
    CHECK(count == 0);
}

TEST_CASE("model load fails cleanly at every allocation", "[alloc]") {
    model_load_loop("model_load stories260K", kModel, 0, 1);
}

TEST_CASE("quantized model load (stride)", "[alloc]") {
    if (!std::filesystem::exists(kQuantModel)) {
        SPECULA_SKIP(kQuantModel + " is absent");
        return;
    }
    model_load_loop("model_load q4_k_m (stride)", kQuantModel, 300, 997);
}

TEST_CASE("quantized model load - every allocation", "[alloc][slow]") {
    if (!std::filesystem::exists(kQuantModel)) {
        SPECULA_SKIP(kQuantModel + " is absent");
        return;
    }
    model_load_loop("model_load q4_k_m (all)", kQuantModel, 0, 1);
}

TEST_CASE("draft load - session create - tokenizer - chat template", "[alloc]") {
    Env env;
    const std::vector<int32_t> want = greedy_context(env);

    require_clean(inject_loop("draft_load", [&](int64_t n) {
        Attempt a;
        specula_draft *d = nullptr;
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] { return specula_draft_load(kDraft.c_str(), env.model.m, &d, &err); });
        a.problem = check_status(st, err, a.fired);
        if (st == SPECULA_OK && specula_draft_window(d) != specula_draft_window(env.draft)) a.problem = "another window";
        specula_error_destroy(err);
        specula_draft_destroy(d);
        return a;
    }));

    require_clean(inject_loop("session_create", [&](int64_t n) {
        Attempt a;
        specula_session_options so;
        specula_session_options_init(&so);
        so.n_ctx = 256;
        so.n_threads = 2;
        so.backend = SPECULA_BACKEND_CPU;
        specula_sampler_options sa;
        specula_sampler_options_init(&sa);
        sa.temperature = 0.0f;
        specula_session *s = nullptr;
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] { return specula_session_create(env.model.m, &so, &sa, &s, &err); });
        a.problem = check_status(st, err, a.fired);
        specula_error_destroy(err);
        if (st == SPECULA_OK) {
            std::vector<int32_t> out;
            if (append_prompt(s, nullptr) != SPECULA_OK || generate(s, kGen, &out, nullptr) != SPECULA_OK || context_of(s) != want)
                a.problem = "the session created under injection does not generate the baseline";
        } else if (s != nullptr) {
            a.problem = "*out set on failure";
        }
        specula_session_destroy(s);
        return a;
    }));

    std::vector<int32_t> ids(256);
    size_t n_ids = 0;
    REQUIRE(specula_model_tokenize(env.model.m, kPrompt, std::strlen(kPrompt), SPECULA_TOKENIZE_ADD_SPECIAL, ids.data(),
                                   ids.size(), &n_ids, nullptr) == SPECULA_OK);
    ids.resize(n_ids);
    require_clean(inject_loop("tokenize", [&](int64_t n) {
        Attempt a;
        std::vector<int32_t> got(256);
        size_t n_got = 0;
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] {
            return specula_model_tokenize(env.model.m, kPrompt, std::strlen(kPrompt), SPECULA_TOKENIZE_ADD_SPECIAL, got.data(),
                                          got.size(), &n_got, &err);
        });
        a.problem = check_status(st, err, a.fired);
        got.resize(st == SPECULA_OK ? n_got : 0);
        if (st == SPECULA_OK && got != ids) a.problem = "tokenized differently: " + join(got);
        specula_error_destroy(err);
        return a;
    }));

    char text[512];
    size_t len = 0;
    REQUIRE(specula_model_detokenize(env.model.m, want.data(), want.size(), 0, text, sizeof text, &len, nullptr) == SPECULA_OK);
    const std::string want_text(text, len);
    require_clean(inject_loop("detokenize", [&](int64_t n) {
        Attempt a;
        char buf[512];
        size_t n_buf = 0;
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] {
            return specula_model_detokenize(env.model.m, want.data(), want.size(), 0, buf, sizeof buf, &n_buf, &err);
        });
        a.problem = check_status(st, err, a.fired);
        if (st == SPECULA_OK && std::string(buf, n_buf) != want_text) a.problem = "detokenized differently";
        specula_error_destroy(err);
        return a;
    }));

    const specula_chat_message msgs[] = {{"system", "You are a storyteller."}, {"user", "Tell me about a dog."}};
    for (const char *tmpl : {"chatml", "llama3", "llama2"}) {
        char buf[1024];
        size_t n_buf = 0;
        REQUIRE(specula_chat_apply_template(nullptr, tmpl, msgs, 2, 1, buf, sizeof buf, &n_buf, nullptr) == SPECULA_OK);
        const std::string want_chat(buf, n_buf);
        require_clean(inject_loop((std::string("chat_apply_template ") + tmpl).c_str(), [&](int64_t n) {
            Attempt a;
            char out[1024];
            size_t n_out = 0;
            specula_error *err = nullptr;
            const specula_status st = armed(n, a.fired, [&] {
                return specula_chat_apply_template(nullptr, tmpl, msgs, 2, 1, out, sizeof out, &n_out, &err);
            });
            a.problem = check_status(st, err, a.fired);
            if (st == SPECULA_OK && std::string(out, n_out) != want_chat) a.problem = "another text";
            specula_error_destroy(err);
            return a;
        }));
    }
}

// The drafter loops. The draft model's (a second model's runner per session: ~3000 allocations, a minute in Release)
// run every n up to kDense and then every kStride-th in the quick case; the [slow] case runs every n.
// (test_scale::kSanitized, not gcc's __SANITIZE_ADDRESS__ alone: clang 14, which builds CI's sanitizer pass, does not
// define it, and these loops then ran the plain build's lengths there: 530 s instead of 270.)
constexpr int64_t kDense = test_scale::count(300, 100);  // the sanitizer pass of CI: ~3x slower
constexpr int64_t kStride = test_scale::count(7, 37);

void drafter_loops(bool draft_model_only, int64_t dense, int64_t stride) {
    Env env;
    const std::vector<int32_t> want = greedy_context(env);
    const size_t n_prompt = prompt_length(env);
    const auto drafters = draft_model_only ? std::vector<int>{D_DRAFT_MODEL}
                                           : std::vector<int>{D_NONE, D_NGRAM, D_LONGSPEC, D_DRAFT_MODEL, D_LONGSPEC_NGRAM};
    for (int d : drafters) {
        // The generation's own check: without injection the drafter gives the baseline (greedy is lossless).
        REQUIRE(generate_attempt(env, d, want, n_prompt, 0).problem.empty());
        require_clean(inject_loop((std::string("append+generate ") + kDrafterNames[d]).c_str(),
                                  [&](int64_t n) { return generate_attempt(env, d, want, n_prompt, n); },
                                  d == D_DRAFT_MODEL ? dense : 0, d == D_DRAFT_MODEL ? stride : 1));
    }
    // Attaching drafters.
    for (int d : drafters) {
        if (d == D_NONE) continue;
        require_clean(inject_loop((std::string("set_speculative ") + kDrafterNames[d]).c_str(), [&](int64_t n) {
            Attempt a;
            specula_session *s = env.new_session();
            specula_error *err = nullptr;
            const specula_status st = armed(n, a.fired, [&] { return env.set_drafter(s, d, &err); });
            a.problem = check_status(st, err, a.fired);
            specula_error_destroy(err);
            err = nullptr;
            if (a.problem.empty() && st != SPECULA_OK && env.set_drafter(s, d, &err) != SPECULA_OK)
                a.problem = std::string("retry failed: ") + specula_error_message(err);
            specula_error_destroy(err);
            std::vector<int32_t> out;
            if (a.problem.empty() && (append_prompt(s, nullptr) != SPECULA_OK || generate(s, kGen, &out, nullptr) != SPECULA_OK ||
                                      context_of(s) != want))
                a.problem = "the session does not generate the baseline afterwards";
            specula_session_destroy(s);
            return a;
        }, d == D_DRAFT_MODEL ? dense : 0, d == D_DRAFT_MODEL ? stride : 1));
    }
}

TEST_CASE("append + generate with every drafter", "[alloc]") { drafter_loops(false, kDense, kStride); }

TEST_CASE("draft model - every allocation", "[alloc][slow]") { drafter_loops(true, 0, 1); }

// With a drafter attached a load restores the drafters too (~5500 allocations, half a minute each in Release): the
// quick case runs every n to kDense and then every kStride-th for those loads and forks; the [slow] case every n.
void snapshot_loops(int64_t dense, int64_t stride) {
    Env env;
    test_fixtures::TempDir dir("specula-alloc");
    for (int d : {D_NONE, D_LONGSPEC_NGRAM}) {
        const std::string tag = std::string(" (") + kDrafterNames[d] + ")";
        specula_session *src = prepared_session(env, d);
        // Baselines: the snapshot's bytes and the continuation of a session loaded from it.
        size_t bound = 0;
        REQUIRE(specula_session_save_buffer(src, nullptr, nullptr, 0, &bound, nullptr) == SPECULA_ERR_BUFFER_TOO_SMALL);
        std::vector<uint8_t> snap(bound);
        size_t snap_size = 0;
        REQUIRE(specula_session_save_buffer(src, nullptr, snap.data(), snap.size(), &snap_size, nullptr) == SPECULA_OK);
        snap.resize(snap_size);
        std::vector<int32_t> want_next;
        {
            specula_session *ref = env.new_session(d);
            REQUIRE(specula_session_load_buffer(ref, snap.data(), snap.size(), nullptr) == SPECULA_OK);
            specula_status st;
            want_next = continuation(ref, &st);
            REQUIRE(st == SPECULA_OK);
            specula_session_destroy(ref);
        }
        // A loaded (or forked) session must continue as the baseline; after a failure it must be unchanged (empty).
        auto check_loaded = [&](specula_session *s, specula_status st, const std::function<specula_status()> &retry) -> std::string {
            if (st != SPECULA_OK) {
                if (specula_session_n_tokens(s) != 0) return "a failed load changed the session";
                const specula_status r = retry();
                if (r != SPECULA_OK) return std::string("retry failed: ") + specula_status_string(r);
            }
            specula_status g;
            const std::vector<int32_t> next = continuation(s, &g);
            if (g != SPECULA_OK || next != want_next) return "continued with " + join(next) + "instead of " + join(want_next);
            return "";
        };

        require_clean(inject_loop(("save_buffer" + tag).c_str(), [&](int64_t n) {
            Attempt a;
            std::vector<uint8_t> buf(bound);
            size_t size = 0;
            specula_error *err = nullptr;
            const specula_status st = armed(n, a.fired, [&] { return specula_session_save_buffer(src, nullptr, buf.data(), buf.size(), &size, &err); });
            a.problem = check_status(st, err, a.fired);
            specula_error_destroy(err);
            if (a.problem.empty() && st != SPECULA_OK &&
                specula_session_save_buffer(src, nullptr, buf.data(), buf.size(), &size, nullptr) != SPECULA_OK)
                a.problem = "retry failed";
            buf.resize(size);
            if (a.problem.empty() && buf != snap) a.problem = "another snapshot";
            return a;
        }));

        require_clean(inject_loop(("load_buffer" + tag).c_str(), [&](int64_t n) {
            Attempt a;
            specula_session *s = env.new_session(d);
            specula_error *err = nullptr;
            const specula_status st = armed(n, a.fired, [&] { return specula_session_load_buffer(s, snap.data(), snap.size(), &err); });
            a.problem = check_status(st, err, a.fired);
            specula_error_destroy(err);
            if (a.problem.empty())
                a.problem = check_loaded(s, st, [&] { return specula_session_load_buffer(s, snap.data(), snap.size(), nullptr); });
            specula_session_destroy(s);
            return a;
        }, d == D_NONE ? 0 : dense, d == D_NONE ? 1 : stride));

        const std::string path = dir.file("s.snap");
        REQUIRE(specula_session_save_file(src, path.c_str(), nullptr, nullptr) == SPECULA_OK);
        require_clean(inject_loop(("save_file" + tag).c_str(), [&](int64_t n) {
            Attempt a;
            const std::string p = dir.file("t.snap");
            specula_error *err = nullptr;
            const specula_status st = armed(n, a.fired, [&] { return specula_session_save_file(src, p.c_str(), nullptr, &err); });
            a.problem = check_status(st, err, a.fired);
            specula_error_destroy(err);
            if (a.problem.empty() && st != SPECULA_OK) {
                if (std::filesystem::exists(p)) a.problem = "a failed save left the file";
                else if (specula_session_save_file(src, p.c_str(), nullptr, nullptr) != SPECULA_OK) a.problem = "retry failed";
            }
            // The file loads and continues as the baseline.
            if (a.problem.empty()) {
                specula_session *s = env.new_session(d);
                const specula_status l = specula_session_load_file(s, p.c_str(), nullptr);
                if (l != SPECULA_OK) a.problem = std::string("the saved file does not load: ") + specula_status_string(l);
                else a.problem = check_loaded(s, l, nullptr);
                specula_session_destroy(s);
            }
            std::filesystem::remove(p);
            // Nothing else in the folder: no temporary file left behind.
            for (const auto &e : std::filesystem::directory_iterator(dir.path))
                if (e.path().filename() != "s.snap" && e.path().filename() != "cache" && a.problem.empty())
                    a.problem = "left " + e.path().filename().string();
            return a;
        }));

        require_clean(inject_loop(("load_file" + tag).c_str(), [&](int64_t n) {
            Attempt a;
            specula_session *s = env.new_session(d);
            specula_error *err = nullptr;
            const specula_status st = armed(n, a.fired, [&] { return specula_session_load_file(s, path.c_str(), &err); });
            a.problem = check_status(st, err, a.fired);
            specula_error_destroy(err);
            if (a.problem.empty())
                a.problem = check_loaded(s, st, [&] { return specula_session_load_file(s, path.c_str(), nullptr); });
            specula_session_destroy(s);
            return a;
        }, d == D_NONE ? 0 : dense, d == D_NONE ? 1 : stride));

        require_clean(inject_loop(("fork" + tag).c_str(), [&](int64_t n) {
            Attempt a;
            specula_session *s = env.new_session(d);
            specula_error *err = nullptr;
            const specula_status st = armed(n, a.fired, [&] { return specula_session_fork(src, s, nullptr, &err); });
            a.problem = check_status(st, err, a.fired);
            specula_error_destroy(err);
            if (a.problem.empty()) a.problem = check_loaded(s, st, [&] { return specula_session_fork(src, s, nullptr, nullptr); });
            specula_session_destroy(s);
            return a;
        }, d == D_NONE ? 0 : dense, d == D_NONE ? 1 : stride));
        specula_session_destroy(src);
    }

    // Prompt cache: open, store and restore.
    const std::string cache_dir = dir.file("cache");
    require_clean(inject_loop("prompt_cache_open", [&](int64_t n) {
        Attempt a;
        specula_prompt_cache *c = nullptr;
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] { return specula_prompt_cache_open(cache_dir.c_str(), nullptr, &c, &err); });
        a.problem = check_status(st, err, a.fired);
        specula_error_destroy(err);
        specula_prompt_cache_destroy(c);
        return a;
    }));

    specula_session *src = prepared_session(env, D_NONE);
    const std::vector<int32_t> ctx = context_of(src);
    require_clean(inject_loop("prompt_cache_store", [&](int64_t n) {
        Attempt a;
        std::filesystem::remove_all(cache_dir);
        specula_prompt_cache *c = nullptr;
        REQUIRE(specula_prompt_cache_open(cache_dir.c_str(), nullptr, &c, nullptr) == SPECULA_OK);
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] { return specula_prompt_cache_store(c, src, &err); });
        a.problem = check_status(st, err, a.fired);
        specula_error_destroy(err);
        if (a.problem.empty() && st != SPECULA_OK && specula_prompt_cache_store(c, src, nullptr) != SPECULA_OK)
            a.problem = "retry failed";
        specula_prompt_cache_destroy(c);
        // The entry restores the whole context in a new handle.
        if (a.problem.empty()) {
            REQUIRE(specula_prompt_cache_open(cache_dir.c_str(), nullptr, &c, nullptr) == SPECULA_OK);
            specula_session *s = env.new_session();
            size_t restored = 0;
            if (specula_prompt_cache_restore(c, s, ctx.data(), ctx.size(), &restored, nullptr) != SPECULA_OK || restored == 0)
                a.problem = "the stored entry does not restore";
            specula_session_destroy(s);
            specula_prompt_cache_destroy(c);
        }
        return a;
    }));

    // The cache now holds the context; restore it into new sessions.
    std::vector<int32_t> want_after;
    {
        specula_session *s = env.new_session();
        REQUIRE(specula_session_append_tokens(s, ctx.data(), ctx.size(), nullptr) == SPECULA_OK);
        specula_status st;
        want_after = continuation(s, &st);
        specula_session_destroy(s);
    }
    require_clean(inject_loop("prompt_cache_restore", [&](int64_t n) {
        Attempt a;
        // A handle per attempt: a handle caches the entries' tokens, which the leak check would count.
        specula_prompt_cache *cache = nullptr;
        REQUIRE(specula_prompt_cache_open(cache_dir.c_str(), nullptr, &cache, nullptr) == SPECULA_OK);
        specula_session *s = env.new_session();
        size_t restored = 0;
        specula_error *err = nullptr;
        const specula_status st = armed(n, a.fired, [&] { return specula_prompt_cache_restore(cache, s, ctx.data(), ctx.size(), &restored, &err); });
        a.problem = check_status(st, err, a.fired);
        specula_error_destroy(err);
        if (a.problem.empty() && st != SPECULA_OK) {
            if (specula_session_n_tokens(s) != 0) a.problem = "a failed restore changed the session";
            else if (specula_prompt_cache_restore(cache, s, ctx.data(), ctx.size(), &restored, nullptr) != SPECULA_OK) a.problem = "retry failed";
        }
        if (a.problem.empty()) {
            if (specula_session_append_tokens(s, ctx.data() + restored, ctx.size() - restored, nullptr) != SPECULA_OK)
                a.problem = "append after restore failed";
            specula_status g;
            if (a.problem.empty() && continuation(s, &g) != want_after) a.problem = "continued differently after the restore";
        }
        specula_session_destroy(s);
        specula_prompt_cache_destroy(cache);
        return a;
    }));
    specula_session_destroy(src);
}

TEST_CASE("snapshot buffers and files - fork - prompt cache", "[alloc]") { snapshot_loops(kDense, kStride); }

TEST_CASE("snapshots with drafters - every allocation", "[alloc][slow]") { snapshot_loops(0, 1); }
