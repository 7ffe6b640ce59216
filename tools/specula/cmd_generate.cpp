// `specula generate`: load a model, feed a prompt, stream the continuation.
//
// Output contract (scripts rely on it):
//   text  - stdout: prompt text followed by the generated text, flushed per token; stderr: progress bar (TTY
//           only) and one stats line at the end.
//   jsonl - stdout: one JSON object per generated token, then one {"stats":{...}} line; nothing else.
//           (Text flushed by the final stop, with no token of its own, comes as {"id":-1,"text":...}.)
//           When speculating (--draft, --draft-model, --spec ngram/grammar), every token object also has "accepted"
//           (true: drafted and accepted by the target; false: produced by the target itself), and the stats
//           object gains "drafter", "tree" (the last round's, e.g. "auto:1,1,1"), "tau", "rounds", "drafted",
//           "accepted", "accept_per_depth", "draft_ms", "verify_ms" and "drafter_bytes". Without a drafter the lines are exactly as before. When tokens were
//           restored from a snapshot or the prompt cache, the stats object has "restored_tokens".
//
// Sessions that persist: --save-session FILE writes a full snapshot after generating; --load-session FILE
// continues from one (the prompt options then add text after the restored context, and the snapshot's sampler,
// random generator included, is kept unless sampling options are given); --prompt-cache DIR restores the longest
// cached prefix of the prompt, evaluates only the rest and stores the context when done.
#include "cli.h"
#include "interrupt.h"
#include "json_out.h"
#include "model_path.h"
#include "progress_bar.h"
#include "backend_option.h"
#include "stats_line.h"
#include "tree_widths.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace specula_cli {
namespace {

// A number > 0. CLI11's PositiveNumber says "Value 0 not in range 0.000000 to " followed by all 309 digits of DBL_MAX.
const CLI::Validator kPositive(
    [](std::string &value) -> std::string {
        char *end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        return end != value.c_str() && *end == '\0' && v > 0 ? std::string() : "must be a number > 0, not '" + value + "'";
    },
    "POSITIVE");

struct GenerateArgs {
    std::string model;
    std::string prompt;
    std::string prompt_file;
    std::string prompt_ids;
    int32_t n_predict = 128;
    specula::SamplerOptions sampler;  // library defaults until overridden by flags
    specula::SessionOptions session;
    std::string backend = "auto";
    std::string kv_type = "f16";
    bool no_fallback = false;
    bool context_shift = false;
    std::vector<std::string> stops;
    bool no_mmap = false;
    std::string format = "text";
    int32_t top_logits = 0;
    bool no_bos = false;
    CLI::Option *seed_opt = nullptr;  // to tell "--seed given" from "library default"
    std::string draw = "race";        // --draw: specula_sampler_options.draw
    std::string grammar, grammar_file;  // GBNF text, or a file of it
    std::string json_schema, json_schema_file;  // a JSON schema (its grammar), or a file of it
    // Speculative decoding.
    std::string draft;        // LongSpec draft file
    std::string draft_model;  // independent draft model
    std::string spec = "none";
    std::string tree = "auto"; // "auto", "fixed" or widths "4,16,16,16,16"
    std::string sampled_drafts = "coupled";  // or "leviathan"
    int32_t ngram_nodes = -1; // -1: library default
    // Snapshots.
    std::string save_session, load_session, prompt_cache;
    int64_t prompt_cache_mib = 1024;
    std::vector<CLI::Option *> sampler_opts;  // to tell whether any sampling option was given
};

// --tree auto|fixed|4,16,16,16,16 (tools/common/tree_widths.h), as a usage error.
specula_apps::TreeOption parse_tree(const std::string &text) {
    try {
        return specula_apps::parse_tree_option(text);
    } catch (const std::invalid_argument &e) {
        throw UsageError(e.what());
    }
}

// "1,403,407" (also "[1, 403, 407]" or whitespace-separated, so a JSON array can be pasted as is).
std::vector<int32_t> parse_token_ids(const std::string &text) {
    std::string s = text;
    for (char &c : s)
        if (c == ',' || c == '[' || c == ']') c = ' ';
    std::istringstream in(s);
    std::vector<int32_t> ids;
    std::string item;
    while (in >> item) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(item, &used, 10);
        } catch (const std::exception &) {
            used = 0;
        }
        if (used != item.size() || v < INT32_MIN || v > INT32_MAX)
            throw UsageError("--prompt-ids: '" + item + "' is not a token id (expected e.g. 1,403,407)");
        ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) throw UsageError("--prompt-ids: no token ids given");
    return ids;
}

