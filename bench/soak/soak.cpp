// soak: many threads on one shared specula_model for a given time, through the public C ABI only (issue 21,
// "Reliability"). Each thread, with its own seeded RNG, creates and destroys sessions, appends prompts, generates with
// a random drafter (none, n-gram, LongSpec, a draft model, LongSpec + n-gram) and random sampler settings, rewinds,
// cancels other threads' sessions, saves and loads snapshots (buffer, file, fork) and uses a shared prompt cache.
// Checks: every greedy run that was not cancelled gives exactly the tokens of plain greedy decoding of the same
// context (references computed single-threaded, without drafters, at start; a cancelled run must give a prefix of
// them); a snapshot loaded into another session continues exactly like the original (greedy and sampled).
// Expected statuses (CANCELLED after a cancel, CONTEXT_FULL on a small context) are counted, not errors.
// Exits 1 on any unexpected status or mismatch.
//
//   soak --seconds S --model F [--draft D] [--draft-model M] [--threads 8] [--seed N] [--report-every 5]
//
// Sharing: sessions are single-threaded (specula.h); the only cross-thread call is specula_session_cancel(), made
// while holding the registry's mutex on a session that is registered. A thread unregisters its session (under that
// mutex) before destroying it, so no cancel can reach a destroyed session.
#include <specula/specula.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

// ---- counters --------------------------------------------------------------------------------------------
enum Op {
    OP_CREATE, OP_DESTROY, OP_GREEDY, OP_NEXT, OP_SAMPLED, OP_REWIND, OP_CANCEL, OP_SNAP_BUFFER, OP_SNAP_FILE,
    OP_FORK, OP_PROMPT_CACHE, OP_CONTEXT_FULL, OP_TOKENIZE, OP_COUNT
};
const char *const kOpNames[OP_COUNT] = {"create", "destroy", "greedy", "next", "sampled", "rewind", "cancel",
                                        "snap_buf", "snap_file", "fork", "pcache", "ctx_full", "tokenize"};

std::atomic<int64_t> g_ops[OP_COUNT];
std::atomic<int64_t> g_errors{0}, g_mismatches{0}, g_cancelled{0}, g_context_full{0}, g_checked_greedy{0},
    g_checked_snapshots{0}, g_tokens{0};
std::atomic<bool> g_stop{false};
std::mutex g_print_mutex;

void report_error(const char *what, specula_status st, specula_error *err) {
    g_errors++;
    std::lock_guard<std::mutex> lock(g_print_mutex);
    if (g_errors.load() <= 50)
        std::fprintf(stderr, "ERROR %s: %s: %s\n", what, specula_status_string(st), specula_error_message(err));
}

void report_mismatch(const std::string &what) {
    g_mismatches++;
    std::lock_guard<std::mutex> lock(g_print_mutex);
    if (g_mismatches.load() <= 50) std::fprintf(stderr, "MISMATCH %s\n", what.c_str());
}

long rss_kib() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

// ---- shared state ----------------------------------------------------------------------------------------
struct Shared {
    specula_model *model = nullptr;
    specula_model *draft_model = nullptr;  // an independent draft model (another file, or the target itself)
    specula_draft *draft = nullptr;        // LongSpec draft, when --draft is given
    specula_prompt_cache *cache = nullptr;
    std::string tmpdir;
    std::vector<std::string> prompts;
    std::vector<std::vector<int32_t>> prompt_tokens;  // tokenized with ADD_SPECIAL
    // refs[kv][prompt]: plain greedy tokens after the prompt (up to kRefLen, fewer when EOS came first).
    std::vector<std::vector<int32_t>> refs[2];
};
constexpr int kRefLen = 64;
constexpr int kNctx = 256;
const int32_t kKvTypes[2] = {SPECULA_KV_F16, SPECULA_KV_F32};

Shared g;

// Registry of live sessions: a cancel is only ever made on a registered session, under the mutex.
std::mutex g_reg_mutex;
std::map<int64_t, specula_session *> g_registry;
std::atomic<int64_t> g_next_id{1};

void reg_add(int64_t id, specula_session *s) {
    std::lock_guard<std::mutex> lock(g_reg_mutex);
    g_registry[id] = s;
}
void reg_remove(int64_t id) {
    std::lock_guard<std::mutex> lock(g_reg_mutex);
    g_registry.erase(id);
}

// ---- one run's output ------------------------------------------------------------------------------------
struct Collected {
    std::vector<int32_t> tokens;
    std::string text;
};
int32_t collect(const specula_token_event *ev, void *user) {
    auto *c = static_cast<Collected *>(user);
    if (ev->token != SPECULA_TOKEN_NULL) c->tokens.push_back(ev->token);
    c->text.append(ev->text, ev->text_len);
    return 1;
}

