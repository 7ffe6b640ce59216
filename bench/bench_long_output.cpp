// bench_long_output: one session generates a very long output (100K tokens by default) in a bounded context, with
// the context shift on (sinks + recent window, docs/long-outputs.md), plain and speculative in one run, through the
// public API. TokenSwift's setting by default: sampling at T = 1 with top-p 0.9 and its contextual penalty
// (theta 1.15, window 1024), which keeps a long generation from looping.
//
//   bench_long_output --model M [--draft D] [--spec ngram] [--tokens 100000] [--plain-tokens N] [-c 8192]
//                     [--keep 4] [--kv-type f16] [-t 2] [--at 1000,32000,100000] [--window 1000]
//                     [-p TEXT | --prompt-file F] [--temp 1 --top-p 0.9 --context-penalty 1.15 --penalty-window 1024]
//                     [--interleave]
//
// For each run (plain, then speculative with the drafters given) and each position of --at: tokens/s over the
// --window tokens that end there, tokens/s since the start, the process's resident memory, the context in use, the
// shifts so far and tau. Then the speculative tokens/s over the plain tokens/s at each position both reached
// (--plain-tokens shortens the plain run: after the first shift the context only cycles between its two sizes, so
// a plain run of a few windows gives its steady speed). --interleave runs both sessions together, alternating
// chunks of --window tokens, so that a machine whose speed drifts over minutes slows both alike; each run's
// tokens/s are measured on its own generation time. The draft and verify columns are the session's totals.
#include <specula/specula.hpp>

#include "bench_common.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using bench::fmt;
using bench::now_s;

