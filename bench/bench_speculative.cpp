// bench_speculative: speculative decoding against plain autoregressive decoding, through the public API.
//
//   bench_speculative [--model NAME_OR_PATH]... [--prompt TEXT] [-n 256] [--temp 0] [--threads 2] [--reps 3]
//                     [--draft FILE] [--draft-model FILE] [--sweep] [--leviathan] [--draw race|llama.cpp]
//
// For each model (default: the fixtures' stories260K and code-7m) and its prompt (a story opening for stories260K;
// the first 300 tokens of a held-out Python file, json/decoder.py of the machine's Python, for code-7m):
//   AR                      plain decoding, the reference for speed and for the tokens;
//   ngram                   prompt lookup + token-reuse table (16 n-gram nodes; chain: prompt lookup only, 4 tokens);
//   longspec                the model's trained LongSpec draft (models/drafts/NAME.longspec.gguf, or --draft);
//   longspec+ngram          both, merged into one tree;
//   longspec-random         an untrained LongSpec draft written for the model (window 512) to a temp file;
//   target-as-draft         the target itself as an independent draft model (every drafted token is accepted at
//                           T = 0: the upper bound of acceptance, at the cost of running the target twice);
//   draft-model:FILE        --draft-model (default for stories260K: the fixtures' stories260K-L3.gguf);
//   longspec-random+ngram   an untrained draft merged with n-grams;
// each with fixed trees (the default tree [4,16,16,16,16] and a chain of 4; with --sweep every shape --tree auto
// chooses from, and n-gram shares of 2 to 16 nodes) and with "auto" (the session's choice each round; its row says
// the last round's tree and its tok/s over the best fixed row of the same drafter in this run).
// A run: a fresh session, the prompt, one generated token (prompt evaluation, not timed), then -n tokens timed
// around the generate call (end-of-generation ignored). tok/s is the median over --reps runs after one warm-up;
// tau, rounds, accept rate and draft/verify ms are those of the timed part of the last run. Speedup is the median
// over the reps of tok/s over an AR run made just before each rep (so a row's ratio is not the machine's drift since
// the AR row). Every speculative run must produce exactly the AR tokens, at T = 0 and, with its fixed seed, at T > 0
// too (coupled sampled drafts: a seed fixes the text whatever the drafter; verifier.h): any difference is printed as
// MISMATCH and the program exits with status 1. --leviathan adds, at T > 0, each model drafter's fixed trees under
// Leviathan's rule (rows "tree leviathan": exact in distribution, its text depends on the drafts, so the column says
// n/a), to compare acceptance (tau) with the coupled rows above them.
#include <specula/specula.hpp>

#include "bench_common.h"
#include "machine_files.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using bench::cpu_name;
using bench::fmt;
using bench::median;
using bench::now_s;

namespace fs = std::filesystem;

struct Args {
    std::vector<std::string> models;  // names or paths; empty = the defaults
    std::string prompt;               // empty = the model's default prompt
    int32_t n_tokens = 256;
    float temp = 0.0f;
    int32_t threads = 2;
    int32_t reps = 3;
    std::string draft_model;          // empty = the model's default (stories260K-L3 for stories260K)
    std::string draft;                // a trained LongSpec draft; empty = the model's (models/drafts/)
    bool sweep = false;
    bool leviathan = false;
    std::string draw = "race";        // how sampled tokens are drawn (specula_draw_rule)
    int32_t code_prompt_tokens = 300;
};

