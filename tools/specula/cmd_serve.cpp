// `specula serve`: a llama-server-compatible HTTP endpoint on a model (tools/serve, docs/server.md).
//
// stderr: one line per setting that matters, then "server is listening on http://HOST:PORT" (with the real port
// when --port 0 asked for any free one: tests and scripts read it).
// SIGINT / SIGTERM stop it cleanly: no new connections, running generations cancelled, exit code 0.
#include "cli.h"
#include "backend_option.h"
#include "model_path.h"
#include "tree_widths.h"

#include "server.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <pthread.h>
#include <sys/resource.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

namespace specula_cli {
namespace {

struct ServeArgs {
    specula_serve::ServeConfig config;
    std::string spec = "ngram";
    std::string tree = "auto";
    std::string ngram_nodes = "auto";
    bool no_mmap = false;
    size_t max_body_mib = 16;
    bool ctx_size_given = false;  // -c 0 given means the trained context; not given, min(trained, 4096)
    std::string chat_template_file;
    std::string draw = "llama.cpp";
};

int run_serve(ServeArgs &a) {
    specula_serve::ServeConfig &c = a.config;
    c.ngram = a.spec == "ngram";
    if (a.ngram_nodes != "auto") {
        try {
            size_t used = 0;
            c.ngram_nodes = std::stoi(a.ngram_nodes, &used);
            if (used != a.ngram_nodes.size() || c.ngram_nodes < 0 || c.ngram_nodes > 1024) throw std::invalid_argument("range");
        } catch (const std::exception &) {
            throw UsageError("--ngram-nodes: expected auto or a number in [0, 1024], got '" + a.ngram_nodes + "'");
        }
    }
    try {
        const specula_apps::TreeOption tree = specula_apps::parse_tree_option(a.tree);
        c.tree = tree.widths;
        c.fixed_tree = tree.fixed;
    } catch (const std::invalid_argument &e) {
        throw UsageError(e.what());
    }
    if (!c.tree.empty() && c.draft.empty() && c.draft_model.empty())
        throw UsageError("--tree shapes the tree of --draft / --draft-model; give one of them");
    c.max_body_bytes = a.max_body_mib << 20;
    c.sampling.sampler.draw = a.draw == "race" ? SPECULA_DRAW_RACE : SPECULA_DRAW_LLAMA_CPP;
    if (!a.chat_template_file.empty()) {
        std::ifstream in(a.chat_template_file, std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        if (!in || text.str().empty()) throw UsageError("--chat-template-file: cannot read '" + a.chat_template_file + "'");
        c.chat_template = text.str();
    }
    if (!c.slot_save_path.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(c.slot_save_path, ec);
        if (!std::filesystem::is_directory(c.slot_save_path, ec))
            throw UsageError("--slot-save-path: '" + c.slot_save_path + "' is not a folder and cannot be made one");
    }
    c.model_path = resolve_model_path(c.model_path);

    // Signals are taken by one thread with sigwait, not by a handler: stopping the server is not async-signal-safe.
    // Blocked here, before any thread starts, so every thread inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR1);  // our own "the server ended" wake-up of the signal thread
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-write is a failed write, not a dead server

    specula::ModelOptions mo;
    mo.use_mmap = !a.no_mmap;
    specula::Model model;
    try {
        model = specula::Model::load(c.model_path, mo);
    } catch (const specula::Error &e) {
        throw specula::Error(e.status(), "cannot load model '" + c.model_path + "': " + e.what());
    }
    // llama-server's -c: the server's context, divided among the slots; -c 0 (llama.vim's README gives --ctx-size
    // 0) is the trained context. Not given, each slot gets min(trained, 4096).
    if (a.ctx_size_given) {
        const int32_t total = c.n_ctx == 0 ? model.n_ctx_train() : c.n_ctx;
        c.n_ctx = std::max(1, total / std::max(1, c.n_parallel));
    }
    // Every connection holds a descriptor: with desktops' default soft limit (1024) the accept loop would stall at
    // EMFILE before --max-connections (1024) is reached. Raise the soft limit towards the hard one, and where even
    // that is too low, lower the cap so that the server answers 503 instead of stalling.
    {
        const rlim_t wanted = rlim_t(c.max_connections) + 256;
        rlimit lim{};
        if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < wanted) {
            lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, lim.rlim_max);
            setrlimit(RLIMIT_NOFILE, &lim);
            getrlimit(RLIMIT_NOFILE, &lim);
            if (lim.rlim_cur < wanted) {
                const int cap = std::max(8, int(lim.rlim_cur) - 256);
                std::fprintf(stderr, "specula serve: --max-connections %d lowered to %d (open files limited to %llu)\n",
                             c.max_connections, cap, (unsigned long long)lim.rlim_cur);
                c.max_connections = cap;
                c.max_connections_per_client = std::min(c.max_connections_per_client, cap);
            }
        }
    }
    specula_serve::Server server(c, model);
    const int port = server.bind();

