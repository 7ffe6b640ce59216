// bench_decode: prefill and decode throughput through the public C API, printed as a markdown table.
//
//   bench_decode [--threads 1,2] [--reps 5] [--model NAME_OR_PATH]...
//
// For each model (the bundled stories260K plus the fixture models that exist) and each thread count:
//   prefill - a 128-token prompt of random valid ids is evaluated; tokens / wall time of that evaluation.
//   decode  - 128 greedy tokens after that prompt (end-of-generation ignored); tokens / wall time.
// Each figure is the median over --reps runs, after one warm-up run that is not counted. Every run uses a fresh
// session so no run benefits from the previous one's KV cache. Times are measured here, around the API calls,
// not taken from the library's own stats, so the bench also checks what a caller actually experiences.
#include <specula/specula.h>

#include "bench_common.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using bench::fmt;
using bench::median;
using bench::now_s;

constexpr int kPromptTokens = 128;
constexpr int kDecodeTokens = 128;

struct BenchModel {
    std::string name;
    std::string path;
};

struct Args {
    std::vector<int> threads = {1, 2};
    int reps = 5;
    std::vector<std::string> models;  // names or paths; empty = all
};

// Command line (CLI11, as the specula tool). Exits with CLI11's usage message on bad arguments.
Args parse_args(int argc, char **argv) {
    Args a;
    CLI::App app{"bench_decode: prefill and decode throughput"};
    app.add_option("--threads", a.threads, "thread counts to measure (default 1,2)")->delimiter(',')->check(CLI::Range(1, 1024));
    app.add_option("--reps", a.reps, "measured runs per figure; the median is reported")->check(CLI::Range(1, 1024));
    app.add_option("--model", a.models, "restrict to models whose name contains NAME, or bench a GGUF file (repeatable)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        std::exit(app.exit(e));
    }
    return a;
}

std::vector<BenchModel> select_models(const Args &args) {
    const std::string fx = std::string(SPECULA_FIXTURES_DIR) + "/models/";
    const std::vector<BenchModel> known = {
        {"stories260K", SPECULA_DEFAULT_MODEL},
        {"synth-llama-gqa-f16", fx + "synth-llama-gqa-f16.gguf"},
        {"synth-qwen2-bias-f32", fx + "synth-qwen2-bias-f32.gguf"},
        {"synth-llama-q8_0", fx + "synth-llama-q8_0.gguf"},
        {"synth-llama-q4_0", fx + "synth-llama-q4_0.gguf"},
        {"synth-llama-q4_k_m", fx + "synth-llama-q4_k_m.gguf"},
        {"code-7m", fx + "code-7m/model.gguf"},
    };
    std::vector<BenchModel> out;
    std::error_code ec;
    for (const BenchModel &m : known) {
        bool wanted = args.models.empty();
        for (const std::string &f : args.models) wanted = wanted || m.name.find(f) != std::string::npos;
        if (wanted && std::filesystem::is_regular_file(m.path, ec)) out.push_back(m);
    }
    // --model may also name a file outside the known set.
    for (const std::string &f : args.models) {
        if (std::filesystem::is_regular_file(f, ec)) out.push_back({std::filesystem::path(f).stem().string(), f});
    }
    return out;
}

// Throws with the library's message on failure.
void check(specula_status st, specula_error *err, const char *what) {
    if (st == SPECULA_OK) return;
    std::string msg = std::string(what) + ": " + specula_status_string(st) + ": " + specula_error_message(err);
    specula_error_destroy(err);
    throw std::runtime_error(msg);
}

struct Result {
    double prefill_tps = 0;
    double decode_tps = 0;
};

