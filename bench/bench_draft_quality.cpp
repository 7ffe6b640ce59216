// bench_draft_quality: how good (trained) LongSpec drafts are on realistic workloads, through the public API.
//
//   bench_draft_quality --model code-7m|stories260K|PATH --draft LABEL=FILE [--draft LABEL=FILE ...]
//                       [--files 8] [--context 768] [-n 128] [--threads 2] [--reps 1] [--ngram]
//                       [--tree 4,16,16,16,16] [--seed 1] [--prompt TEXT] [--workload auto|code|stories]
//                       [--per-file] [--regret [--confirm N]] [--only TEXT ...] [--json OUT]
//
// Workloads (--workload auto picks code for a model with a corpus.json beside it, i.e. code-7m, else stories):
//   code      --files Python files the model never saw in training: the held-out folders of its corpus.json
//             ("held_out_prefixes"; code-7m's list when there is none) under the Python standard library that
//             `python3 -c "import sysconfig; print(sysconfig.get_paths()['stdlib'])"` prints (the one code-7m was
//             trained on; /usr/lib/python3.N when there is no such python3). Each folder's files in sorted order
//             (test folders left out, and _vendor/ and _distutils/: copies of packages the model trained on) are
//             shuffled with --seed, then files are taken round-robin over the folders, skipping those shorter
//             than --context + -n tokens. A file is tokenized whole with BOS (as in training: every file
//             preceded by BOS); the prompt is BOS + its first --context tokens, the repository-file context
//             before the completion point, and the model completes it.
//   stories   fixed story openings (the first min(--files, 4)), or the single --prompt.
// Each prompt: -n tokens generated greedily (T = 0).
//
// Rows: AR (plain decoding); for each --draft, LABEL (the LongSpec draft with --tree); with --ngram also
// LABEL+ngram (the draft's tree merged with 16 n-gram nodes) and ngram (prompt lookup + token reuse alone, the
// library's defaults: 16 nodes).
// A run: a fresh session, the prompt (evaluated once per prompt and forked into each run's session: the context's
// tokens and keys/values), one generated token (not timed), then -n tokens timed around the generate call
// (end-of-generation ignored). Every row runs once untimed on the first prompt (warm-up),
// then prompt by prompt every row runs --reps times: rep after rep, each running every row (AR first in the first,
// the order rotated by one row per rep), so that the machine's drift falls on all rows rather than on every run of
// one. A prompt's time is the median of its reps (use 3 or more to compare rows a few percent apart: a single run's
// tok/s varied by ~9% on the 2-core VM).
// Columns, aggregated over all prompts (sums of the timed parts, not means of per-prompt ratios):
//   tok/s          generated tokens / seconds of the timed generate calls;
//   speedup        tok/s / AR tok/s of this same invocation;
//   tau            mean accepted length: (accepted + rounds) / rounds, i.e. tokens per target pass;
//   rounds         draft + verify rounds;
//   depth >= 1..D  percentage of rounds whose accepted path reached depth >= d (D = max(5, tree levels));
//   draft ms/round, verify ms/round   drafting and verification time per round;
//   drafter bytes  memory the drafter held at the end of a run (stats.drafter_bytes; the largest over prompts);
//   same as AR     at T = 0 a speculative row must produce exactly the AR tokens for every prompt: any difference
//                  is printed as MISMATCH and the program exits with status 1.
// --per-file adds one line per prompt (path, prompt tokens, AR tok/s, tau of each row); --json OUT writes the
// header, the prompts and the same rows (with per-prompt figures) as JSON.
// --regret measures --tree auto against every fixed shape it could have drafted, prompt by prompt (issue 41's
// regret): the rows become, for the first --draft, "auto" (the library's default: auto, draft + n-grams with
// --ngram, else the draft alone; its sessions start from what the earlier ones learned, speculative/tuner_memory.h),
// "auto, cold" (the same with the draft loaded again for each run, so that its tuner starts from nothing), the
// draft's chains of 1-6 and 8 and the --tree shape, each also merged with 16 n-gram nodes (with --ngram), and
// n-grams alone with 2, 4, 8 and 16 nodes (with --ngram), all in the same run and
// interleaved per prompt; a table then gives, per prompt, auto's tok/s, the best fixed row's and their ratio, and a
// summary line the median and smallest ratio and how many prompts fell below 0.95 (and the same for the cold row).
// --confirm N (with --regret) measures that ratio again without the selection's bias: the fastest of ~20 fixed rows,
// each a median of a few noisy runs, is faster in its own runs than that shape is (the winner's curse: with ~9%
// noise per run and several rows within a few percent of each other, the maximum is biased up). So after a prompt's
// reps, the fixed row they chose is timed again N times against auto, alternating which goes first, runs that took
// no part in choosing it; auto's runs there draft with copies of the draft of their own (one per confirmation run),
// whose tuners learned from the earlier prompts' confirmation runs only, as the reps' auto runs do. A second table
// gives, per prompt, the two medians and their ratio, and a summary line as above. The other way round, a noisy
// choice may pick a shape a little slower than the truly best one, which flatters auto: both tables are printed, and
// more --reps make the choice better.
// --only TEXT keeps the prompts whose name contains TEXT (the same file choice, so one prompt of a run can be run again).
#include <specula/specula.hpp>

#include "backend_option.h"
#include "bench_common.h"
#include "machine_files.h"
#include "tree_widths.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using bench::cpu_name;
using bench::fmt;
using bench::median;
using bench::now_s;

namespace fs = std::filesystem;