// Resident memory of this process in MiB (/proc/self/statm: pages).
double rss_mib() {
    std::ifstream in("/proc/self/statm");
    long size = 0, resident = 0;
    in >> size >> resident;
    return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

std::vector<int64_t> parse_positions(const std::string &s) {
    std::vector<int64_t> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(std::stoll(item));
    return out;
}

struct Point {
    int64_t position = 0;
    double window_tps = 0, total_tps = 0, rss = 0, tau = 0;
    double draft_ms = 0, verify_ms = 0;  // the session's totals so far (speculative runs)
    int32_t ctx_used = 0, shifts = 0;
};

struct Run {
    std::string label;
    std::vector<Point> points;
    int64_t generated = 0;
    double seconds = 0;
};

// One session generating a long output, in steps: advance() can be called repeatedly (interleaved runs alternate
// two of them), and the session's own generation time is what its tokens/s are measured on.
class LongRun {
public:
    LongRun(const std::string &label, const specula::Model &model, const specula::SessionOptions &so, const specula::SamplerOptions &sampler,
            const specula::SpeculativeOptions *spec, const std::string &prompt, std::vector<int64_t> at, int64_t window)
        : session_(model, so, sampler), at_(std::move(at)), window_(window) {
        run_.label = label;
        if (spec) session_.set_speculative(*spec);
        session_.append_text(prompt, SPECULA_TOKENIZE_ADD_SPECIAL);
        // The prompt is evaluated (and one token generated) outside the timed part.
        specula::GenerateOptions first;
        first.max_tokens = 1;
        first.stop_at_eog = false;
        session_.generate(first);
    }

    // Generates until `upto` tokens were produced (or the session stops early).
    void advance(int64_t upto) {
        specula::GenerateOptions go;
        go.stop_at_eog = false;
        // One generate call per chunk, so that a checkpoint reads the session's stats between calls.
        while (!stopped_ && done() < upto) {
            int64_t chunk = upto - done();
            if (next_point_ < at_.size() && at_[next_point_] > done()) chunk = std::min(chunk, at_[next_point_] - done());
            go.max_tokens = int32_t(chunk);
            const double t0 = now_s();
            const specula_stop_reason stop = session_.generate(go, [&](const specula_token_event &ev) {
                if (ev.token >= 0) stamp_.push_back(own_s_ + (now_s() - t0));
                return true;
            });
            own_s_ += now_s() - t0;
            if (stop != SPECULA_STOP_MAX_TOKENS) {
                std::fprintf(stderr, "%s: generation stopped early (%s) after %lld tokens\n", run_.label.c_str(), specula_stop_reason_string(stop),
                             (long long)done());
                stopped_ = true;
            }
            while (next_point_ < at_.size() && at_[next_point_] <= done()) checkpoint(at_[next_point_++]);
        }
        run_.generated = done();
        run_.seconds = stamp_.empty() ? 0 : stamp_.back();
    }

    int64_t done() const { return int64_t(stamp_.size()); }
    const Run &run() const { return run_; }

private:
    void checkpoint(int64_t pos) {
        const specula_stats st = session_.stats();
        Point p;
        p.position = pos;
        const int64_t from = std::max<int64_t>(1, pos - window_);
        const double span = stamp_[size_t(pos - 1)] - stamp_[size_t(from - 1)];
        p.window_tps = span > 0 ? double(pos - from) / span : 0;
        p.total_tps = double(pos) / stamp_[size_t(pos - 1)];
        p.rss = rss_mib();
        p.ctx_used = st.n_ctx_used;
        p.shifts = st.n_context_shifts;
        p.tau = st.tau;
        p.draft_ms = st.draft_ms;
        p.verify_ms = st.verify_ms;
        run_.points.push_back(p);
    }

    specula::Session session_;
    std::vector<int64_t> at_;
    int64_t window_;
    Run run_;
    std::vector<double> stamp_;  // stamp_[i]: the session's own generation time when token i + 1 was produced
    double own_s_ = 0;
    size_t next_point_ = 0;
    bool stopped_ = false;
};

void print_run(const Run &r) {
    std::printf("\n%s: %lld tokens in %.1f s (%.2f tok/s)\n", r.label.c_str(), (long long)r.generated, r.seconds,
                r.seconds > 0 ? double(r.generated) / r.seconds : 0.0);
    std::printf("  %9s  %12s  %12s  %9s  %8s  %7s  %6s  %9s  %10s\n", "position", "tok/s(window)", "tok/s(total)", "RSS MiB", "context", "shifts",
                "tau", "draft s", "verify s");
    for (const Point &p : r.points)
        std::printf("  %9lld  %12s  %12s  %9s  %8d  %7d  %6s  %9s  %10s\n", (long long)p.position, fmt(p.window_tps).c_str(), fmt(p.total_tps).c_str(),
                    fmt(p.rss, "%.1f").c_str(), p.ctx_used, p.shifts, fmt(p.tau).c_str(), fmt(p.draft_ms / 1000.0).c_str(),
                    fmt(p.verify_ms / 1000.0).c_str());
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"A 100K-token output in a bounded context with the context shift: plain vs speculative, tokens/s and memory by position"};
    std::string model_path = SPECULA_DEFAULT_MODEL, draft_path, spec = "none", kv = "f16", prompt, prompt_file, at_list = "1000,32000,100000";
    int64_t n_tokens = 100000, plain_tokens = -1, window = 1000;
    specula::SessionOptions so;
    so.n_ctx = 8192;
    so.n_threads = 2;
    so.context_policy = SPECULA_CONTEXT_SHIFT;
    specula::SamplerOptions sampler;
    sampler.temperature = 1.0f;
    sampler.top_k = 0;
    sampler.top_p = 0.9f;
    sampler.min_p = 0.0f;
    sampler.context_penalty = 1.15f;
    sampler.context_penalty_window = 1024;
    sampler.seed = 42;
    app.add_option("-m,--model", model_path, "Target model (GGUF)")->capture_default_str();
    app.add_option("--draft", draft_path, "LongSpec draft for the model");
    app.add_option("--spec", spec, "Model-free drafting: ngram (merged with --draft when both)")->check(CLI::IsMember({"none", "ngram"}));
    app.add_option("--tokens", n_tokens, "Tokens each run generates")->capture_default_str();
    app.add_option("--plain-tokens", plain_tokens, "Tokens of the plain run (default --tokens; 0: no plain run)");
    app.add_option("-c,--ctx-size", so.n_ctx, "Context length")->capture_default_str();
    app.add_option("--keep", so.n_keep, "Tokens the shift keeps at the start")->capture_default_str();
    app.add_option("--discard", so.n_discard, "Tokens dropped per shift (0 = half of those after --keep)")->capture_default_str();
    app.add_option("--kv-type", kv, "KV cache type: f16, f32, q8_0")->capture_default_str()->check(CLI::IsMember({"f16", "f32", "q8_0"}));
    app.add_option("-t,--threads", so.n_threads, "Threads")->capture_default_str();
    app.add_option("--at", at_list, "Positions to report")->capture_default_str();
    app.add_option("--window", window, "Tokens the windowed tokens/s covers")->capture_default_str();
    app.add_option("-p,--prompt", prompt, "Prompt text");
    app.add_option("--prompt-file", prompt_file, "Prompt from a file");
    app.add_option("--temp", sampler.temperature, "Temperature")->capture_default_str();
    app.add_option("--top-p", sampler.top_p, "Top-p")->capture_default_str();
    app.add_option("--context-penalty", sampler.context_penalty, "TokenSwift's contextual penalty theta (1 = off)")->capture_default_str();
    app.add_option("--penalty-window", sampler.context_penalty_window, "Its window")->capture_default_str();
    app.add_option("--seed", sampler.seed, "Sampling seed")->capture_default_str();
    bool interleave = false;
    app.add_flag("--interleave", interleave, "Run plain and speculative together, alternating chunks of --window tokens (RSS is then both's)");
    CLI11_PARSE(app, argc, argv);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // runs take minutes: show each table as it is done
    if (plain_tokens < 0) plain_tokens = n_tokens;
    so.kv_type = kv == "f32" ? SPECULA_KV_F32 : kv == "q8_0" ? SPECULA_KV_Q8_0 : SPECULA_KV_F16;
    if (!prompt_file.empty()) {
        std::ifstream in(prompt_file, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        prompt = ss.str();
    }
    if (prompt.empty()) prompt = "Once upon a time";
    std::vector<int64_t> at = parse_positions(at_list);

    try {
        specula::Model model = specula::Model::load(model_path);
        std::printf("bench_long_output: %s, %s, %d threads, n_ctx %d, keep %d, KV %s, T %.2f top-p %.2f penalty %.2f/%d, seed %llu\n",
                    model_path.c_str(), bench::cpu_name().c_str(), so.n_threads, so.n_ctx, so.n_keep, kv.c_str(), double(sampler.temperature),
                    double(sampler.top_p), double(sampler.context_penalty), sampler.context_penalty_window, (unsigned long long)sampler.seed);
        std::printf("prompt: %zu bytes; %lld tokens per run (plain: %lld); tok/s(window) over the last %lld tokens\n", prompt.size(),
                    (long long)n_tokens, (long long)plain_tokens, (long long)window);
        std::printf("RSS after loading the model: %.1f MiB\n", rss_mib());

        std::vector<int64_t> plain_at;
        for (int64_t p : at)
            if (p <= plain_tokens) plain_at.push_back(p);
        if (plain_at.empty() || plain_at.back() != plain_tokens) plain_at.push_back(plain_tokens);
        specula::Draft draft;
        if (!draft_path.empty()) draft = specula::Draft::load(draft_path, model);
        specula::SpeculativeOptions o;
        o.draft = draft ? &draft : nullptr;
        o.ngram = spec == "ngram";
        const bool speculative = draft || o.ngram;
        const std::string label = std::string(draft ? "longspec" : "") + (draft && o.ngram ? "+" : "") + (o.ngram ? "ngram" : "") + " (tree auto)";

        std::vector<Run> runs;
        if (interleave && plain_tokens > 0 && speculative) {
            // Both sessions alive, alternating chunks of --window tokens: a machine whose speed drifts over minutes
            // (shared VMs) slows both alike, so the ratios compare like with like. RSS is then both sessions'.
            LongRun plain("plain", model, so, sampler, nullptr, prompt, plain_at, window);
            LongRun fast(label, model, so, sampler, &o, prompt, at, window);
            // Bounded by the token counts, not by what was produced: a run that stops early must not hold the loop.
            for (int64_t upto = window; upto - window < std::max(plain_tokens, n_tokens); upto += window) {
                plain.advance(std::min(upto, plain_tokens));
                fast.advance(std::min(upto, n_tokens));
            }
            runs = {plain.run(), fast.run()};
            print_run(runs[0]);
            print_run(runs[1]);
        } else {
            if (plain_tokens > 0) {
                LongRun plain("plain", model, so, sampler, nullptr, prompt, plain_at, window);
                plain.advance(plain_tokens);
                runs.push_back(plain.run());
                print_run(runs.back());
            }
            if (speculative) {
                LongRun fast(label, model, so, sampler, &o, prompt, at, window);
                fast.advance(n_tokens);
                runs.push_back(fast.run());
                print_run(runs.back());
            }
        }
        if (runs.size() == 2 && !runs[0].points.empty()) {
            std::printf("\nspeculative / plain tok/s (window) at each position both runs reached:\n");
            const Run &plain = runs[0], &sp = runs[1];
            const Point &steady = plain.points.back();  // past the first shift, plain speed is steady
            for (const Point &p : sp.points) {
                const Point *ref = nullptr;
                for (const Point &q : plain.points)
                    if (q.position == p.position) ref = &q;
                if (ref)
                    std::printf("  %9lld  %.2fx\n", (long long)p.position, p.window_tps / ref->window_tps);
                else if (steady.shifts > 0 && p.shifts > 0)
                    std::printf("  %9lld  %.2fx  (plain at %lld, past its first shift)\n", (long long)p.position, p.window_tps / steady.window_tps,
                                (long long)steady.position);
            }
        }
    } catch (const specula::Error &e) {
        std::fprintf(stderr, "bench_long_output: %s\n", e.what());
        return 1;
    }
    return 0;
}