std::string read_prompt_file(const std::string &path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open prompt file '" + path + "': " + std::strerror(errno));
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) throw std::runtime_error("cannot read prompt file '" + path + "'");
    return text;
}

void write_stdout(std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);  // stream token by token, even into a pipe
}

int run_generate(GenerateArgs &a) {
    const bool jsonl = a.format == "jsonl";

    // Resolve the prompt before touching the model so argument mistakes are reported instantly.
    std::vector<int32_t> prompt_ids;
    std::string prompt_text = a.prompt;
    const bool use_ids = !a.prompt_ids.empty();
    if (use_ids) prompt_ids = parse_token_ids(a.prompt_ids);
    if (!a.prompt_file.empty()) prompt_text = read_prompt_file(a.prompt_file);
    const bool resume = !a.load_session.empty();
    if (!use_ids && prompt_text.empty() && a.no_bos && !resume)
        throw UsageError("nothing to generate from: empty prompt and --no-bos");
    bool sampler_given = false;
    for (const CLI::Option *o : a.sampler_opts) sampler_given = sampler_given || o->count() > 0;
    if (!a.grammar_file.empty()) {
        std::ifstream f(a.grammar_file, std::ios::binary);
        if (!f) throw std::runtime_error("cannot open grammar file '" + a.grammar_file + "': " + std::strerror(errno));
        a.grammar.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        if (f.bad()) throw std::runtime_error("cannot read grammar file '" + a.grammar_file + "'");
        if (a.grammar.empty()) throw UsageError("--grammar-file: '" + a.grammar_file + "' is empty");
    }
    if (!a.json_schema_file.empty()) {
        std::ifstream f(a.json_schema_file, std::ios::binary);
        if (!f) throw std::runtime_error("cannot open JSON schema file '" + a.json_schema_file + "': " + std::strerror(errno));
        a.json_schema.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        if (f.bad()) throw std::runtime_error("cannot read JSON schema file '" + a.json_schema_file + "'");
    }
    if (!a.json_schema.empty()) {
        try {
            a.grammar = specula::json_schema_to_grammar(a.json_schema);
        } catch (const specula::Error &e) {
            throw specula::Error(e.status(), std::string("--json-schema: ") + e.what());
        }
    }
    if (!a.grammar.empty()) a.sampler.set_grammar(a.grammar);

    const bool ngram = a.spec == "ngram";
    const bool grammar_drafts = a.spec == "grammar";
    if (grammar_drafts && a.grammar.empty()) throw UsageError("--spec grammar needs --grammar, --grammar-file or --json-schema");
    if (grammar_drafts && (!a.draft.empty() || !a.draft_model.empty()))
        throw UsageError("--spec grammar is the grammar alone; with --draft / --draft-model the grammar's forced text joins their trees anyway");
    const bool model_drafter = !a.draft.empty() || !a.draft_model.empty();
    const specula_apps::TreeOption tree_option = parse_tree(a.tree);
    const std::vector<int32_t> &tree = tree_option.widths;
    const specula_tree_mode tree_mode = tree_option.fixed ? SPECULA_TREE_FIXED : SPECULA_TREE_AUTO;
    if (!tree.empty() && !model_drafter) throw UsageError("--tree shapes the tree of --draft / --draft-model; give one of them");
    if (a.ngram_nodes >= 0 && !ngram) throw UsageError("--ngram-nodes needs --spec ngram");

    // Sampling without --seed: a fresh seed per run, like most CLIs; --seed makes runs reproducible. (A resumed
    // session keeps the snapshot's sampler and generator unless sampling options are given.)
    if (a.seed_opt->count() == 0) a.sampler.seed = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    a.sampler.draw = a.draw == "llama.cpp" ? SPECULA_DRAW_LLAMA_CPP : SPECULA_DRAW_RACE;

    InterruptHandler interrupt;  // installed before loading so Ctrl-C can cancel a slow load too
    const std::string path = resolve_model_path(a.model);

    specula::Model model;
    {
        ProgressBar bar;
        specula::ModelOptions mo;
        mo.use_mmap = !a.no_mmap;
        mo.progress = [&bar](float p) {
            bar.update(p);
            return !InterruptHandler::interrupted();
        };
        try {
            model = specula::Model::load(path, mo);
        } catch (const specula::Error &e) {
            bar.clear();
            if (e.status() == SPECULA_ERR_CANCELLED && InterruptHandler::interrupted()) {
                std::fprintf(stderr, "specula: interrupted while loading\n");
                return kExitInterrupted;
            }
            throw specula::Error(e.status(), "cannot load model '" + path + "': " + e.what());
        }
    }

    a.session.backend = specula_apps::backend_from_name(a.backend);
    a.session.allow_fallback = a.no_fallback ? 0 : 1;
    a.session.kv_type = a.kv_type == "f32" ? SPECULA_KV_F32 : a.kv_type == "q8_0" ? SPECULA_KV_Q8_0 : SPECULA_KV_F16;
    a.session.context_policy = a.context_shift ? SPECULA_CONTEXT_SHIFT : SPECULA_CONTEXT_STOP;
    specula::Session session(model, a.session, a.sampler);
    // A GPU request (cuda, vulkan) that ended on the CPU says why (AUTO stays quiet: the CPU is a normal outcome there).
    if (specula_apps::is_gpu_backend(a.session.backend) && !session.backend_note().empty())
        std::fprintf(stderr, "specula: %s\n", session.backend_note().c_str());

    // Drafters. The session keeps its own references: the handles below may go at the end of this block.
    if (model_drafter || ngram || grammar_drafts) {
        specula::Draft draft;
        specula::Model draft_model;
        if (!a.draft.empty()) {
            try {
                draft = specula::Draft::load(a.draft, model);
            } catch (const specula::Error &e) {
                throw specula::Error(e.status(), "cannot load draft '" + a.draft + "': " + e.what());
            }
        }
        if (!a.draft_model.empty()) {
            specula::ModelOptions dmo;
            dmo.use_mmap = !a.no_mmap;
            try {
                draft_model = specula::Model::load(a.draft_model, dmo);
            } catch (const specula::Error &e) {
                throw specula::Error(e.status(), "cannot load draft model '" + a.draft_model + "': " + e.what());
            }
        }
        specula::SpeculativeOptions so;
        so.draft = draft ? &draft : nullptr;
        so.draft_model = draft_model ? &draft_model : nullptr;
        so.ngram = ngram;
        so.grammar = grammar_drafts;
        so.tree = tree;
        so.tree_mode = tree_mode;
        so.sampled_drafts = a.sampled_drafts == "leviathan" ? SPECULA_SAMPLED_DRAFTS_LEVIATHAN : SPECULA_SAMPLED_DRAFTS_COUPLED;
        if (a.ngram_nodes >= 0) so.ngram_nodes = a.ngram_nodes;
        session.set_speculative(so);
    }
    const std::string drafter = session.drafter_name();
    interrupt.attach(session.get());
    struct Detach {  // the handler must forget the session before it is destroyed, on every path out
        InterruptHandler &h;
        ~Detach() { h.attach(nullptr); }
    } detach{interrupt};

    if (resume) {
        try {
            session.load_file(a.load_session);
        } catch (const specula::Error &e) {
            throw specula::Error(e.status(), "cannot load session '" + a.load_session + "': " + e.what());
        }
        if (sampler_given) session.set_sampler(a.sampler);
    }
    specula::PromptCache cache;
    if (!a.prompt_cache.empty()) cache = specula::PromptCache(a.prompt_cache, uint64_t(a.prompt_cache_mib) << 20);

    if (!use_ids) {
        // Special tokens (BOS) only at the start of a context; after a restored one the prompt continues it.
        const int32_t flags = a.no_bos || session.n_tokens() > 0 ? 0 : SPECULA_TOKENIZE_ADD_SPECIAL;
        prompt_ids = model.tokenize(prompt_text, flags);
    } else {
        // Ids are taken verbatim (include BOS yourself, as llama.cpp's reference files do).
        prompt_text = model.detokenize(prompt_ids);
    }
    // The session is new here (--prompt-cache excludes --load-session); a miss leaves it empty.
    const size_t from_cache = cache ? cache.restore(session, prompt_ids) : 0;
    session.append_tokens(prompt_ids.data() + from_cache, prompt_ids.size() - from_cache);
    if (session.n_tokens() == 0) throw UsageError("nothing to generate from: the prompt has no tokens");

    if (!jsonl) write_stdout(prompt_text);

    specula::GenerateOptions go(a.n_predict);
    go.stop_strings = a.stops;
    go.top_logits = jsonl ? a.top_logits : 0;

    bool wrote_text = !prompt_text.empty();
    const specula_stop_reason reason = session.generate(go, [&](const specula_token_event &ev) {
        if (jsonl) {
            // A final event may carry only flushed text (e.g. held back for a stop string, then EOS): it is
            // written with id -1 (SPECULA_TOKEN_NULL) so that concatenating every "text" gives the full output.
            if (ev.token != SPECULA_TOKEN_NULL || ev.text_len > 0)
                write_stdout(json_token_line(ev, !drafter.empty()) + "\n");
        } else if (ev.text_len > 0) {
            write_stdout(std::string_view(ev.text, ev.text_len));
            wrote_text = true;
        }
        return true;
    });

    if (cache) cache.store(session);
    if (!a.save_session.empty()) {
        try {
            session.save_file(a.save_session);
        } catch (const specula::Error &e) {
            throw specula::Error(e.status(), "cannot save session '" + a.save_session + "': " + e.what());
        }
    }

    const specula_stats stats = session.stats();
    if (jsonl) {
        write_stdout(json_stats_line(stats, reason, drafter, session.tree_shape()) + "\n");
    } else {
        if (wrote_text) write_stdout("\n");  // do not leave the shell prompt glued to the story
        std::fprintf(stderr, "%s\n", stats_line(stats, reason, drafter, session.tree_shape()).c_str());
    }
    return reason == SPECULA_STOP_CANCELLED && InterruptHandler::interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace

Command add_generate_command(CLI::App &parent) {
    auto args = std::make_shared<GenerateArgs>();
    GenerateArgs &a = *args;
    CLI::App *cmd = parent.add_subcommand("generate", "Generate text from a prompt");

    cmd->add_option("-m,--model", a.model,
                    "GGUF model file (default: $SPECULA_MODEL, else the bundled stories260K)");
    auto *p = cmd->add_option("-p,--prompt", a.prompt, "Prompt text");
    auto *f = cmd->add_option("-f,--file", a.prompt_file, "Read the prompt from a file ('-' = stdin)");
    auto *ids = cmd->add_option("--prompt-ids", a.prompt_ids,
                                "Prompt as token ids, e.g. 1,403,407 (taken verbatim: no BOS is added)");
    p->excludes(f, ids);
    f->excludes(p, ids);
    ids->excludes(p, f);
    cmd->add_option("-n,--n-predict", a.n_predict, "Tokens to generate (< 0: until the context is full)")
        ->capture_default_str();

    specula_sampler_options &s = a.sampler;
    std::vector<CLI::Option *> &so_list = a.sampler_opts;
    so_list.push_back(cmd->add_option("--temp", s.temperature, "Temperature (0 = greedy)")->capture_default_str());
    so_list.push_back(cmd->add_option("--top-k", s.top_k, "Top-k (0 = off)")->capture_default_str());
    so_list.push_back(cmd->add_option("--top-p", s.top_p, "Top-p (1 = off)")->capture_default_str()->check(CLI::Range(0.0f, 1.0f)));
    so_list.push_back(cmd->add_option("--min-p", s.min_p, "Min-p (0 = off)")->capture_default_str()->check(CLI::Range(0.0f, 1.0f)));
    so_list.push_back(cmd->add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")->capture_default_str()
        ->check(kPositive));
    so_list.push_back(cmd->add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0 = off)")->capture_default_str());
    so_list.push_back(cmd->add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0 = off)")
        ->capture_default_str());
    a.seed_opt = cmd->add_option("--seed", s.seed, "Sampling seed (default: random per run)");
    so_list.push_back(a.seed_opt);
    so_list.push_back(cmd->add_option("--draw", a.draw, "How sampled tokens are drawn for the seed: race (default: Specula's coupled race, "
                                                         "the most sampled drafts accepted) or llama.cpp (its generator and distribution: "
                                                         "llama.cpp's text for the same --seed)")
        ->check(CLI::IsMember({"race", "llama.cpp"})));
    auto *grammar = cmd->add_option("--grammar", a.grammar,
                                    "A GBNF grammar (llama.cpp's format, docs/grammars.md) the generated text must follow");
    auto *grammar_file = cmd->add_option("--grammar-file", a.grammar_file, "Read the --grammar from a file");
    auto *schema = cmd->add_option("-j,--json-schema", a.json_schema,
                                   "A JSON schema the output must follow (turned into a grammar, as llama.cpp's --json-schema)");
    auto *schema_file = cmd->add_option("--json-schema-file", a.json_schema_file, "Read the --json-schema from a file");
    for (CLI::Option *o : {grammar, grammar_file, schema, schema_file}) {
        for (CLI::Option *other : {grammar, grammar_file, schema, schema_file})
            if (other != o) o->excludes(other);
        so_list.push_back(o);
    }

    specula_session_options &so = a.session;
    cmd->add_option("-c,--ctx-size", so.n_ctx, "Context length in tokens (0 = min(trained, 4096))")
        ->capture_default_str()->check(CLI::Range(0, 1 << 22));
    cmd->add_option("-t,--threads", so.n_threads, "Compute threads (0 = number of cores, at most 8)")
        ->capture_default_str()->check(CLI::Range(0, 512));
    cmd->add_option("--backend", a.backend, specula_apps::backend_help())
        ->capture_default_str()->check(CLI::IsMember(specula_apps::backend_names()));
    cmd->add_option("--device", so.device, "GPU index for --backend cuda/vulkan/auto (see `specula devices`)")
        ->capture_default_str()->check(CLI::Range(0, 1024));
    cmd->add_option("--kv-type", a.kv_type, "Element type of the KV cache (llama.cpp's --cache-type-k/-v): f16, f32, q8_0")
        ->capture_default_str()->check(CLI::IsMember({"f16", "f32", "q8_0"}));
    cmd->add_flag("--context-shift", a.context_shift,
                  "When the context is full, drop --discard tokens after the first --keep and go on (default: stop)");
    cmd->add_option("--keep", so.n_keep, "With --context-shift: leading tokens always kept (attention sinks)")
        ->capture_default_str()->check(CLI::Range(0, 1 << 22));
    cmd->add_option("--discard", so.n_discard, "With --context-shift: tokens dropped per shift (0 = half of those after --keep)")
        ->capture_default_str()->check(CLI::Range(0, 1 << 22));
    cmd->add_flag("--no-fallback", a.no_fallback, "Fail instead of falling back to the CPU when the backend cannot be used");

    // One value per --stop, accumulated over repeats (CLI11 would otherwise let one --stop swallow several words).
    cmd->add_option("--stop", a.stops, "Stop before this string (repeatable)")
        ->take_all()->expected(1)->allow_extra_args(false);
    cmd->add_flag("--no-mmap", a.no_mmap, "Read the model into memory instead of mapping it");
    cmd->add_option("--format", a.format, "Output format")->capture_default_str()
        ->check(CLI::IsMember({"text", "jsonl"}));
    cmd->add_option("--top-logits", a.top_logits, "With --format jsonl: report the K largest logits per token")
        ->capture_default_str()->check(CLI::Range(0, 64));
    cmd->add_flag("--no-bos", a.no_bos, "Do not add the BOS token to a text prompt");
    so_list.push_back(cmd->add_option("--context-penalty", s.context_penalty,
                    "TokenSwift's contextual penalty theta on tokens of the recent context (1 = off)")
        ->capture_default_str()->check(kPositive));
    so_list.push_back(cmd->add_option("--context-penalty-window", s.context_penalty_window,
                    "Tokens of history the contextual penalty looks at (-1 = all)")
        ->capture_default_str()->check(CLI::Range(-1, 1 << 22)));

    // Sessions that persist (docs/snapshots.md).
    cmd->add_option("--save-session", a.save_session, "After generating, save the whole session (exact resume) to FILE");
    auto *load = cmd->add_option("--load-session", a.load_session,
                                 "Continue a saved session: the prompt (optional) is added after its context; its sampler is kept "
                                 "unless sampling options are given");
    auto *pc = cmd->add_option("--prompt-cache", a.prompt_cache,
                               "Reuse evaluated prompts: restore the longest cached prefix from DIR, store the context after generating");
    cmd->add_option("--prompt-cache-size", a.prompt_cache_mib, "Size limit of the --prompt-cache directory in MiB (0 = none)")
        ->capture_default_str()->check(CLI::Range(int64_t(0), int64_t(1) << 40));
    load->excludes(pc);
    pc->excludes(load);

    // Speculative decoding: lossless (the output is what the model alone gives), only faster or slower.
    auto *draft = cmd->add_option("--draft", a.draft, "Speculative decoding with a LongSpec draft file made for this model");
    auto *draft_model = cmd->add_option("--draft-model", a.draft_model,
                                        "Speculative decoding with a small draft model of the same vocabulary");
    draft->excludes(draft_model);
    draft_model->excludes(draft);
    cmd->add_option("--spec", a.spec,
                    "Model-free drafting: ngram (prompt lookup + token reuse; merges with --draft / --draft-model), or grammar (the "
                    "text a --grammar / --json-schema forces, alone; it joins the other drafters' trees anyway)")
        ->capture_default_str()->check(CLI::IsMember({"none", "ngram", "grammar"}));
    cmd->add_option("--tree", a.tree,
                    "Draft tree: auto (each round the tree expected to be fastest, plain decoding included), fixed "
                    "(always 4,16,16,16,16 and the n-gram nodes), or nodes per level for --draft / --draft-model, "
                    "always drafted (a chain: 1,1,1,1)")
        ->capture_default_str();
    cmd->add_option("--ngram-nodes", a.ngram_nodes, "Tree nodes for n-gram candidates (default 16; with --tree auto, the most tried)")
        ->check(CLI::Range(0, 1024));
    cmd->add_option("--sampled-drafts", a.sampled_drafts,
                    "Chains drafted by sampling (--temp > 0): coupled (drawn with the target's random keys: for a --seed, the "
                    "text of plain sampling whatever the drafter or tree) or leviathan (Leviathan's accept/reject rule: more "
                    "tokens per round with weak drafts, text that depends on the drafts); both exact in distribution")
        ->capture_default_str()->check(CLI::IsMember({"coupled", "leviathan"}));

    return Command{cmd, [args] { return run_generate(*args); }};
}

}  // namespace specula_cli