struct Session {
    int64_t id = 0;
    specula_session *s = nullptr;
    int kv = 0;            // index into kKvTypes
    int n_ctx = kNctx;
    // What the context is known to hold, for checks: prompt index and how many reference tokens follow it; -1 when
    // unknown (a sampled run, a cancelled run, a text append).
    int prompt = -1;
    int n_ref = 0;
    bool greedy = false;   // the sampler is greedy
    int drafter = 0;       // the drafter kind attached
    int widths = 0;        // which tree widths
    int ngram_nodes = 0;
    int tree_mode = 0;
};

enum Drafter { D_NONE, D_NGRAM, D_LONGSPEC, D_DRAFT_MODEL, D_LONGSPEC_NGRAM, D_COUNT };
const char *const kDrafterNames[D_COUNT] = {"none", "ngram", "longspec", "draft-model", "longspec+ngram"};

class Worker {
public:
    Worker(int index, uint64_t seed) : index_(index), rng_(seed) {}

    void run() {
        while (!g_stop.load(std::memory_order_relaxed)) step();
        while (!sessions_.empty()) destroy(0);
    }

private:
    int index_;
    std::mt19937_64 rng_;
    std::vector<std::unique_ptr<Session>> sessions_;

    int rnd(int n) { return int(rng_() % uint64_t(n)); }
    bool chance(int percent) { return rnd(100) < percent; }

    // Checks a status: OK and the expected ones pass (the expected ones are counted); anything else is an error.
    // Takes the error's address, not its value: in ok("x", call(&err), &err) the compiler may read err before the
    // call sets it (the order of evaluation of arguments is unspecified), which leaked every error object.
    bool ok(const char *what, specula_status st, specula_error **errp) {
        specula_error *err = *errp;
        *errp = nullptr;
        if (st == SPECULA_OK) {
            specula_error_destroy(err);
            return true;
        }
        if (st == SPECULA_ERR_CANCELLED) g_cancelled++;
        else if (st == SPECULA_ERR_CONTEXT_FULL) g_context_full++;
        else report_error(what, st, err);
        specula_error_destroy(err);
        return false;
    }

    Session *create(int kv = -1, int n_ctx = -1) {
        auto ses = std::make_unique<Session>();
        ses->kv = kv >= 0 ? kv : rnd(2);
        ses->n_ctx = n_ctx > 0 ? n_ctx : chance(15) ? 64 : kNctx;
        specula_session_options so;
        specula_session_options_init(&so);
        so.n_ctx = ses->n_ctx;
        so.n_threads = 1 + rnd(2);
        so.n_batch = chance(50) ? 0 : 1 + rnd(32);
        so.backend = SPECULA_BACKEND_CPU;
        so.kv_type = kKvTypes[ses->kv];
        specula_error *err = nullptr;
        g_ops[OP_CREATE]++;
        const specula_status st = specula_session_create(g.model, &so, nullptr, &ses->s, &err);
        if (!ok("session_create", st, &err)) return nullptr;
        ses->id = g_next_id++;
        reg_add(ses->id, ses->s);
        sessions_.push_back(std::move(ses));
        return sessions_.back().get();
    }

    void destroy(size_t i) {
        g_ops[OP_DESTROY]++;
        reg_remove(sessions_[i]->id);  // after this, no other thread can cancel it
        specula_session_destroy(sessions_[i]->s);
        sessions_.erase(sessions_.begin() + long(i));
    }

    Session *pick() {
        if (sessions_.empty() || (sessions_.size() < 3 && chance(5))) return create();
        return sessions_[size_t(rnd(int(sessions_.size())))].get();
    }

    bool set_drafter(Session *ses, int kind, bool fixed_tree) {
        if (kind == D_LONGSPEC || kind == D_LONGSPEC_NGRAM)
            if (g.draft == nullptr) kind = D_NGRAM;
        const int widths = rnd(3);
        const int ngram_nodes = 4 + rnd(16);
        const int tree_mode = fixed_tree ? SPECULA_TREE_FIXED : (chance(50) ? SPECULA_TREE_AUTO : SPECULA_TREE_FIXED);
        return attach(ses, kind, widths, ngram_nodes, tree_mode);
    }

    // The same drafters as another session (a Full snapshot with drafter state needs them).
    bool copy_drafter(Session *to, const Session *from) {
        return attach(to, from->drafter, from->widths, from->ngram_nodes, from->tree_mode);
    }