struct Args {
    std::string model = "code-7m";
    std::vector<std::string> drafts;  // LABEL=FILE (or FILE: the label is its stem)
    int32_t files = 8;
    int32_t context = 768;
    int32_t n_tokens = 128;
    int32_t threads = 2;
    std::string backend = "cpu";
    int32_t reps = 1;
    bool ngram = false;
    std::string tree = "4,16,16,16,16";
    uint64_t seed = 1;
    std::string prompt;
    std::vector<std::string> only;
    std::string workload = "auto";
    bool per_file = false;
    bool regret = false;
    int32_t confirm = 0;
    std::string json;
};

Args parse_args(int argc, char **argv) {
    Args a;
    CLI::App app{"bench_draft_quality: acceptance and speed of LongSpec drafts on held-out code or stories"};
    app.add_option("--model", a.model, "code-7m, stories260K, or a GGUF file")->capture_default_str();
    app.add_option("--draft", a.drafts, "a LongSpec draft for the model, LABEL=FILE (repeatable)");
    app.add_option("--files", a.files, "prompts: held-out files (code), openings (stories, at most 4)")->capture_default_str()
        ->check(CLI::Range(1, 100000));
    app.add_option("--context", a.context, "code: file tokens before the completion point (BOS not counted)")->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    app.add_option("-n,--n-tokens", a.n_tokens, "tokens generated (timed) per prompt")->capture_default_str()->check(CLI::Range(1, 100000));
    app.add_option("--threads", a.threads, "compute threads")->capture_default_str()->check(CLI::Range(1, 512));
    app.add_option("--backend", a.backend, "where the target runs: cpu, cuda or vulkan (no fallback: a missing GPU is an error)")
        ->capture_default_str()->check(CLI::IsMember({"cpu", "cuda", "vulkan"}));
    app.add_option("--reps", a.reps, "timed runs per prompt and row (median time)")->capture_default_str()->check(CLI::Range(1, 1000));
    app.add_flag("--ngram", a.ngram, "also the rows LABEL+ngram and ngram");
    app.add_option("--tree", a.tree, "nodes per level of the drafts' tree (1,1,1,1 = a chain of 4)")->capture_default_str();
    app.add_option("--seed", a.seed, "seed of the file choice (code workload)")->capture_default_str();
    app.add_option("--only", a.only, "keep the prompts whose name (a file's path) contains this text (repeatable): one prompt of a run again, same file choice")
        ->type_size(1)->allow_extra_args(false);
    app.add_option("--prompt", a.prompt, "one prompt text instead of the workload's prompts");
    app.add_option("--workload", a.workload, "code, stories, or auto (code when a corpus.json is beside the model)")
        ->capture_default_str()->check(CLI::IsMember({"auto", "code", "stories"}));
    app.add_flag("--per-file", a.per_file, "print one line per prompt (path, prompt tokens, tau per row)");
    app.add_flag("--regret", a.regret, "auto against every fixed shape (chains, the tree, n-gram shares, merged), per prompt");
    app.add_option("--confirm", a.confirm, "--regret: time auto against the best fixed row again, N alternating runs each, apart from choosing it")
        ->capture_default_str()->check(CLI::Range(0, 1000));
    app.add_option("--json", a.json, "write the rows as JSON to this file");
    try {
        app.parse(argc, argv);
        if (a.confirm > 0 && !a.regret) throw CLI::ValidationError("--confirm", "needs --regret");
    } catch (const CLI::ParseError &e) {
        std::exit(app.exit(e));
    }
    return a;
}

std::string resolve_model(const std::string &name) {
    const std::string fx = std::string(SPECULA_FIXTURES_DIR) + "/models/";
    std::error_code ec;
    if (name == "code-7m") return fx + "code-7m/model.gguf";
    if (name == "stories260K") return fs::is_regular_file(fx + "stories260K.gguf", ec) ? fx + "stories260K.gguf" : SPECULA_DEFAULT_MODEL;
    return name;
}

// A fixture's name, else the file's stem (its folder's name for a .../NAME/model.gguf, like code-7m's).
std::string display_name(const std::string &arg, const fs::path &path) {
    if (path.string() != arg) return arg;
    if (path.stem() == "model" && path.has_parent_path()) return path.parent_path().filename().string();
    return path.stem().string();
}