Args parse_args(int argc, char **argv) {
    Args a;
    CLI::App app{"bench_speculative: speculative decoding vs autoregressive decoding"};
    app.add_option("--model", a.models, "stories260K, code-7m, or a GGUF file (repeatable; default: both fixtures)");
    app.add_option("--prompt", a.prompt, "prompt text (default: a story opening / a Python file prefix)");
    app.add_option("-n,--n-tokens", a.n_tokens, "tokens generated per timed run")->capture_default_str()->check(CLI::Range(1, 100000));
    app.add_option("--temp", a.temp, "temperature: 0 = greedy (outputs must equal AR's), or e.g. 1")->capture_default_str()
        ->check(CLI::Range(0.0f, 10.0f));
    app.add_option("--threads", a.threads, "compute threads")->capture_default_str()->check(CLI::Range(1, 512));
    app.add_option("--reps", a.reps, "timed runs per row (median), after one warm-up")->capture_default_str()->check(CLI::Range(1, 1000));
    app.add_option("--draft", a.draft, "a trained LongSpec draft for the (one) model (default: models/drafts/NAME.longspec.gguf)");
    app.add_flag("--sweep", a.sweep, "every fixed tree the auto mode chooses from, instead of the default tree and a chain of 4");
    app.add_flag("--leviathan", a.leviathan, "at T > 0, also each model drafter's fixed trees under Leviathan's accept/reject rule");
    app.add_option("--draw", a.draw, "at T > 0, how sampled tokens are drawn: race (default) or llama.cpp (llama.cpp's generator and "
                                     "distribution; chains drafted with shared-uniform coupling)")
        ->capture_default_str()->check(CLI::IsMember({"race", "llama.cpp"}));
    app.add_option("--draft-model", a.draft_model, "an independent draft model (default for stories260K: stories260K-L3.gguf)");
    app.add_option("--code-prompt-tokens", a.code_prompt_tokens, "tokens of the Python file used as code prompt")
        ->capture_default_str()->check(CLI::Range(1, 100000));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        std::exit(app.exit(e));
    }
    return a;
}

struct BenchModel {
    std::string name;
    std::string path;
    bool code = false;          // default prompt: a Python file prefix
    std::string draft_model;    // default draft model ("" = none)
    std::string draft;          // its trained LongSpec draft ("" = none)
};

std::vector<BenchModel> select_models(const Args &args) {
    const std::string fx = std::string(SPECULA_FIXTURES_DIR) + "/models/";
    std::error_code ec;
    const std::string stories = fs::is_regular_file(fx + "stories260K.gguf", ec) ? fx + "stories260K.gguf" : SPECULA_DEFAULT_MODEL;
    const std::string drafts = std::string(SPECULA_SOURCE_DIR) + "/models/drafts/";
    const std::vector<BenchModel> known = {
        {"stories260K", stories, false, fx + "stories260K-L3.gguf", drafts + "stories260K.longspec.gguf"},
        {"code-7m", fx + "code-7m/model.gguf", true, "", drafts + "code-7m.longspec.gguf"},
    };
    std::vector<BenchModel> out;
    for (const BenchModel &m : known) {
        bool wanted = args.models.empty();
        for (const std::string &f : args.models) wanted = wanted || m.name.find(f) != std::string::npos;
        if (!wanted) continue;
        if (fs::is_regular_file(m.path, ec)) out.push_back(m);
        else std::fprintf(stderr, "bench_speculative: %s not found at %s; skipped\n", m.name.c_str(), m.path.c_str());
    }
    for (const std::string &f : args.models)
        if (fs::is_regular_file(f, ec)) out.push_back({fs::path(f).stem().string(), f, false, "", ""});
    return out;
}