    bool attach(Session *ses, int kind, int widths, int ngram_nodes, int tree_mode) {
        specula_speculative_options sp;
        specula_speculative_options_init(&sp);
        static const int32_t widths_a[] = {2, 4, 4};
        static const int32_t widths_b[] = {1, 1, 1, 1};
        static const int32_t widths_c[] = {4, 16, 16, 16, 16};
        switch (kind) {
        case D_NONE: break;
        case D_NGRAM: sp.ngram = 1; break;
        case D_LONGSPEC: sp.draft = g.draft; break;
        case D_DRAFT_MODEL: sp.draft_model = g.draft_model; break;
        case D_LONGSPEC_NGRAM: sp.draft = g.draft; sp.ngram = 1; break;
        }
        if (kind != D_NONE) {
            switch (widths) {
            case 0: sp.tree_widths = widths_a; sp.n_tree_levels = 3; break;
            case 1: sp.tree_widths = widths_b; sp.n_tree_levels = 4; break;
            default: sp.tree_widths = widths_c; sp.n_tree_levels = 5; break;
            }
            sp.tree_mode = tree_mode;
            if (kind == D_NGRAM || kind == D_LONGSPEC_NGRAM) sp.ngram_nodes = ngram_nodes;
        }
        specula_error *err = nullptr;
        if (!ok("set_speculative", specula_session_set_speculative(ses->s, &sp, &err), &err)) return false;
        ses->drafter = kind;
        ses->widths = widths;
        ses->ngram_nodes = ngram_nodes;
        ses->tree_mode = tree_mode;
        return true;
    }

    bool set_greedy(Session *ses) {
        specula_sampler_options so;
        specula_sampler_options_init(&so);
        so.temperature = 0.0f;
        specula_error *err = nullptr;
        if (!ok("set_sampler", specula_session_set_sampler(ses->s, &so, &err), &err)) return false;
        ses->greedy = true;
        return true;
    }

    bool set_sampled(Session *ses) {
        specula_sampler_options so;
        specula_sampler_options_init(&so);
        so.temperature = 0.2f + 1.3f * float(rnd(100)) / 100.0f;
        so.top_k = chance(30) ? 0 : 1 + rnd(80);
        so.top_p = chance(30) ? 1.0f : 0.5f + float(rnd(50)) / 100.0f;
        so.min_p = chance(30) ? 0.0f : float(rnd(20)) / 100.0f;
        if (chance(30)) so.repeat_penalty = 1.0f + float(rnd(50)) / 100.0f;
        if (chance(20)) so.presence_penalty = float(rnd(100)) / 100.0f;
        if (chance(20)) so.frequency_penalty = float(rnd(100)) / 100.0f;
        if (chance(20)) so.penalty_last_n = chance(50) ? -1 : rnd(128);
        if (chance(15)) so.context_penalty = 1.0f + float(rnd(50)) / 100.0f;
        so.seed = rng_();
        specula_error *err = nullptr;
        if (!ok("set_sampler", specula_session_set_sampler(ses->s, &so, &err), &err)) return false;
        ses->greedy = false;
        return true;
    }

    // Context := prompt p (through the C API: rewind + append), nothing evaluated yet.
    bool load_prompt(Session *ses, int p) {
        specula_error *err = nullptr;
        ses->prompt = -1;
        if (!ok("rewind", specula_session_rewind(ses->s, 0, &err), &err)) return false;
        const std::string &text = g.prompts[size_t(p)];
        if (!ok("append_text", specula_session_append_text(ses->s, text.data(), text.size(), SPECULA_TOKENIZE_ADD_SPECIAL, &err), &err))
            return false;
        ses->prompt = p;
        ses->n_ref = 0;
        return true;
    }

    // Generates n tokens; returns the status; *cancelled tells whether the run was cancelled.
    specula_status generate(Session *ses, int n, Collected &out, specula_stop_reason *stop) {
        specula_generate_options go;
        specula_generate_options_init(&go);
        go.max_tokens = n;
        if (chance(10)) go.top_logits = 1 + rnd(8);
        specula_error *err = nullptr;
        const specula_status st = specula_session_generate(ses->s, &go, collect, &out, stop, &err);
        g_tokens += int64_t(out.tokens.size());
        ok("generate", st, &err);
        return st;
    }

    // The reference continuation of session's known context, n tokens (fewer when EOS ends it).
    std::vector<int32_t> expected(const Session *ses, int n) const {
        const auto &ref = g.refs[ses->kv][size_t(ses->prompt)];
        const size_t from = std::min(ref.size(), size_t(ses->n_ref));
        const size_t to = std::min(ref.size(), size_t(ses->n_ref + n));
        return std::vector<int32_t>(ref.begin() + long(from), ref.begin() + long(to));
    }