// One measured run: fresh session, prefill kPromptTokens, then decode kDecodeTokens.
Result run_once(specula_model *model, int threads, const std::vector<int32_t> &prompt) {
    specula_session_options so;
    specula_session_options_init(&so);
    so.n_ctx = kPromptTokens + kDecodeTokens + 8;
    so.n_threads = threads;
    so.n_batch = kPromptTokens;  // the whole prompt in one pass, as a prefill benchmark should
    specula_sampler_options sp;
    specula_sampler_options_init(&sp);
    sp.temperature = 0.0f;
    specula_session *s = nullptr;
    specula_error *err = nullptr;
    check(specula_session_create(model, &so, &sp, &s, &err), err, "session_create");
    struct Guard {
        specula_session *s;
        ~Guard() { specula_session_destroy(s); }
    } guard{s};

    check(specula_session_append_tokens(s, prompt.data(), prompt.size(), &err), err, "append_tokens");

    // Prefill: generate exactly one token. The call evaluates the prompt and samples from its last logits; the
    // sampled token is evaluated only by the next call, so this times the prompt plus one sampling step.
    specula_generate_options go;
    specula_generate_options_init(&go);
    go.max_tokens = 1;
    go.stop_at_eog = 0;
    double t0 = now_s();
    check(specula_session_generate(s, &go, nullptr, nullptr, nullptr, &err), err, "prefill");
    const double prefill_s = now_s() - t0;

    // Decode: each step evaluates the previous token and samples the next one.
    go.max_tokens = kDecodeTokens;
    int32_t produced = 0;
    t0 = now_s();
    check(specula_session_generate(
              s, &go,
              [](const specula_token_event *ev, void *user) -> int32_t {
                  if (ev->token != SPECULA_TOKEN_NULL) ++*static_cast<int32_t *>(user);
                  return 1;
              },
              &produced, nullptr, &err),
          err, "decode");
    const double decode_s = now_s() - t0;
    if (produced != kDecodeTokens)
        throw std::runtime_error("decode produced " + std::to_string(produced) + " tokens, expected " +
                                 std::to_string(kDecodeTokens));
    return Result{kPromptTokens / prefill_s, kDecodeTokens / decode_s};
}

std::string params_text(uint64_t n) {
    char buf[32];
    if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
    else std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
    return buf;
}

}  // namespace

int main(int argc, char **argv) {
    const Args args = parse_args(argc, argv);
    const std::vector<BenchModel> models = select_models(args);
    if (models.empty()) {
        std::fprintf(stderr, "bench_decode: no model found%s\n", args.models.empty() ? "" : " matching --model");
        return 1;
    }

    std::printf("specula %s | prompt %d tokens, decode %d tokens (greedy) | median of %d reps after 1 warm-up\n\n",
                specula_version_string(), kPromptTokens, kDecodeTokens, args.reps);
    std::printf("| model | arch | weights | params | threads | prefill tok/s | decode tok/s |\n");
    std::printf("|---|---|---|---:|---:|---:|---:|\n");
    std::fflush(stdout);

    for (const BenchModel &bm : models) {
        specula_model *model = nullptr;
        specula_error *err = nullptr;
        const specula_status st = specula_model_load(bm.path.c_str(), nullptr, &model, &err);
        if (st != SPECULA_OK) {
            // Unsupported tensor types (or anything else the loader refuses) get a row instead of a figure.
            const char *what = st == SPECULA_ERR_UNSUPPORTED ? "unsupported" : "cannot load";
            std::printf("| %s | | | | | %s: %s | |\n", bm.name.c_str(), what, specula_error_message(err));
            specula_error_destroy(err);
            std::fflush(stdout);
            continue;
        }

        // Random but fixed prompt ids: the same prompt for every thread count and rep.
        std::mt19937 rng(42);
        std::uniform_int_distribution<int32_t> dist(0, specula_model_n_vocab(model) - 1);
        std::vector<int32_t> prompt(kPromptTokens);
        for (int32_t &t : prompt) t = dist(rng);

        for (int threads : args.threads) {
            try {
                run_once(model, threads, prompt);  // warm-up: page in weights, spin up threads
                std::vector<double> prefill, decode;
                for (int r = 0; r < args.reps; ++r) {
                    const Result res = run_once(model, threads, prompt);
                    prefill.push_back(res.prefill_tps);
                    decode.push_back(res.decode_tps);
                }
                std::printf("| %s | %s | %s | %s | %d | %s | %s |\n", bm.name.c_str(), specula_model_arch(model),
                            specula_model_weight_type(model), params_text(specula_model_n_params(model)).c_str(),
                            threads, fmt(median(prefill), "%.1f").c_str(), fmt(median(decode), "%.1f").c_str());
            } catch (const std::exception &e) {
                std::printf("| %s | %s | %s | | %d | failed: %s | |\n", bm.name.c_str(), specula_model_arch(model),
                            specula_model_weight_type(model), threads, e.what());
            }
            std::fflush(stdout);
        }
        specula_model_destroy(model);
    }
    return 0;
}