std::string read_file(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The prompt tokens (BOS included) and a short description of where they came from.
std::vector<int32_t> make_prompt(const specula::Model &model, const BenchModel &bm, const Args &args, std::string &what) {
    if (!args.prompt.empty()) {
        what = "--prompt";
        return model.tokenize(args.prompt);
    }
    if (!bm.code) {
        what = "story opening";
        return model.tokenize("Once upon a time, there was a little girl named Lily. She loved to play outside");
    }
    // A held-out file of code-7m's training setup (json/ was never trained on), else the first Python file found.
    fs::path file;
    const fs::path stdlib = specula_apps::python_stdlib_dir();
    std::error_code ec;
    if (!stdlib.empty() && fs::is_regular_file(stdlib / "json" / "decoder.py", ec)) {
        file = stdlib / "json" / "decoder.py";
    } else if (!stdlib.empty()) {
        const std::vector<fs::path> files = specula_apps::sorted_files(stdlib, ".py");
        if (!files.empty()) file = files.front();
    }
    std::vector<int32_t> ids;
    if (!file.empty()) {
        ids = model.tokenize(read_file(file));
        what = "first " + std::to_string(std::min<size_t>(ids.size(), size_t(args.code_prompt_tokens))) + " tokens of " + file.string();
    } else {
        ids = model.tokenize("import os\nimport sys\n\n\ndef main(argv):\n    \"\"\"Print the arguments.\"\"\"\n    for arg in argv:\n");
        what = "a built-in Python snippet (no Python standard library found)";
    }
    if (ids.size() > size_t(args.code_prompt_tokens)) ids.resize(size_t(args.code_prompt_tokens));
    return ids;
}

// One configuration to measure. An empty drafter name is plain AR.
struct Config {
    std::string drafter;
    std::string tree;  // label
    specula::SpeculativeOptions spec;
};

struct RunResult {
    std::vector<int32_t> tokens;  // every generated token, the untimed first one included
    double tok_s = 0;
    std::string tree;             // the last round's tree (auto: the session's last choice)
    specula_stats before{}, after{};
};

RunResult run_once(const specula::Model &model, const std::vector<int32_t> &prompt, const Config &config, const Args &args) {
    specula::SessionOptions so;
    so.n_threads = args.threads;
    // The library's default (min(n_ctx_train, 4096)), grown when the prompt and the run need more.
    so.n_ctx = std::max<int32_t>(std::min<int32_t>(model.n_ctx_train(), 4096), int32_t(prompt.size()) + args.n_tokens + 8);
    specula::SamplerOptions sp;
    sp.temperature = args.temp;
    if (args.temp > 0) {  // plain sampling from the model's distribution
        sp.top_k = 0;
        sp.top_p = 1.0f;
        sp.min_p = 0.0f;
    }
    sp.seed = 1234;
    sp.draw = args.draw == "llama.cpp" ? SPECULA_DRAW_LLAMA_CPP : SPECULA_DRAW_RACE;
    specula::Session session(model, so, sp);
    if (!config.drafter.empty()) session.set_speculative(config.spec);
    session.append_tokens(prompt);

    RunResult r;
    specula::GenerateOptions go(1);
    go.stop_at_eog = false;
    auto collect = [&r](const specula_token_event &ev) {
        if (ev.token != SPECULA_TOKEN_NULL) r.tokens.push_back(ev.token);
        return true;
    };
    session.generate(go, collect);  // the prompt + one token: not timed
    r.before = session.stats();
    go.max_tokens = args.n_tokens;
    const double t0 = now_s();
    const specula_stop_reason reason = session.generate(go, collect);
    const double elapsed = now_s() - t0;
    r.after = session.stats();
    r.tree = session.tree_shape();
    if (reason != SPECULA_STOP_MAX_TOKENS)
        throw std::runtime_error(std::string("generation stopped early: ") + specula_stop_reason_string(reason));
    if (r.tokens.size() != size_t(args.n_tokens) + 1)
        throw std::runtime_error("generated " + std::to_string(r.tokens.size()) + " tokens, expected " + std::to_string(args.n_tokens + 1));
    r.tok_s = args.n_tokens / elapsed;
    return r;
}

struct Measured {
    RunResult last;
    double tok_s = 0;
    double speedup = 0;  // median over the reps of tok/s over the AR run just before it (speculative rows)
};

// Each rep of a speculative row runs AR just before it, and the row's speedup is the median of the per-rep ratios:
// this VM's speed drifts by tens of percent over minutes, so a ratio against an AR run made minutes earlier (at the
// top of the table) says more about the drift than about the drafter.
Measured measure(const specula::Model &model, const std::vector<int32_t> &prompt, const Config &config, const Args &args) {
    const Config ar{"", "-", {}};
    const bool paired = !config.drafter.empty();
    run_once(model, prompt, config, args);  // warm-up
    Measured m;
    std::vector<double> rates, ratios;
    for (int32_t i = 0; i < args.reps; ++i) {
        const double ar_tok_s = paired ? run_once(model, prompt, ar, args).tok_s : 0;
        m.last = run_once(model, prompt, config, args);
        rates.push_back(m.last.tok_s);
        if (paired) ratios.push_back(m.last.tok_s / ar_tok_s);
    }
    m.tok_s = median(rates);
    m.speedup = paired ? median(ratios) : 1.0;
    return m;
}

// Benchmarks one model; returns the number of mismatches.
int bench_model(const BenchModel &bm, const Args &args) {
    specula::Model model = specula::Model::load(bm.path);
    std::string prompt_what;
    const std::vector<int32_t> prompt = make_prompt(model, bm, args, prompt_what);
    std::printf("\n### %s (%s, %.2fM params) | prompt: %zu tokens (%s) | %d tokens | T = %g | %d thread%s | median of %d after 1 warm-up\n\n",
                bm.name.c_str(), model.arch().c_str(), model.n_params() / 1e6, prompt.size(), prompt_what.c_str(), args.n_tokens,
                args.temp, args.threads, args.threads == 1 ? "" : "s", args.reps);

    // Drafters.
    const fs::path draft_path = fs::temp_directory_path() / ("bench_speculative_" + std::to_string(getpid()) + "_" + bm.name + ".gguf");
    specula::Draft::write_random(model, draft_path.string(), 1, 512);
    specula::Draft draft = specula::Draft::load(draft_path.string(), model);
    std::error_code ec;
    fs::remove(draft_path, ec);  // the draft is loaded (mapped): the name is no longer needed
    const std::string dm_path = !args.draft_model.empty() ? args.draft_model : bm.draft_model;
    specula::Model draft_model;
    std::string dm_error;
    if (!dm_path.empty()) {
        try {
            draft_model = specula::Model::load(dm_path);
        } catch (const std::exception &e) {
            dm_error = e.what();
        }
    }

    const std::string trained_path = !args.draft.empty() ? args.draft : bm.draft;
    specula::Draft trained;
    if (!trained_path.empty() && fs::is_regular_file(trained_path, ec)) {
        try {
            trained = specula::Draft::load(trained_path, model);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "bench_speculative: trained draft %s: %s; skipped\n", trained_path.c_str(), e.what());
        }
    }

    // Fixed trees (always drafted), then auto (each round's tree chosen by the session from what it measures).
    std::vector<std::vector<int32_t>> trees = {{4, 16, 16, 16, 16}, {1, 1, 1, 1}};
    std::vector<int32_t> ngram_nodes = {16};
    if (args.sweep) {
        trees = {{1}, {1, 1}, {1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2}, {4, 4, 4, 4}, {4, 8, 8, 8}, {4, 16, 16, 16, 16}};
        ngram_nodes = {2, 4, 8, 16};
    }
    auto label = [](const std::vector<int32_t> &w) {
        std::string s;
        for (size_t i = 0; i < w.size(); ++i) s += (i ? "," : "") + std::to_string(w[i]);
        return s;
    };
    std::vector<Config> configs;
    configs.push_back({"", "-", {}});
    {
        Config c{"ngram", "", {}};
        c.spec.ngram = true;
        c.spec.tree_mode = SPECULA_TREE_FIXED;
        for (int32_t n : ngram_nodes) {
            c.tree = std::to_string(n) + " nodes";
            c.spec.ngram_nodes = n;
            configs.push_back(c);
        }
        if (!args.sweep) {
            c.tree = "chain 4";
            c.spec.ngram_nodes = 4;
            c.spec.ngram_max_chain = 4;
            c.spec.ngram_table_topk = 0;
            configs.push_back(c);
        }
        Config a{"ngram", "auto", {}};
        a.spec.ngram = true;
        configs.push_back(a);
    }
    auto add_model_drafter = [&](const std::string &name, const specula::Draft *d, const specula::Model *m, bool ngram) {
        for (const auto &w : trees) {
            Config c{name, label(w), {}};
            c.spec.draft = d;
            c.spec.draft_model = m;
            c.spec.ngram = ngram;
            c.spec.tree = w;
            c.spec.tree_mode = SPECULA_TREE_FIXED;
            configs.push_back(c);
            if (args.leviathan && args.temp > 0) {
                c.tree += " leviathan";
                c.spec.sampled_drafts = SPECULA_SAMPLED_DRAFTS_LEVIATHAN;
                configs.push_back(c);
            }
        }
        Config a{name, "auto", {}};
        a.spec.draft = d;
        a.spec.draft_model = m;
        a.spec.ngram = ngram;
        configs.push_back(a);
    };
    if (trained) {
        add_model_drafter("longspec", &trained, nullptr, false);
        add_model_drafter("longspec+ngram", &trained, nullptr, true);
    }
    add_model_drafter("longspec-random", &draft, nullptr, false);
    if (!args.sweep) add_model_drafter("target-as-draft", nullptr, &model, false);
    if (draft_model) add_model_drafter("draft-model:" + fs::path(dm_path).filename().string(), nullptr, &draft_model, false);
    if (!args.sweep) add_model_drafter("longspec-random+ngram", &draft, nullptr, true);

    std::printf("| drafter | tree | tok/s | speedup | tau | rounds | accept rate | draft ms | verify ms | same tokens as AR |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    if (!dm_error.empty())
        std::printf("| draft-model:%s | | | | | | | | | cannot load: %s |\n", fs::path(dm_path).filename().string().c_str(), dm_error.c_str());
    std::fflush(stdout);

    int mismatches = 0;
    std::string group;        // the drafter of the rows so far
    double best_fixed = 0;    // its best fixed tree's speedup
    std::string best_tree;
    std::vector<int32_t> ar_tokens;
    for (const Config &c : configs) {
        const std::string name = c.drafter.empty() ? "AR" : c.drafter;
        Measured m;
        try {
            m = measure(model, prompt, c, args);
        } catch (const std::exception &e) {
            std::printf("| %s | %s | | | | | | | | failed: %s |\n", name.c_str(), c.tree.c_str(), e.what());
            std::fflush(stdout);
            if (c.drafter.empty()) return mismatches + 1;  // nothing to compare with
            continue;
        }
        std::string same;
        if (c.drafter.empty()) {
            ar_tokens = m.last.tokens;
            same = "(reference)";
        } else if (c.spec.sampled_drafts == SPECULA_SAMPLED_DRAFTS_LEVIATHAN) {
            same = "n/a (Leviathan)";
        } else {
            const auto diff = std::mismatch(ar_tokens.begin(), ar_tokens.end(), m.last.tokens.begin(), m.last.tokens.end());
            if (diff.first == ar_tokens.end() && diff.second == m.last.tokens.end()) {
                same = "yes";
            } else {
                ++mismatches;
                const size_t at = size_t(diff.first - ar_tokens.begin());
                same = "**MISMATCH** at token " + std::to_string(at);
                std::fprintf(stderr, "bench_speculative: MISMATCH: %s / %s / %s: token %zu is %d, AR gave %d\n", bm.name.c_str(),
                             name.c_str(), c.tree.c_str(), at, diff.second != m.last.tokens.end() ? *diff.second : -1,
                             diff.first != ar_tokens.end() ? *diff.first : -1);
            }
        }
        if (name != group) {
            group = name;
            best_fixed = 0;
        }
        std::string tree = c.tree;
        if (c.tree == "auto") {
            tree = "auto (last " + m.last.tree + (best_fixed > 0 ? ", " + fmt(m.speedup / best_fixed) + "x best fixed " + best_tree : std::string()) + ")";
        } else if (!c.drafter.empty() && c.spec.sampled_drafts != SPECULA_SAMPLED_DRAFTS_LEVIATHAN && m.speedup > best_fixed) {
            best_fixed = m.speedup;
            best_tree = c.tree;
        }
        const specula_stats &b = m.last.before, &a = m.last.after;
        const int32_t rounds = a.n_spec_rounds - b.n_spec_rounds, drafted = a.n_drafted - b.n_drafted,
                      accepted = a.n_accepted - b.n_accepted;
        if (c.drafter.empty()) {
            std::printf("| AR | - | %s | 1.00x | 1.00 | | | | | %s |\n", fmt(m.tok_s, "%.1f").c_str(), same.c_str());
        } else {
            std::printf("| %s | %s | %s | %sx | %s | %d | %s | %s | %s | %s |\n", name.c_str(), tree.c_str(),
                        fmt(m.tok_s, "%.1f").c_str(), fmt(m.speedup).c_str(),
                        fmt(rounds > 0 ? double(accepted + rounds) / rounds : 0).c_str(), rounds,
                        drafted > 0 ? (fmt(100.0 * accepted / drafted, "%.1f") + "%").c_str() : "-",
                        fmt(a.draft_ms - b.draft_ms, "%.1f").c_str(), fmt(a.verify_ms - b.verify_ms, "%.1f").c_str(), same.c_str());
        }
        std::fflush(stdout);
    }
    return mismatches;
}

}  // namespace

int main(int argc, char **argv) {
    const Args args = parse_args(argc, argv);
    const std::vector<BenchModel> models = select_models(args);
    if (models.empty()) {
        std::fprintf(stderr, "bench_speculative: no model found%s\n", args.models.empty() ? "" : " matching --model");
        return 1;
    }
    std::printf("specula %s | %s, %u cores | speedup = tok/s / AR tok/s in this run | tau = (accepted + rounds) / rounds | "
                "accept rate = accepted / drafted\n",
                specula_version_string(), cpu_name().c_str(), std::thread::hardware_concurrency());
    int mismatches = 0;
    for (const BenchModel &bm : models) {
        try {
            mismatches += bench_model(bm, args);
        } catch (const std::exception &e) {
            std::printf("\n%s: failed: %s\n", bm.name.c_str(), e.what());
            ++mismatches;
        }
        std::fflush(stdout);
    }
    if (mismatches > 0) {
        std::fprintf(stderr, "bench_speculative: %d MISMATCH(ES) or failure(s): speculative output differs from AR\n", mismatches);
        return 1;
    }
    return 0;
}