    static std::string describe(const Session *ses, const char *what) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s (prompt %d after %d ref tokens, kv %s, drafter %s)", what, ses->prompt,
                      ses->n_ref, ses->kv == 0 ? "f16" : "f32", kDrafterNames[ses->drafter]);
        return buf;
    }

    // Compares a greedy run's tokens with the reference; a cancelled run must give a prefix. Updates n_ref.
    void check_greedy(Session *ses, const Collected &out, specula_status st, specula_stop_reason stop, int n,
                      const char *what) {
        const bool cancelled = st == SPECULA_ERR_CANCELLED || stop == SPECULA_STOP_CANCELLED;
        if (cancelled && st == SPECULA_OK) g_cancelled++;
        const std::vector<int32_t> want = expected(ses, n);
        const bool full_run = !cancelled && st == SPECULA_OK && stop != SPECULA_STOP_CONTEXT_FULL;
        bool match;
        if (full_run) match = out.tokens == want;
        else match = out.tokens.size() <= want.size() && std::equal(out.tokens.begin(), out.tokens.end(), want.begin());
        if (!match) {
            std::string msg = describe(ses, what) + ": got";
            for (int32_t t : out.tokens) msg += " " + std::to_string(t);
            msg += " want";
            for (int32_t t : want) msg += " " + std::to_string(t);
            report_mismatch(msg);
            ses->prompt = -1;
            return;
        }
        if (full_run) g_checked_greedy++;
        ses->n_ref += int(out.tokens.size());
        // After a cancel the context still matches the reference (the emitted tokens are a prefix), but a round's
        // accepted tokens may be held back: continue checking only from a plain state.
        if (cancelled || st != SPECULA_OK) ses->prompt = -1;
    }

    // ---- operations ------------------------------------------------------------------------------------
    void op_greedy(bool pull) {
        Session *ses = pick();
        if (ses == nullptr) return;
        g_ops[pull ? OP_NEXT : OP_GREEDY]++;
        if (!set_greedy(ses) || !set_drafter(ses, rnd(D_COUNT), false)) return;
        const int p = rnd(int(g.prompts.size()));
        if (!load_prompt(ses, p)) return;
        // One to three chunks: generating N then M gives what one call of N + M gives.
        const int chunks = 1 + rnd(3);
        for (int c = 0; c < chunks && ses->prompt >= 0; c++) {
            const int n = 1 + rnd(std::min(24, kRefLen - ses->n_ref > 0 ? kRefLen - ses->n_ref : 1));
            if (ses->n_ref + n > kRefLen || int(g.prompt_tokens[size_t(p)].size()) + ses->n_ref + n >= ses->n_ctx) break;
            Collected out;
            specula_stop_reason stop = SPECULA_STOP_NONE;
            specula_status st;
            if (pull) st = next_loop(ses, n, out, &stop);
            else st = generate(ses, n, out, &stop);
            check_greedy(ses, out, st, stop, n, pull ? "next" : "generate");
        }
    }

    specula_status next_loop(Session *ses, int n, Collected &out, specula_stop_reason *stop) {
        specula_generate_options go;
        specula_generate_options_init(&go);
        go.max_tokens = ses->n_ref + n;  // for specula_session_next it counts since the last append (the prompt)
        for (;;) {
            specula_token_event ev;
            std::memset(&ev, 0, sizeof ev);
            ev.struct_size = sizeof ev;
            specula_error *err = nullptr;
            const specula_status st = specula_session_next(ses->s, &go, &ev, &err);
            if (st != SPECULA_OK) {
                ok("next", st, &err);
                *stop = SPECULA_STOP_CANCELLED;
                return st;
            }
            specula_error_destroy(err);
            if (ev.token != SPECULA_TOKEN_NULL) out.tokens.push_back(ev.token);
            g_tokens++;
            if (ev.stop != SPECULA_STOP_NONE) {
                *stop = ev.stop;
                return SPECULA_OK;
            }
        }
    }

    void op_sampled() {
        Session *ses = pick();
        if (ses == nullptr) return;
        g_ops[OP_SAMPLED]++;
        if (!set_sampled(ses) || !set_drafter(ses, rnd(D_COUNT), false)) return;
        if (chance(50) || specula_session_n_tokens(ses->s) == 0) {
            if (!load_prompt(ses, rnd(int(g.prompts.size())))) return;
        }
        ses->prompt = -1;
        if (specula_session_n_tokens(ses->s) + 40 >= ses->n_ctx) return;
        Collected out;
        specula_stop_reason stop = SPECULA_STOP_NONE;
        const specula_status st = generate(ses, 1 + rnd(32), out, &stop);
        if (st == SPECULA_OK && stop == SPECULA_STOP_CANCELLED) g_cancelled++;
    }

    void op_rewind() {
        Session *ses = pick();
        if (ses == nullptr) return;
        g_ops[OP_REWIND]++;
        const int n = specula_session_n_tokens(ses->s);
        specula_error *err = nullptr;
        if (!ok("rewind", specula_session_rewind(ses->s, n > 0 ? rnd(n + 1) : 0, &err), &err)) return;
        ses->prompt = -1;
        static const char *const bits[] = {" and then", " The dog", " said,", " happy", "\n", " Lily wanted"};
        const char *b = bits[rnd(6)];
        err = nullptr;
        ok("append_text", specula_session_append_text(ses->s, b, std::strlen(b), 0, &err), &err);
        if (chance(50)) {
            err = nullptr;
            ok("evaluate", specula_session_evaluate(ses->s, &err), &err);
        }
    }

    void op_cancel() {
        g_ops[OP_CANCEL]++;
        std::lock_guard<std::mutex> lock(g_reg_mutex);
        if (g_registry.empty()) return;
        // Another thread's session preferably (any registered one: it cannot be destroyed while we hold the lock).
        auto it = g_registry.begin();
        std::advance(it, rnd(int(g_registry.size())));
        specula_session_cancel(it->second);
    }

    void op_tokenize() {
        g_ops[OP_TOKENIZE]++;
        const std::string &text = g.prompts[size_t(rnd(int(g.prompts.size())))];
        std::vector<int32_t> ids(512);
        size_t n = 0;
        specula_error *err = nullptr;
        if (!ok("tokenize", specula_model_tokenize(g.model, text.data(), text.size(), 0, ids.data(), ids.size(), &n, &err), &err))
            return;
        std::vector<char> buf(4096);
        size_t len = 0;
        err = nullptr;
        if (!ok("detokenize", specula_model_detokenize(g.model, ids.data(), n, 0, buf.data(), buf.size(), &len, &err), &err))
            return;
        // SentencePiece adds a leading space to the first word.
        std::string back(buf.data(), len);
        if (back != text && back != " " + text && back.substr(back.empty() ? 0 : 1) != text)
            report_mismatch("detokenize(tokenize(\"" + text + "\")) = \"" + back + "\"");
    }

    // A fresh session with the same settings and drafters as ses, or nullptr.
    Session *clone_settings(const Session *ses) {
        Session *copy = create(ses->kv, ses->n_ctx);
        if (copy == nullptr) return nullptr;
        if (!copy_drafter(copy, ses)) return nullptr;
        return copy;
    }

    // Snapshot of a session after a generation; loaded into another session, both must continue the same.
    void op_snapshot(int how) {
        g_ops[how == 0 ? OP_SNAP_BUFFER : how == 1 ? OP_SNAP_FILE : OP_FORK]++;
        if (sessions_.size() >= 4) destroy(size_t(rnd(int(sessions_.size()))));
        Session *a = pick();
        if (a == nullptr) return;
        const bool greedy = chance(50);
        if (!(greedy ? set_greedy(a) : set_sampled(a))) return;
        // Sampled continuation is reproducible with FIXED trees only (specula.h on SPECULA_TREE_AUTO).
        if (!set_drafter(a, rnd(D_COUNT), true)) return;
        const int p = rnd(int(g.prompts.size()));
        if (!load_prompt(a, p)) return;
        Collected first;
        specula_stop_reason stop = SPECULA_STOP_NONE;
        const int n1 = 1 + rnd(20);
        specula_status st = generate(a, n1, first, &stop);
        if (greedy) check_greedy(a, first, st, stop, n1, "before snapshot");
        if (st != SPECULA_OK || stop == SPECULA_STOP_CANCELLED || stop == SPECULA_STOP_CONTEXT_FULL) {
            if (st == SPECULA_OK && stop == SPECULA_STOP_CANCELLED) g_cancelled++;
            return;
        }
        const int64_t a_id = a->id;
        Session *b = clone_settings(a);
        // clone_settings may have destroyed sessions: find a again.
        a = nullptr;
        for (auto &s : sessions_)
            if (s->id == a_id) a = s.get();
        if (b == nullptr || a == nullptr) return;
        specula_snapshot_options so;
        specula_snapshot_options_init(&so);
        so.compression_level = rnd(4) - 1;
        specula_error *err = nullptr;
        bool loaded = false;
        if (how == 0) {
            size_t size = 0;
            st = specula_session_save_buffer(a->s, &so, nullptr, 0, &size, &err);
            if (st != SPECULA_ERR_BUFFER_TOO_SMALL) {
                if (st == SPECULA_OK) report_error("save_buffer(NULL) returned OK", st, err);
                else ok("save_buffer(size)", st, &err);
                specula_error_destroy(err);
                return;
            }
            specula_error_destroy(err);
            std::vector<uint8_t> buf(size);
            err = nullptr;
            if (!ok("save_buffer", specula_session_save_buffer(a->s, &so, buf.data(), buf.size(), &size, &err), &err)) return;
            err = nullptr;
            loaded = ok("load_buffer", specula_session_load_buffer(b->s, buf.data(), size, &err), &err);
        } else if (how == 1) {
            const std::string path = g.tmpdir + "/t" + std::to_string(index_) + ".snap";
            if (!ok("save_file", specula_session_save_file(a->s, path.c_str(), &so, &err), &err)) return;
            err = nullptr;
            loaded = ok("load_file", specula_session_load_file(b->s, path.c_str(), &err), &err);
            std::remove(path.c_str());
        } else {
            loaded = ok("fork", specula_session_fork(a->s, b->s, &so, &err), &err);
        }
        if (!loaded) return;
        b->prompt = a->prompt;
        b->n_ref = a->n_ref;
        b->greedy = a->greedy;
        const int n2 = 1 + rnd(20);
        if (int(g.prompt_tokens[size_t(p)].size()) + n1 + n2 + 8 >= a->n_ctx) return;
        Collected ca, cb;
        specula_stop_reason sa = SPECULA_STOP_NONE, sb = SPECULA_STOP_NONE;
        const specula_status st_a = generate(a, n2, ca, &sa);
        const specula_status st_b = generate(b, n2, cb, &sb);
        const bool clean = st_a == SPECULA_OK && st_b == SPECULA_OK && sa != SPECULA_STOP_CANCELLED && sb != SPECULA_STOP_CANCELLED;
        if (!clean) {
            if (st_a == SPECULA_OK && sa == SPECULA_STOP_CANCELLED) g_cancelled++;
            if (st_b == SPECULA_OK && sb == SPECULA_STOP_CANCELLED) g_cancelled++;
            return;
        }
        g_checked_snapshots++;
        if (ca.tokens != cb.tokens || ca.text != cb.text)
            report_mismatch(describe(a, how == 0 ? "snapshot buffer" : how == 1 ? "snapshot file" : "fork") +
                            std::string(greedy ? " greedy" : " sampled") + ": the loaded session continued differently");
        if (greedy) check_greedy(a, ca, st_a, sa, n2, "after snapshot");
    }

    void op_prompt_cache() {
        g_ops[OP_PROMPT_CACHE]++;
        Session *ses = pick();
        if (ses == nullptr || g.cache == nullptr) return;
        if (!set_greedy(ses) || !set_drafter(ses, rnd(D_COUNT), false)) return;
        const int p = rnd(int(g.prompts.size()));
        const auto &toks = g.prompt_tokens[size_t(p)];
        specula_error *err = nullptr;
        if (!ok("rewind", specula_session_rewind(ses->s, 0, &err), &err)) return;
        ses->prompt = -1;
        size_t restored = 0;
        err = nullptr;
        if (!ok("prompt_cache_restore", specula_prompt_cache_restore(g.cache, ses->s, toks.data(), toks.size(), &restored, &err), &err))
            return;
        err = nullptr;
        if (!ok("append_tokens", specula_session_append_tokens(ses->s, toks.data() + restored, toks.size() - restored, &err), &err))
            return;
        ses->prompt = p;
        ses->n_ref = 0;
        Collected out;
        specula_stop_reason stop = SPECULA_STOP_NONE;
        const int n = 1 + rnd(16);
        const specula_status st = generate(ses, n, out, &stop);
        check_greedy(ses, out, st, stop, n, restored > 0 ? "prompt cache hit" : "prompt cache miss");
        if (st == SPECULA_OK && chance(50)) {
            err = nullptr;
            ok("prompt_cache_store", specula_prompt_cache_store(g.cache, ses->s, &err), &err);
        }
    }

    // A small context: generate until it is full; CONTEXT_FULL (status or stop) is expected.
    void op_context_full() {
        g_ops[OP_CONTEXT_FULL]++;
        Session *ses = pick();
        if (ses == nullptr || ses->n_ctx != 64) return;
        if (!(chance(50) ? set_greedy(ses) : set_sampled(ses)) || !set_drafter(ses, rnd(D_COUNT), false)) return;
        if (!load_prompt(ses, rnd(int(g.prompts.size())))) return;
        specula_generate_options go;
        specula_generate_options_init(&go);
        go.max_tokens = -1;
        go.stop_at_eog = 0;
        for (int i = 0; i < 2; i++) {
            Collected out;
            specula_stop_reason stop = SPECULA_STOP_NONE;
            specula_error *err = nullptr;
            const specula_status st = specula_session_generate(ses->s, &go, collect, &out, &stop, &err);
            g_tokens += int64_t(out.tokens.size());
            if (st == SPECULA_OK && stop == SPECULA_STOP_CONTEXT_FULL) g_context_full++;
            else if (st == SPECULA_OK && stop == SPECULA_STOP_CANCELLED) g_cancelled++;
            else if (st == SPECULA_OK) report_error("generate until full: stopped early", st, err);
            if (!ok("generate until full", st, &err)) {}
        }
        ses->prompt = -1;
    }

    void step() {
        const int r = rnd(100);
        if (r < 4) create();
        else if (r < 8) { if (!sessions_.empty()) destroy(size_t(rnd(int(sessions_.size())))); }
        else if (r < 28) op_greedy(false);
        else if (r < 34) op_greedy(true);
        else if (r < 46) op_sampled();
        else if (r < 52) op_rewind();
        else if (r < 60) op_cancel();
        else if (r < 66) op_snapshot(0);
        else if (r < 71) op_snapshot(1);
        else if (r < 77) op_snapshot(2);
        else if (r < 85) op_prompt_cache();
        else if (r < 92) op_context_full();
        else op_tokenize();
        if (sessions_.size() > 4) destroy(0);
    }
};