std::string read_file(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// One prompt of the workload.
struct Prompt {
    std::string name;             // a file's path relative to the stdlib folder, or "opening N" / "--prompt"
    std::vector<int32_t> tokens;  // BOS included
    size_t file_tokens = 0;       // code: tokens of the whole file (BOS included); 0 otherwise
};

// code-7m's held-out folders (its corpus.json), for a code model that comes without a corpus.json.
const std::vector<std::string> kCode7mHeldOut = {"site-packages/pip/", "site-packages/setuptools/", "json/", "email/", "asyncio/"};

std::vector<std::string> held_out_prefixes(const fs::path &model_path, std::string &source) {
    const fs::path corpus = model_path.parent_path() / "corpus.json";
    std::error_code ec;
    if (fs::is_regular_file(corpus, ec)) {
        const nlohmann::json j = nlohmann::json::parse(read_file(corpus));
        source = corpus.string();
        return j.at("held_out_prefixes").get<std::vector<std::string>>();
    }
    source = "code-7m's list (no corpus.json beside the model)";
    return kCode7mHeldOut;
}

// Folders of the held-out packages that are not held-out text: tests (left out of training altogether), and
// copies of code the model did train on: pip/_vendor and setuptools/_vendor vendor packages that also sit in
// site-packages (pygments, pyparsing, packaging, ...), and setuptools/_distutils is a fork of the standard
// library's distutils. Completing those would measure recall, not prediction.
const std::vector<std::string> kSkipDirs = {"test", "tests", "__pycache__", "_vendor", "_distutils"};

// The deterministic choice of held-out files described at the top. A hand-written Fisher-Yates over
// std::mt19937_64 (whose output the standard fixes), not std::shuffle (whose algorithm it does not): the same
// seed gives the same files with any standard library.
std::vector<Prompt> code_prompts(const specula::Model &model, const fs::path &stdlib, std::vector<std::string> prefixes,
                                 const Args &args) {
    std::sort(prefixes.begin(), prefixes.end());
    std::vector<std::vector<fs::path>> folders;
    for (const std::string &prefix : prefixes) {
        std::vector<fs::path> files = specula_apps::sorted_files(stdlib / prefix, ".py", kSkipDirs);
        std::mt19937_64 rng(args.seed);
        for (size_t i = files.size(); i > 1; --i) std::swap(files[i - 1], files[size_t(rng() % i)]);
        folders.push_back(std::move(files));
    }
    const size_t need = 1 + size_t(args.context) + size_t(args.n_tokens);  // BOS + context + a real continuation
    std::vector<Prompt> out;
    std::vector<size_t> cursor(folders.size(), 0);
    for (bool progress = true; progress && out.size() < size_t(args.files);) {
        progress = false;
        for (size_t f = 0; f < folders.size() && out.size() < size_t(args.files); ++f) {
            while (cursor[f] < folders[f].size()) {
                const fs::path &path = folders[f][cursor[f]++];
                progress = true;
                std::vector<int32_t> ids;
                try {
                    ids = model.tokenize(read_file(path));
                } catch (const std::exception &) {
                    continue;  // not text the tokenizer takes (e.g. invalid UTF-8): not a realistic prompt
                }
                if (ids.size() < need) continue;
                Prompt p;
                p.name = path.lexically_relative(stdlib).string();
                p.file_tokens = ids.size();
                ids.resize(1 + size_t(args.context));
                p.tokens = std::move(ids);
                out.push_back(std::move(p));
                break;
            }
        }
    }
    return out;
}

const std::vector<std::string> kStoryOpenings = {
    "Once upon a time, there was a little girl named Lily. She loved to play outside",
    "One day, a little boy named Tim went to the park with his mom. He saw a big",
    "The sun was shining and the birds were singing. A small dog named Max",
    "Lily and Ben were best friends. They liked to play in the garden, but one day",
};

// One measured configuration and its sums over the prompts.
struct Row {
    std::string label;
    std::string tree;                // description
    bool ar = false;
    bool is_auto = false;  // --regret: the row measured against the fixed ones
    // --regret: auto with the draft loaded again for each run, so that its tuner starts from nothing (the tuner's
    // memory is per target and drafter: speculative/tuner_memory.h), beside the auto row, which starts from what the
    // rows' earlier auto sessions learned, as a server's slots or an editor's completions do.
    std::string cold_draft;
    specula::SpeculativeOptions spec;
    // Sums over prompts (timed parts only).
    double seconds = 0;
    int64_t tokens = 0;
    int64_t rounds = 0, drafted = 0, accepted = 0;
    int64_t at_depth[16] = {};
    double draft_ms = 0, verify_ms = 0;
    size_t drafter_bytes = 0;
    int mismatches = 0;
    std::vector<double> prompt_tau, prompt_tok_s;
    std::vector<std::string> prompt_same;  // "yes", "(reference)" or the mismatch
};

struct RunResult {
    std::vector<int32_t> tokens;  // every generated token, the untimed first one included
    double seconds = 0;           // the timed generate call
    specula_stats before{}, after{};
};

specula::SessionOptions session_options(const specula::Model &model, const std::vector<int32_t> &prompt, const Args &args) {
    specula::SessionOptions so;
    so.n_threads = args.threads;
    so.backend = specula_apps::backend_from_name(args.backend);
    so.allow_fallback = 0;
    // The library's default (min(n_ctx_train, 4096)), grown when the prompt and the run need more.
    so.n_ctx = std::max<int32_t>(std::min<int32_t>(model.n_ctx_train(), 4096), int32_t(prompt.size()) + args.n_tokens + 8);
    return so;
}

// A prompt evaluated once, forked into every row's session (specula_session_fork, the context only): at 8K tokens
// the prompt's evaluation took longer than the generation timed after it, row after row.
std::unique_ptr<specula::Session> evaluated_prompt(const specula::Model &model, const std::vector<int32_t> &prompt, const Args &args) {
    auto base = std::make_unique<specula::Session>(model, session_options(model, prompt, args), specula::SamplerOptions::greedy());
    base->append_tokens(prompt);
    base->evaluate();
    return base;
}

RunResult run_once(const specula::Model &model, const std::vector<int32_t> &prompt, const Row &row, const Args &args,
                   specula::Session *base = nullptr) {
    specula::Session session(model, session_options(model, prompt, args), specula::SamplerOptions::greedy());
    std::optional<specula::Draft> fresh;  // the cold row's own draft (outside the timing: loaded before the session drafts)
    specula::SpeculativeOptions spec = row.spec;
    if (!row.cold_draft.empty()) {
        fresh.emplace(specula::Draft::load(row.cold_draft, model));
        spec.draft = &*fresh;
    }
    if (!row.ar) session.set_speculative(spec);
    if (base) {
        base->fork_into(session, specula::SnapshotOptions::context());
    } else {
        session.append_tokens(prompt);
    }

    RunResult r;
    specula::GenerateOptions go(1);
    go.stop_at_eog = false;  // a fixed amount of work per prompt, and a code file's end is no reason to stop timing
    auto collect = [&r](const specula_token_event &ev) {
        if (ev.token != SPECULA_TOKEN_NULL) r.tokens.push_back(ev.token);
        return true;
    };
    session.generate(go, collect);  // the prompt + one token: not timed
    r.before = session.stats();
    go.max_tokens = args.n_tokens;
    const double t0 = now_s();
    const specula_stop_reason reason = session.generate(go, collect);
    r.seconds = now_s() - t0;
    r.after = session.stats();
    if (reason != SPECULA_STOP_MAX_TOKENS)
        throw std::runtime_error(std::string("generation stopped early: ") + specula_stop_reason_string(reason));
    if (r.tokens.size() != size_t(args.n_tokens) + 1)
        throw std::runtime_error("generated " + std::to_string(r.tokens.size()) + " tokens, expected " + std::to_string(args.n_tokens + 1));
    return r;
}

// Depth levels shown: at least 5, more when the tree is deeper (the stats report 16 at most).
int depth_levels(const std::vector<int32_t> &tree) { return std::min<int>(16, std::max<int>(5, int(tree.size()))); }

// --regret: the fastest fixed row on prompt `pi` (neither AR nor auto nor the cold row), as an index into rows.
size_t best_fixed_row(const std::vector<Row> &rows, size_t pi) {
    size_t best = 0;  // row 0 is AR, never a fixed row
    for (size_t ri = 0; ri < rows.size(); ++ri) {
        const Row &r = rows[ri];
        if (!r.ar && !r.is_auto && r.cold_draft.empty() && (best == 0 || r.prompt_tok_s[pi] > rows[best].prompt_tok_s[pi])) best = ri;
    }
    return best;
}

std::string depth_summary(const Row &r, int levels) {
    if (r.ar || r.rounds == 0) return "";
    std::string s;
    for (int d = 0; d < levels; ++d) s += (d ? " / " : "") + fmt(100.0 * double(r.at_depth[d]) / double(r.rounds), "%.1f");
    return s;
}

}  // namespace