    const std::string drafter = server.drafter_name();
    std::fprintf(stderr, "specula serve: model %s (%s, %s), %d slot%s of %d tokens, drafter %s\n", c.model_path.c_str(),
                 model.arch().c_str(), model.weight_type().c_str(), c.n_parallel, c.n_parallel == 1 ? "" : "s", server.n_ctx(),
                 drafter.empty() ? "none" : drafter.c_str());
    if (c.chat_template.empty() && server.chat_template() == "chatml")
        std::fprintf(stderr, "specula serve: the model has no chat template: chats use chatml, as llama-server's default\n");
    if (!server.chat_note().empty()) std::fprintf(stderr, "specula serve: %s\n", server.chat_note().c_str());
    if (!server.spec_report().empty()) std::fprintf(stderr, "specula serve: %s\n", server.spec_report().c_str());
    if (!server.batch_note().empty()) std::fprintf(stderr, "specula serve: %s\n", server.batch_note().c_str());
    // A GPU request (cuda, vulkan) that ended on the CPU says why, as `specula generate` does (AUTO stays quiet).
    if (specula_apps::is_gpu_backend(specula_apps::backend_from_name(c.backend)) && !server.backend_note().empty())
        std::fprintf(stderr, "specula serve: %s\n", server.backend_note().c_str());
    std::fprintf(stderr, "server is listening on http://%s:%d\n", c.host.c_str(), port);
    std::fflush(stderr);

    // Written by the waiter thread, read here after run() returns: atomic, since nothing else orders the two
    // (ThreadSanitizer's concurrency pass found the plain int racing).
    std::atomic<int> stop_signal{0};
    std::thread waiter([&] {
        int sig = 0;
        sigwait(&signals, &sig);
        if (sig != SIGUSR1) {
            stop_signal = sig;
            server.stop();
        }
    });
    const pthread_t waiter_handle = waiter.native_handle();
    const bool ok = server.run();
    if (stop_signal == 0) pthread_kill(waiter_handle, SIGUSR1);
    waiter.join();
    if (stop_signal != 0) std::fprintf(stderr, "specula serve: %s: stopped\n", stop_signal.load() == SIGINT ? "SIGINT" : "SIGTERM");
    return ok || stop_signal != 0 ? kExitOk : kExitFailure;
}

}  // namespace