// ---- references ------------------------------------------------------------------------------------------
bool compute_references() {
    for (int kv = 0; kv < 2; kv++) {
        specula_session_options so;
        specula_session_options_init(&so);
        so.n_ctx = kNctx;
        so.n_threads = 1;
        so.backend = SPECULA_BACKEND_CPU;
        so.kv_type = kKvTypes[kv];
        specula_sampler_options sa;
        specula_sampler_options_init(&sa);
        sa.temperature = 0.0f;
        for (const std::string &prompt : g.prompts) {
            specula_session *s = nullptr;
            specula_error *err = nullptr;
            if (specula_session_create(g.model, &so, &sa, &s, &err) != SPECULA_OK ||
                specula_session_append_text(s, prompt.data(), prompt.size(), SPECULA_TOKENIZE_ADD_SPECIAL, &err) != SPECULA_OK) {
                std::fprintf(stderr, "soak: reference: %s\n", specula_error_message(err));
                specula_error_destroy(err);
                specula_session_destroy(s);
                return false;
            }
            if (kv == 0) {
                size_t n = 0;
                specula_session_tokens(s, nullptr, 0, &n, nullptr);
                std::vector<int32_t> toks(n);
                specula_session_tokens(s, toks.data(), toks.size(), &n, nullptr);
                g.prompt_tokens.push_back(toks);
            }
            specula_generate_options go;
            specula_generate_options_init(&go);
            go.max_tokens = kRefLen;
            Collected out;
            if (specula_session_generate(s, &go, collect, &out, nullptr, &err) != SPECULA_OK) {
                std::fprintf(stderr, "soak: reference: %s\n", specula_error_message(err));
                specula_error_destroy(err);
                specula_session_destroy(s);
                return false;
            }
            g.refs[kv].push_back(out.tokens);
            specula_session_destroy(s);
        }
    }
    return true;
}