int main(int argc, char **argv) {
    const Args args = parse_args(argc, argv);
    try {
        const std::vector<int32_t> tree = specula_apps::parse_tree_widths(args.tree);
        const fs::path model_path = resolve_model(args.model);
        std::error_code ec;
        if (!fs::is_regular_file(model_path, ec)) throw std::runtime_error("model not found: " + model_path.string());
        specula::Model model = specula::Model::load(model_path.string());
        const std::string model_name = display_name(args.model, model_path);

        // Drafts: loaded once, shared by the rows (SpeculativeOptions borrows them; the vector never grows after).
        struct DraftInfo {
            std::string label, path;
        };
        std::vector<DraftInfo> draft_info;
        std::vector<specula::Draft> drafts;
        drafts.reserve(args.drafts.size());
        for (const std::string &spec : args.drafts) {
            const size_t eq = spec.find('=');
            DraftInfo d;
            d.path = eq == std::string::npos ? spec : spec.substr(eq + 1);
            d.label = eq == std::string::npos ? fs::path(spec).stem().string() : spec.substr(0, eq);
            if (d.label.empty() || d.path.empty()) throw std::runtime_error("--draft: expected LABEL=FILE, got '" + spec + "'");
            drafts.push_back(specula::Draft::load(d.path, model));
            draft_info.push_back(d);
        }
        if (drafts.empty() && !args.ngram) throw std::runtime_error("nothing to compare with AR: give --draft LABEL=FILE and/or --ngram");

        // The workload.
        const bool code = args.prompt.empty() &&
                          (args.workload == "code" ||
                           (args.workload == "auto" && fs::is_regular_file(model_path.parent_path() / "corpus.json", ec)));
        std::vector<Prompt> prompts;
        std::string workload;
        if (!args.prompt.empty()) {
            prompts.push_back({"--prompt", model.tokenize(args.prompt), 0});
            workload = "--prompt";
        } else if (code) {
            const fs::path stdlib = specula_apps::python3_sysconfig_stdlib_dir();
            if (stdlib.empty()) throw std::runtime_error("no Python standard library found for the code workload");
            std::string source;
            const std::vector<std::string> prefixes = held_out_prefixes(model_path, source);
            prompts = code_prompts(model, stdlib, prefixes, args);
            if (prompts.empty())
                throw std::runtime_error("no held-out file of " + std::to_string(1 + args.context + args.n_tokens) + "+ tokens under " +
                                         stdlib.string());
            std::string folders;
            for (const std::string &p : prefixes) {
                folders += (folders.empty() ? "" : " ") + p;
                if (!fs::is_directory(stdlib / p, ec)) folders += " (absent)";
            }
            workload = std::to_string(prompts.size()) + " held-out Python files of " + stdlib.string() + " (held out: " + folders +
                       "; from " + source + "), seed " + std::to_string(args.seed) + "; prompt = BOS + the first " +
                       std::to_string(args.context) + " tokens of the file";
        } else {
            for (size_t i = 0; i < kStoryOpenings.size() && i < size_t(args.files); ++i)
                prompts.push_back({"opening " + std::to_string(i + 1), model.tokenize(kStoryOpenings[i]), 0});
            workload = std::to_string(prompts.size()) + " story openings";
        }
        if (prompts.size() < size_t(args.files) && code)
            std::fprintf(stderr, "bench_draft_quality: only %zu held-out files are long enough (asked for %d)\n", prompts.size(), args.files);
        if (!args.only.empty()) {
            std::erase_if(prompts, [&](const Prompt &p) {
                return std::none_of(args.only.begin(), args.only.end(), [&](const std::string &o) { return p.name.find(o) != std::string::npos; });
            });
            if (prompts.empty()) throw std::runtime_error("--only: no prompt's name contains what was given");
            workload += " (--only: " + std::to_string(prompts.size()) + " of them)";
        }

        // The rows.
        std::vector<Row> rows;
        {
            Row ar;
            ar.label = "AR";
            ar.tree = "-";
            ar.ar = true;
            rows.push_back(ar);
        }
        std::string tree_label;
        for (size_t i = 0; i < tree.size(); ++i) tree_label += (i ? "," : "") + std::to_string(tree[i]);
        auto widths_label = [](const std::vector<int32_t> &w) {
            std::string l;
            for (size_t i = 0; i < w.size(); ++i) {
                if (i > 0) l += ',';
                l += std::to_string(w[i]);
            }
            return l;
        };
        if (args.regret) {
            if (drafts.empty()) throw std::runtime_error("--regret needs a --draft");
            Row a;
            a.label = "auto";
            a.is_auto = true;
            a.spec.draft = &drafts[0];
            a.spec.ngram = args.ngram;
            a.tree = std::string("auto (") + draft_info[0].label + (args.ngram ? " + n-grams" : "") + ")";
            rows.push_back(a);
            Row cold = a;
            cold.label = "auto, cold";
            cold.is_auto = false;
            cold.cold_draft = draft_info[0].path;
            cold.tree += ", from nothing";
            rows.push_back(cold);
            std::vector<std::vector<int32_t>> shapes;
            for (int32_t n : {1, 2, 3, 4, 5, 6, 8}) shapes.push_back(std::vector<int32_t>(size_t(n), 1));
            shapes.push_back(tree);
            for (const bool merged : args.ngram ? std::vector<bool>{false, true} : std::vector<bool>{false})
                for (const auto &w : shapes) {
                    Row r;
                    r.label = draft_info[0].label + (merged ? "+ngram" : "");
                    r.tree = widths_label(w) + (merged ? " + 16 n-gram" : "");
                    r.spec.draft = &drafts[0];
                    r.spec.tree = w;
                    r.spec.ngram = merged;
                    r.spec.tree_mode = SPECULA_TREE_FIXED;
                    rows.push_back(r);
                }
            if (args.ngram)
                for (int32_t n : {2, 4, 8, 16}) {
                    Row r;
                    r.label = "ngram";
                    r.spec.ngram = true;
                    r.spec.ngram_nodes = n;
                    r.spec.tree_mode = SPECULA_TREE_FIXED;
                    r.tree = std::to_string(n) + " n-gram nodes";
                    rows.push_back(r);
                }
        }
        for (size_t i = 0; i < drafts.size() && !args.regret; ++i) {
            Row r;
            r.label = draft_info[i].label;
            r.tree = tree_label;
            r.spec.draft = &drafts[i];
            r.spec.tree = tree;
            rows.push_back(r);
            if (args.ngram) {
                r.label += "+ngram";
                r.tree += " + " + std::to_string(r.spec.ngram_nodes) + " n-gram";
                r.spec.ngram = true;
                rows.push_back(r);
            }
        }
        if (args.ngram && !args.regret) {
            Row r;
            r.label = "ngram";
            r.spec.ngram = true;
            r.tree = std::to_string(r.spec.ngram_nodes) + " n-gram nodes";
            rows.push_back(r);
        }

        // Header.
        std::printf("specula %s | %s, %u cores | bench_draft_quality\n", specula_version_string(), cpu_name().c_str(),
                    std::thread::hardware_concurrency());
        if (args.backend != "cpu") {
            const auto gpus = specula::devices(specula_apps::backend_from_name(args.backend));
            std::printf("backend: %s (%s)\n", args.backend.c_str(), gpus.empty() ? "no device" : gpus[0].name);
        }
        std::printf("model: %s (%s, %s, %.2fM params)\n", model_name.c_str(), model_path.string().c_str(), model.arch().c_str(),
                    model.n_params() / 1e6);
        for (size_t i = 0; i < drafts.size(); ++i)
            std::printf("draft %s: %s (%llu params, window %d)\n", draft_info[i].label.c_str(), draft_info[i].path.c_str(),
                        static_cast<unsigned long long>(drafts[i].n_params()), drafts[i].window());
        std::printf("workload: %s\n", workload.c_str());
        std::printf("settings: %d tokens per prompt, greedy (T = 0) | %d thread%s | %d timed rep%s per prompt and row (median), "
                    "1 warm-up per row | tree %s\n",
                    args.n_tokens, args.threads, args.threads == 1 ? "" : "s", args.reps, args.reps == 1 ? "" : "s", tree_label.c_str());
        if (code) {
            std::printf("files:");
            for (const Prompt &p : prompts) std::printf(" %s (%zu tokens)", p.name.c_str(), p.file_tokens);
            std::printf("\n");
        }
        std::fflush(stdout);

        // --regret: the auto row's timed run of each rep drafts with its own copy of the draft, so that its tuner's
        // memory (per target and drafter) holds what that rep's runs learned on the earlier prompts only, never this
        // prompt's own text from another rep or the warm-up (which runs it on a copy of its own, as the cold row).
        std::vector<specula::Draft> rep_drafts;
        rep_drafts.reserve(size_t(args.reps));
        if (args.regret)
            for (int32_t rep = 0; rep < args.reps; ++rep) rep_drafts.push_back(specula::Draft::load(draft_info[0].path, model));
        // --confirm: the same for the confirmation runs, one copy per run.
        std::vector<specula::Draft> confirm_drafts;
        confirm_drafts.reserve(size_t(args.confirm));
        for (int32_t c = 0; c < args.confirm; ++c) confirm_drafts.push_back(specula::Draft::load(draft_info[0].path, model));
        struct Confirmed {
            size_t best = 0;                   // the fixed row the reps chose
            double auto_tok_s = 0, best_tok_s = 0;  // medians of the confirmation runs
        };
        std::vector<Confirmed> confirmed;

        // Warm-up: every row once on the first prompt (page faults of the mapped files, first allocations).
        {
            const std::unique_ptr<specula::Session> base = evaluated_prompt(model, prompts.front().tokens, args);
            for (const Row &r : rows) {
                Row w = r;
                if (w.is_auto) w.cold_draft = draft_info[0].path;
                run_once(model, prompts.front().tokens, w, args, base.get());
            }
        }

        for (size_t pi = 0; pi < prompts.size(); ++pi) {
            const Prompt &p = prompts[pi];
            const std::unique_ptr<specula::Session> base = evaluated_prompt(model, p.tokens, args);
            std::vector<int32_t> ar_tokens;
            std::string progress;
            // The reps interleaved (each rep runs every row, in an order rotated by one per rep), so that a slow
            // stretch of the machine falls on several rows rather than on every run of one: on the 2-core VM one
            // run's tok/s varied by ~9% (standard deviation, the same row and prompt in two runs of this bench).
            std::vector<RunResult> lasts(rows.size());
            std::vector<std::vector<double>> times(rows.size());
            for (int32_t rep = 0; rep < args.reps; ++rep)
                for (size_t k = 0; k < rows.size(); ++k) {
                    const size_t ri = (k + size_t(rep)) % rows.size();
                    Row run = rows[ri];
                    if (run.is_auto && !rep_drafts.empty()) run.spec.draft = &rep_drafts[size_t(rep)];
                    lasts[ri] = run_once(model, p.tokens, run, args, base.get());
                    times[ri].push_back(lasts[ri].seconds);
                }
            // The AR row first: the others are compared with its tokens.
            for (size_t ri = 0; ri < rows.size(); ++ri) {
                Row &row = rows[ri];
                const RunResult &last = lasts[ri];
                const double seconds = median(times[ri]);
                const specula_stats &b = last.before, &a = last.after;
                const int64_t rounds = a.n_spec_rounds - b.n_spec_rounds;
                row.seconds += seconds;
                row.tokens += args.n_tokens;
                row.rounds += rounds;
                row.drafted += a.n_drafted - b.n_drafted;
                row.accepted += a.n_accepted - b.n_accepted;
                for (int d = 0; d < 16; ++d) row.at_depth[d] += a.accepted_at_depth[d] - b.accepted_at_depth[d];
                row.draft_ms += a.draft_ms - b.draft_ms;
                row.verify_ms += a.verify_ms - b.verify_ms;
                row.drafter_bytes = std::max(row.drafter_bytes, a.drafter_bytes);
                const double tau = row.ar ? 1.0 : rounds > 0 ? double(a.n_accepted - b.n_accepted + rounds) / double(rounds) : 0.0;
                row.prompt_tau.push_back(tau);
                row.prompt_tok_s.push_back(args.n_tokens / seconds);
                if (row.ar) {
                    ar_tokens = last.tokens;
                    row.prompt_same.push_back("(reference)");
                } else {
                    const auto diff = std::mismatch(ar_tokens.begin(), ar_tokens.end(), last.tokens.begin(), last.tokens.end());
                    if (diff.first == ar_tokens.end() && diff.second == last.tokens.end()) {
                        row.prompt_same.push_back("yes");
                    } else {
                        ++row.mismatches;
                        const size_t at = size_t(diff.first - ar_tokens.begin());
                        row.prompt_same.push_back("MISMATCH at token " + std::to_string(at));
                        std::fprintf(stderr, "bench_draft_quality: MISMATCH: %s / %s: token %zu is %d, AR gave %d\n", p.name.c_str(),
                                     row.label.c_str(), at, diff.second != last.tokens.end() ? *diff.second : -1,
                                     diff.first != ar_tokens.end() ? *diff.first : -1);
                    }
                }
                progress += " | " + row.label + (row.ar ? "" : " tau " + fmt(tau)) + " " + fmt(args.n_tokens / seconds, "%.0f") + " tok/s";
            }
            std::fprintf(stderr, "[%zu/%zu] %s%s\n", pi + 1, prompts.size(), p.name.c_str(), progress.c_str());

            if (args.confirm > 0) {
                Confirmed c;
                c.best = best_fixed_row(rows, pi);
                const size_t auto_ri = size_t(std::find_if(rows.begin(), rows.end(), [](const Row &r) { return r.is_auto; }) - rows.begin());
                std::vector<double> auto_s, best_s;
                for (int32_t k = 0; k < args.confirm; ++k)
                    for (int first = 0; first < 2; ++first) {
                        const bool run_auto = (first == 0) == (k % 2 == 0);
                        Row run = rows[run_auto ? auto_ri : c.best];
                        if (run_auto) run.spec.draft = &confirm_drafts[size_t(k)];
                        const RunResult r = run_once(model, p.tokens, run, args, base.get());
                        if (r.tokens != ar_tokens) {
                            ++rows[run_auto ? auto_ri : c.best].mismatches;
                            std::fprintf(stderr, "bench_draft_quality: MISMATCH: %s / %s (--confirm run %d)\n", p.name.c_str(),
                                         run.label.c_str(), k + 1);
                        }
                        (run_auto ? auto_s : best_s).push_back(r.seconds);
                    }
                c.auto_tok_s = args.n_tokens / median(auto_s);
                c.best_tok_s = args.n_tokens / median(best_s);
                std::fprintf(stderr, "[%zu/%zu] --confirm %d: auto %s tok/s | %s %s %s tok/s\n", pi + 1, prompts.size(), args.confirm,
                             fmt(c.auto_tok_s, "%.1f").c_str(), rows[c.best].label.c_str(), rows[c.best].tree.c_str(),
                             fmt(c.best_tok_s, "%.1f").c_str());
                confirmed.push_back(c);
            }
        }

        // The table.
        const int levels = depth_levels(tree);
        std::string depth_head;
        for (int d = 1; d <= levels; ++d) depth_head += (d > 1 ? "/" : "") + std::to_string(d);
        const double ar_tok_s = rows.front().tokens / rows.front().seconds;
        int mismatches = 0;
        std::printf("\n| row | tree | tok/s | speedup | tau | rounds | depth >= %s (%% of rounds) | draft ms/round | verify ms/round | "
                    "drafter bytes | same as AR |\n",
                    depth_head.c_str());
        std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for (const Row &r : rows) {
            const double tok_s = r.tokens / r.seconds;
            mismatches += r.mismatches;
            if (r.ar) {
                std::printf("| AR | - | %s | 1.00x | 1.00 | | | | | | (reference) |\n", fmt(tok_s, "%.1f").c_str());
                continue;
            }
            const double per_round = r.rounds > 0 ? 1.0 / double(r.rounds) : 0.0;
            std::printf("| %s | %s | %s | %sx | %s | %lld | %s | %s | %s | %zu | %s |\n", r.label.c_str(), r.tree.c_str(),
                        fmt(tok_s, "%.1f").c_str(), fmt(tok_s / ar_tok_s).c_str(),
                        fmt(r.rounds > 0 ? double(r.accepted + r.rounds) / double(r.rounds) : 0).c_str(), static_cast<long long>(r.rounds),
                        depth_summary(r, levels).c_str(), fmt(r.draft_ms * per_round, "%.2f").c_str(),
                        fmt(r.verify_ms * per_round, "%.2f").c_str(), r.drafter_bytes,
                        r.mismatches == 0 ? "yes" : ("**MISMATCH** on " + std::to_string(r.mismatches) + " prompt(s)").c_str());
        }

        if (args.per_file) {
            std::printf("\n| # | prompt | prompt tokens | AR tok/s |");
            for (size_t i = 1; i < rows.size(); ++i) std::printf(" tau %s |", rows[i].label.c_str());
            std::printf("\n|---:|---|---:|---:|");
            for (size_t i = 1; i < rows.size(); ++i) std::printf("---:|");
            std::printf("\n");
            for (size_t pi = 0; pi < prompts.size(); ++pi) {
                std::printf("| %zu | %s | %zu | %s |", pi + 1, prompts[pi].name.c_str(), prompts[pi].tokens.size(),
                            fmt(rows.front().prompt_tok_s[pi], "%.1f").c_str());
                for (size_t i = 1; i < rows.size(); ++i)
                    std::printf(" %s%s |", fmt(rows[i].prompt_tau[pi]).c_str(), rows[i].prompt_same[pi] == "yes" ? "" : " MISMATCH");
                std::printf("\n");
            }
        }
        if (args.regret) {
            // Per prompt: auto against the fastest fixed row of the same prompt (all measured in this run).
            // The cold row (auto from nothing) beside it: what the tuner's memory is worth, in the same run.
            std::printf("\n| # | prompt | auto tok/s | best fixed | its tok/s | auto / best fixed | cold tok/s | cold / best fixed |\n"
                        "|---:|---|---:|---|---:|---:|---:|---:|\n");
            std::vector<double> ratios, cold_ratios;
            const Row *auto_row = nullptr, *cold_row = nullptr;
            for (const Row &r : rows) {
                if (r.is_auto) auto_row = &r;
                if (!r.cold_draft.empty()) cold_row = &r;
            }
            for (size_t pi = 0; pi < prompts.size(); ++pi) {
                const Row *best = &rows[best_fixed_row(rows, pi)];
                const double ratio = auto_row->prompt_tok_s[pi] / best->prompt_tok_s[pi];
                const double cold = cold_row->prompt_tok_s[pi] / best->prompt_tok_s[pi];
                ratios.push_back(ratio);
                cold_ratios.push_back(cold);
                std::printf("| %zu | %s | %s | %s %s | %s | %sx | %s | %sx |\n", pi + 1, prompts[pi].name.c_str(),
                            fmt(auto_row->prompt_tok_s[pi], "%.1f").c_str(), best->label.c_str(), best->tree.c_str(),
                            fmt(best->prompt_tok_s[pi], "%.1f").c_str(), fmt(ratio).c_str(), fmt(cold_row->prompt_tok_s[pi], "%.1f").c_str(),
                            fmt(cold).c_str());
            }
            const auto below = [](const std::vector<double> &v) { return int(std::count_if(v.begin(), v.end(), [](double r) { return r < 0.95; })); };
            std::printf("\nauto / best fixed per prompt: median %sx, smallest %sx, %d of %zu prompts below 0.95x\n", fmt(median(ratios)).c_str(),
                        fmt(*std::min_element(ratios.begin(), ratios.end())).c_str(), below(ratios), ratios.size());
            std::printf("auto from nothing (cold) / best fixed per prompt: median %sx, smallest %sx, %d of %zu prompts below 0.95x\n",
                        fmt(median(cold_ratios)).c_str(), fmt(*std::min_element(cold_ratios.begin(), cold_ratios.end())).c_str(),
                        below(cold_ratios), cold_ratios.size());
            if (!confirmed.empty()) {
                std::printf("\n--confirm %d: the best fixed row as the reps chose it, timed again against auto (medians of runs that "
                            "did not choose it)\n\n| # | prompt | best fixed | auto tok/s | its tok/s | auto / best fixed |\n"
                            "|---:|---|---|---:|---:|---:|\n",
                            args.confirm);
                std::vector<double> conf_ratios;
                for (size_t pi = 0; pi < confirmed.size(); ++pi) {
                    const Confirmed &c = confirmed[pi];
                    conf_ratios.push_back(c.auto_tok_s / c.best_tok_s);
                    std::printf("| %zu | %s | %s %s | %s | %s | %sx |\n", pi + 1, prompts[pi].name.c_str(), rows[c.best].label.c_str(),
                                rows[c.best].tree.c_str(), fmt(c.auto_tok_s, "%.1f").c_str(), fmt(c.best_tok_s, "%.1f").c_str(),
                                fmt(conf_ratios.back()).c_str());
                }
                std::printf("\nconfirmed auto / best fixed per prompt: median %sx, smallest %sx, %d of %zu prompts below 0.95x\n",
                            fmt(median(conf_ratios)).c_str(), fmt(*std::min_element(conf_ratios.begin(), conf_ratios.end())).c_str(),
                            below(conf_ratios), conf_ratios.size());
            }
        }
        std::fflush(stdout);

        if (!args.json.empty()) {
            nlohmann::ordered_json j;
            j["specula"] = specula_version_string();
            j["machine"] = {{"cpu", cpu_name()}, {"cores", std::thread::hardware_concurrency()}};
            j["model"] = {{"name", model_name}, {"path", model_path.string()}, {"arch", model.arch()}, {"n_params", model.n_params()}};
            j["drafts"] = nlohmann::ordered_json::array();
            for (size_t i = 0; i < drafts.size(); ++i)
                j["drafts"].push_back({{"label", draft_info[i].label}, {"path", draft_info[i].path}, {"n_params", drafts[i].n_params()},
                                       {"window", drafts[i].window()}});
            j["settings"] = {{"workload", code ? "code" : args.prompt.empty() ? "stories" : "prompt"},
                             {"files", args.files},
                             {"context", args.context},
                             {"n_tokens", args.n_tokens},
                             {"threads", args.threads},
                             {"reps", args.reps},
                             {"confirm", args.confirm},
                             {"ngram", args.ngram},
                             {"tree", tree},
                             {"seed", args.seed},
                             {"temperature", 0}};
            j["workload"] = workload;
            j["prompts"] = nlohmann::ordered_json::array();
            for (const Prompt &p : prompts)
                j["prompts"].push_back({{"name", p.name}, {"prompt_tokens", p.tokens.size()}, {"file_tokens", p.file_tokens}});
            j["rows"] = nlohmann::ordered_json::array();
            for (const Row &r : rows) {
                const double tok_s = r.tokens / r.seconds;
                nlohmann::ordered_json row = {{"row", r.label},
                                              {"tree", r.tree},
                                              {"tokens", r.tokens},
                                              {"seconds", r.seconds},
                                              {"tok_s", tok_s},
                                              {"speedup", tok_s / ar_tok_s}};
                if (!r.ar) {
                    const double per_round = r.rounds > 0 ? 1.0 / double(r.rounds) : 0.0;
                    std::vector<double> depth_frac;
                    for (int d = 0; d < 16; ++d) depth_frac.push_back(double(r.at_depth[d]) * per_round);
                    while (depth_frac.size() > size_t(levels) && depth_frac.back() == 0) depth_frac.pop_back();
                    row["tau"] = r.rounds > 0 ? double(r.accepted + r.rounds) / double(r.rounds) : 0.0;
                    row["rounds"] = r.rounds;
                    row["drafted"] = r.drafted;
                    row["accepted"] = r.accepted;
                    row["depth_frac"] = depth_frac;  // [d]: fraction of rounds whose accepted path reached depth >= d + 1
                    row["draft_ms_per_round"] = r.draft_ms * per_round;
                    row["verify_ms_per_round"] = r.verify_ms * per_round;
                    row["drafter_bytes"] = r.drafter_bytes;
                    row["same_as_ar"] = r.mismatches == 0;
                }
                row["per_prompt"] = nlohmann::ordered_json::array();
                for (size_t pi = 0; pi < prompts.size(); ++pi) {
                    nlohmann::ordered_json pp = {{"tok_s", r.prompt_tok_s[pi]}};
                    if (!r.ar) {
                        pp["tau"] = r.prompt_tau[pi];
                        pp["same_as_ar"] = r.prompt_same[pi] == "yes";
                    }
                    row["per_prompt"].push_back(pp);
                }
                j["rows"].push_back(row);
            }
            if (!confirmed.empty()) {
                j["confirmed"] = nlohmann::ordered_json::array();
                for (size_t pi = 0; pi < confirmed.size(); ++pi)
                    j["confirmed"].push_back({{"prompt", prompts[pi].name},
                                              {"best_row", rows[confirmed[pi].best].label},
                                              {"best_tree", rows[confirmed[pi].best].tree},
                                              {"auto_tok_s", confirmed[pi].auto_tok_s},
                                              {"best_tok_s", confirmed[pi].best_tok_s}});
            }
            std::ofstream out(args.json);
            out << j.dump(2) << "\n";
            if (!out) throw std::runtime_error("cannot write " + args.json);
        }

        if (mismatches > 0) {
            std::fprintf(stderr, "bench_draft_quality: %d MISMATCH(ES): speculative output differs from AR\n", mismatches);
            return 1;
        }
        return 0;
    } catch (const std::exception &e) {
        std::fflush(stdout);
        std::fprintf(stderr, "bench_draft_quality: %s\n", e.what());
        return 1;
    }
}