Command add_serve_command(CLI::App &parent) {
    auto args = std::make_shared<ServeArgs>();
    ServeArgs &a = *args;
    specula_serve::ServeConfig &c = a.config;
    CLI::App *cmd = parent.add_subcommand("serve", "Serve a model over HTTP, compatible with llama-server (IDE plugins, OpenAI clients)");
    cmd->add_option("-m,--model", c.model_path, "GGUF model file (default: $SPECULA_MODEL, else the bundled stories260K)");
    cmd->add_option("-a,--alias", c.model_alias, "Model name reported by /v1/models and the responses (default: the file name)");
    cmd->add_option("--host", c.host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", c.port, "Port to listen on (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
    cmd->add_option("-c,--ctx-size", c.n_ctx, "Context length in tokens, divided among the slots as llama-server divides it (0: the "
                                              "model's trained context; not given: min(trained, 4096) for each slot)")
        ->check(CLI::Range(0, 1 << 22))
        ->each([&a](const std::string &) { a.ctx_size_given = true; });
    cmd->add_option("-t,--threads", c.n_threads, "Compute threads per slot (0 = cores / parallel)")
        ->capture_default_str()->check(CLI::Range(0, 512));
    cmd->add_option("--parallel", c.n_parallel, "Slots: requests served at once (llama-server's -np)")
        ->capture_default_str()->check(CLI::Range(1, 256));
    cmd->add_flag("--cont-batching,!--no-cont-batching", c.cont_batching,
                  "Continuous batching (default on, as llama-server's -cb): the generating slots' forward passes run as one "
                  "pass, each weight read once per step for all of them (CPU backend; same tokens either way)");
    cmd->add_option("-b,--batch-size", c.n_batch, "Logical batch: the /infill prompt budgets are cut from it, as in llama-server")
        ->capture_default_str()->check(CLI::Range(16, 1 << 20));
    cmd->add_option("-n,--n-predict", c.n_predict, "Most tokens one request may generate (-1 = no limit)")
        ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
    cmd->add_option("--max-queue", c.max_queue, "Requests that may wait for a slot; more get 503")
        ->capture_default_str()->check(CLI::Range(0, 1 << 16));
    cmd->add_option("--max-body", a.max_body_mib, "Largest request body in MiB (larger: 413)")
        ->capture_default_str()->check(CLI::Range(1, 1024));
    cmd->add_option("--timeout", c.timeout_s, "Socket read/write timeout in seconds (llama-server's -to)")
        ->capture_default_str()->check(CLI::Range(1, 86400));
    cmd->add_option("--threads-http", c.http_threads, "Accepted for llama-server's command lines and unused: every connection has "
                                                      "its own thread (--max-connections bounds them)")
        ->capture_default_str()->check(CLI::Range(-1, 4096));
    cmd->add_option("--api-key", c.api_key, "Require this key (Authorization: Bearer KEY) on all but /health and /models; "
                                            "an address that sends 10 wrong keys in a minute is refused (429) for the rest of it");
    cmd->add_option("--request-timeout", c.request_timeout_s, "Seconds a whole request (line, headers, body) may take to arrive; "
                                                              "past it: 408 and the connection closes")
        ->capture_default_str()->check(CLI::Range(1, 3600));
    cmd->add_option("--keep-alive", c.keep_alive_s, "Seconds a connection may stay idle between two requests")
        ->capture_default_str()->check(CLI::Range(0, 3600));
    cmd->add_option("--max-connections", c.max_connections, "Open connections in total; more get 503")
        ->capture_default_str()->check(CLI::Range(1, 65536));
    cmd->add_option("--max-connections-per-client", c.max_connections_per_client, "Open connections from one client address; more get 503")
        ->capture_default_str()->check(CLI::Range(1, 65536));
    cmd->add_option("--cors-origin", c.cors_origins, "Browser origin allowed besides loopback pages (repeatable; '*': every "
                                                     "origin, as llama-server; docs/server.md)");
    cmd->add_option("--allow-host", c.allowed_hosts, "Host name served besides loopback names and the --host address "
                                                     "(repeatable; '*': any Host header; guards against DNS rebinding)");
    cmd->add_option("--slot-save-path", c.slot_save_path, "Folder of the files POST /slots/{id}?action=save|restore writes and reads "
                                                          "(a request names a file in it, never a path)");
    cmd->add_option("--backend", c.backend, specula_apps::backend_help())
        ->capture_default_str()->check(CLI::IsMember(specula_apps::backend_names()));
    cmd->add_option("--kv-type", c.kv_type, "Element type of the KV cache (llama.cpp's --cache-type-k/-v): f16, f32, q8_0")
        ->capture_default_str()->check(CLI::IsMember({"f16", "f32", "q8_0"}));
    cmd->add_option("--chat-template", c.chat_template, "Chat template for /v1/chat/completions: a built-in name or Jinja text "
                                                        "(default: the model's own)");
    cmd->add_flag("--no-webui{false}", c.webui, "Do not serve the chat page at / (answer 404 there, as llama-server --no-webui)");
    cmd->add_flag("--jinja", c.jinja, "Render the chat template's own Jinja, as llama-server --jinja (minja), instead of its built-in "
                                      "family: any template, also one of no known family");
    cmd->add_option("--chat-template-file", a.chat_template_file, "Read the --chat-template (Jinja text or a built-in name) from this file")
        ->excludes("--chat-template");
    cmd->add_flag("--no-mmap", a.no_mmap, "Read the model into memory instead of mapping it");
    // Sampling defaults: what a request that leaves a field out gets (llama-server's flags and defaults).
    specula::SamplerOptions &sd = c.sampling.sampler;
    cmd->add_option("--temp", sd.temperature, "Default temperature of requests (0: greedy)")->capture_default_str()->check(CLI::Range(-1e6, 1e6));
    cmd->add_option("--top-k", sd.top_k, "Default top-k (0: off)")->capture_default_str()->check(CLI::Range(-1, 1 << 24));
    cmd->add_option("--top-p", sd.top_p, "Default top-p (1: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--min-p", sd.min_p, "Default min-p (0: off)")->capture_default_str()->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--repeat-penalty", sd.repeat_penalty, "Default repetition penalty (1: off)")
        ->capture_default_str()->check(CLI::Range(1e-6, 1e6));
    cmd->add_option("--repeat-last-n", sd.penalty_last_n, "Default window of the penalties (-1: the context)")
        ->capture_default_str()->check(CLI::Range(-1, 1 << 24));
    cmd->add_option("--presence-penalty", sd.presence_penalty, "Default presence penalty")->capture_default_str();
    cmd->add_option("--frequency-penalty", sd.frequency_penalty, "Default frequency penalty")->capture_default_str();
    cmd->add_option("--draw", a.draw, "How sampled tokens are drawn for a seed: llama.cpp (its generator and distribution: a seeded request "
                                      "gets llama-server's text) or race (Specula's coupled race: more sampled drafts accepted)")
        ->capture_default_str()->check(CLI::IsMember({"llama.cpp", "race"}));
    cmd->add_option("-s,--seed", c.sampling.seed, "Default sampling seed of requests (-1: a random one per request)")
        ->capture_default_str()->check(CLI::Range(int64_t(-1), INT64_MAX));
    cmd->add_flag("--slots,!--no-slots", c.endpoint_slots, "Serve GET /slots (off by default, as in llama-server)");
    cmd->add_flag("-v,--verbose", c.verbose, "OpenAI responses also carry llama-server's \"__verbose\" object (the prompt as "
                                             "the model saw it, the generation settings)");
    cmd->add_flag("--metrics", c.endpoint_metrics, "Serve GET /metrics, Prometheus' text format (off by default, as in llama-server)");
    cmd->add_flag("--context-shift,!--no-context-shift", c.context_shift,
                  "When generation fills a slot's context, drop the older half after the BOS and go on (default), and cut "
                  "prompts that do not fit as llama-server does; --no-context-shift stops there and refuses such prompts")
        ->capture_default_str();
    // Speculative decoding: lossless, so on by default where it needs no file (n-grams of the prompt and output).
    auto *draft = cmd->add_option("--draft", c.draft, "Speculative decoding with a LongSpec draft file made for this model");
    auto *draft_model = cmd->add_option("--draft-model", c.draft_model, "Speculative decoding with a small draft model of the same vocabulary");
    draft->excludes(draft_model);
    draft_model->excludes(draft);
    cmd->add_option("--spec", a.spec, "Model-free drafting: ngram (default; merges with --draft / --draft-model) or none")
        ->capture_default_str()->check(CLI::IsMember({"none", "ngram"}));
    cmd->add_option("--ngram-nodes", a.ngram_nodes, "Tree nodes for n-gram candidates: auto (measured at start: what pays on "
                                                     "this model and machine) or a number")->capture_default_str();
    cmd->add_option("--tree", a.tree, "Draft tree: auto (each round the tree expected to be fastest, plain decoding included), fixed "
                                      "(always the default tree and the n-gram nodes), or nodes per level for --draft / --draft-model, "
                                      "always drafted")
        ->capture_default_str();
    return Command{cmd, [args] { return run_serve(*args); }};
}

}  // namespace specula_cli