void usage() {
    std::fprintf(stderr, "usage: soak --seconds S --model F [--draft LONGSPEC.gguf] [--draft-model M.gguf] [--threads 8] "
                         "[--seed N] [--report-every 5]\n");
}

std::string op_counts() {
    std::string s;
    for (int i = 0; i < OP_COUNT; i++) s += std::string(i ? " " : "") + kOpNames[i] + "=" + std::to_string(g_ops[i].load());
    return s;
}

}  // namespace

int main(int argc, char **argv) {
    double seconds = 60;
    std::string model_path, draft_path, draft_model_path;
    int threads = 8;
    uint64_t seed = 1;
    double report_every = 5;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (i + 1 >= argc) { usage(); return 2; }
        const char *v = argv[++i];
        if (a == "--seconds") seconds = std::atof(v);
        else if (a == "--model") model_path = v;
        else if (a == "--draft") draft_path = v;
        else if (a == "--draft-model") draft_model_path = v;
        else if (a == "--threads") threads = std::max(1, std::atoi(v));
        else if (a == "--seed") seed = std::strtoull(v, nullptr, 10);
        else if (a == "--report-every") report_every = std::max(0.5, std::atof(v));
        else { usage(); return 2; }
    }
    if (model_path.empty()) { usage(); return 2; }

    specula_error *err = nullptr;
    if (specula_model_load(model_path.c_str(), nullptr, &g.model, &err) != SPECULA_OK) {
        std::fprintf(stderr, "soak: %s: %s\n", model_path.c_str(), specula_error_message(err));
        specula_error_destroy(err);
        return 2;
    }
    if (!draft_path.empty() && specula_draft_load(draft_path.c_str(), g.model, &g.draft, &err) != SPECULA_OK) {
        std::fprintf(stderr, "soak: %s: %s\n", draft_path.c_str(), specula_error_message(err));
        return 2;
    }
    if (draft_model_path.empty()) g.draft_model = specula_model_retain(g.model);  // cheap: the target drafts itself
    else if (specula_model_load(draft_model_path.c_str(), nullptr, &g.draft_model, &err) != SPECULA_OK) {
        std::fprintf(stderr, "soak: %s: %s\n", draft_model_path.c_str(), specula_error_message(err));
        return 2;
    }
    char tmpl[] = "/tmp/specula-soak-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) { std::perror("mkdtemp"); return 2; }
    g.tmpdir = tmpl;
    specula_prompt_cache_options pco;
    specula_prompt_cache_options_init(&pco);
    pco.max_bytes = 2u << 20;  // small: eviction runs often
    if (specula_prompt_cache_open((g.tmpdir + "/cache").c_str(), &pco, &g.cache, &err) != SPECULA_OK) {
        std::fprintf(stderr, "soak: prompt cache: %s\n", specula_error_message(err));
        return 2;
    }
    g.prompts = {"Once upon a time", "One day, a little girl named Lily", "The dog ran to the park and",
                 "Tom and Sue were friends. They liked to", "Once upon a time, there was a big red ball. It"};
    const auto t0 = std::chrono::steady_clock::now();
    if (!compute_references()) return 2;
    const double ref_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("soak: model %s, draft %s, draft model %s, %d threads, seed %" PRIu64 ", %.0f s; references: %zu prompts x 2 KV "
                "types x %d tokens in %.2f s\n",
                model_path.c_str(), draft_path.empty() ? "(none)" : draft_path.c_str(),
                draft_model_path.empty() ? "(the target)" : draft_model_path.c_str(), threads, seed, seconds,
                g.prompts.size(), kRefLen, ref_s);
    std::fflush(stdout);

    const long rss_start = rss_kib();
    std::vector<std::pair<double, long>> rss;  // (elapsed, KiB), sampled every second
    std::vector<std::thread> pool;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < threads; i++)
        pool.emplace_back([i, seed] { Worker(i, seed * 1000003u + uint64_t(i)).run(); });
    double next_report = report_every;
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (rss.empty() || el - rss.back().first >= 1.0) rss.emplace_back(el, rss_kib());
        if (el >= next_report || el >= seconds) {
            std::printf("[%7.1f s] ops %s | tokens %" PRId64 " | checked greedy %" PRId64 " snapshots %" PRId64
                        " | errors %" PRId64 " mismatches %" PRId64 " | cancelled %" PRId64 " context_full %" PRId64
                        " | rss %ld KiB\n",
                        el, op_counts().c_str(), g_tokens.load(), g_checked_greedy.load(), g_checked_snapshots.load(),
                        g_errors.load(), g_mismatches.load(), g_cancelled.load(), g_context_full.load(), rss_kib());
            std::fflush(stdout);
            next_report += report_every;
        }
        if (el >= seconds) break;
    }
    g_stop = true;
    for (auto &t : pool) t.join();
    const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    specula_prompt_cache_stats pcs;
    std::memset(&pcs, 0, sizeof pcs);
    pcs.struct_size = sizeof pcs;
    specula_prompt_cache_get_stats(g.cache, &pcs, nullptr);
    specula_prompt_cache_destroy(g.cache);
    specula_draft_destroy(g.draft);
    specula_model_destroy(g.draft_model);
    specula_model_destroy(g.model);
    std::system(("rm -rf '" + g.tmpdir + "'").c_str());

    // RSS trend: mean of the first quarter of the samples against the last quarter.
    double first = 0, last = 0;
    long peak = 0;
    const size_t q = std::max<size_t>(1, rss.size() / 4);
    for (size_t i = 0; i < q && i < rss.size(); i++) first += double(rss[i].second);
    for (size_t i = rss.size() - std::min(q, rss.size()); i < rss.size(); i++) last += double(rss[i].second);
    for (auto &r : rss) peak = std::max(peak, r.second);
    first /= double(q);
    last /= double(q);
    int64_t total_ops = 0;
    for (int i = 0; i < OP_COUNT; i++) total_ops += g_ops[i].load();
    std::printf("summary: %.1f s, %d threads, %" PRId64 " operations (%s), %" PRId64 " tokens generated, %" PRId64
                " greedy runs checked against the reference, %" PRId64 " snapshot continuations checked, prompt cache %" PRId64
                " hits / %" PRId64 " misses / %" PRId64 " stores / %" PRId64 " evictions\n",
                total_s, threads, total_ops, op_counts().c_str(), g_tokens.load(), g_checked_greedy.load(),
                g_checked_snapshots.load(), int64_t(pcs.hits), int64_t(pcs.misses), int64_t(pcs.stores), int64_t(pcs.evictions));
    std::printf("summary: expected statuses: cancelled %" PRId64 ", context_full %" PRId64 "\n", g_cancelled.load(),
                g_context_full.load());
    // The first quarter holds the warm-up (allocator arenas, the packed weights, the prompt cache filling up): the
    // second quarter against the last tells whether memory still grows once warm.
    double second = 0;
    for (size_t i = q; i < 2 * q && i < rss.size(); i++) second += double(rss[i].second);
    second /= double(q);
    std::printf("summary: rss at start %ld KiB, first quarter mean %.0f KiB, second quarter %.0f KiB, last quarter %.0f KiB "
                "(last vs first %+.1f%%, last vs second %+.1f%%), peak %ld KiB, %zu samples\n",
                rss_start, first, second, last, first > 0 ? 100.0 * (last - first) / first : 0.0,
                second > 0 ? 100.0 * (last - second) / second : 0.0, peak, rss.size());
    std::printf("summary: errors %" PRId64 ", mismatches %" PRId64 " -> %s\n", g_errors.load(), g_mismatches.load(),
                g_errors.load() + g_mismatches.load() == 0 ? "PASS" : "FAIL");
    return g_errors.load() + g_mismatches.load() == 0 ? 0 : 1;
}
