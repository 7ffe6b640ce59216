// bench_cpu_speed: how close the CPU backend runs to the memory-bandwidth limit, and what verifying n tokens at
// once costs. Links the engine's internals (specula_core) to time the forward pass itself.
//
//   bench_cpu_speed --model FILE [--model FILE]... [--threads 1,2] [--reps 3] [--curve 1,2,4,...|all] [--no-isa]
//
// Models: GGUFs of real shapes written by `specula synth` (e.g. llama-3.2-1b in q8_0, q4_0, q4_k_m).
// Printed, all measured in this one run:
//   1. A STREAM-like read bandwidth: AVX-512 (or AVX2) loads over a 1 GiB buffer, 1 and 2 threads, best of 5.
//   2. Per model and thread count: prefill tokens/s (one 128-token batch), decode tokens/s (32 single-token steps
//      after a 64-token prompt), the weight bytes one decode step must read (every matrix of every layer and the
//      output head, as stored in the GGUF), and the achieved weight bandwidth = bytes x tokens/s, compared with
//      the read bandwidth measured by one pass right before each decode run (median): this VM shares its memory
//      bus, and the figures swing by 30% from minute to minute, so only side-by-side figures compare.
//   3. Decode tokens/s at each SIMD level (scalar reference, AVX2, AVX-512 VNNI) - the kernels' speedup.
//   4. The verification cost curve t(n)/t(1): the time to evaluate n tokens in one forward pass (at context 64,
//      logits of the last row) over the time for one. It says how big a speculation tree this backend can
//      verify for little more than the price of one token.
// Figures are medians over --reps runs after a warm-up. Nothing here asserts a timing.
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_runner.h"
#include "model/model.h"

#include "bench_common.h"
#include "machine_limits.h"

#include <CLI/CLI.hpp>

#include <immintrin.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace specula::internal;
using bench::fmt;
using bench::median;
using bench::now_s;

namespace {

struct Args {
    std::vector<std::string> models;
    std::vector<int> threads = {1, 2};
    int reps = 3;
    std::string curve = "1,2,3,4,6,8,12,16,24,32,48,64,96,128";
    bool isa_table = true;
};

std::vector<int32_t> random_tokens(const Model &model, int n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> id(0, model.hparams().n_vocab - 1);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t &v : t) v = id(rng);
    return t;
}

struct Speed {
    double prefill_tps = 0, decode_tps = 0;
    double read_gbs = 0;  // read bandwidth measured beside the decode runs (median of one pass before each)
};

// with_prefill = false skips the 128-token batch (the scalar level would spend minutes on it).
Speed measure(const std::shared_ptr<const Model> &model, int threads, int reps, int decode_tokens, bool with_prefill = true) {
    CpuRunner runner(model, 512, threads);
    std::vector<float> logits(size_t(model->hparams().n_vocab));
    const std::vector<int32_t> prompt = random_tokens(*model, 128, 1);
    std::vector<double> prefill, decode, read;
    for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
        // This machine shares its memory bus: the read bandwidth is measured right beside each decode run, so
        // that the ratio compares the two under the same neighbours.
        const double bw = bench_limits::read_bandwidth_once(threads);
        double t0 = now_s();
        if (with_prefill) runner.eval(prompt.data(), 128, 0, logits.data(), false);
        const double tp = now_s() - t0;
        runner.eval(prompt.data(), 64, 0, logits.data(), false);
        t0 = now_s();
        for (int i = 0; i < decode_tokens; ++i) runner.eval(&prompt[size_t(64 + i % 64)], 1, 64 + i, logits.data(), false);
        const double td = now_s() - t0;
        if (rep == 0) continue;
        prefill.push_back(128.0 / tp);
        decode.push_back(decode_tokens / td);
        read.push_back(bw);
    }
    return {median(prefill), median(decode), median(read)};
}

// Seconds to evaluate n tokens in one forward pass at context 64.
double eval_time(CpuRunner &runner, const std::vector<int32_t> &tokens, int n, int reps, std::vector<float> &logits) {
    std::vector<double> t;
    for (int rep = 0; rep <= reps; ++rep) {
        const double t0 = now_s();
        runner.eval(tokens.data(), n, 64, logits.data(), false);
        if (rep > 0) t.push_back(now_s() - t0);
    }
    return median(t);
}

}  // namespace

int main(int argc, char **argv) {
    Args a;
    CLI::App app{"bench_cpu_speed: CPU decode against the memory-bandwidth limit, and the verification cost curve"};
    app.add_option("--model", a.models, "GGUF to measure (repeatable), e.g. one written by `specula synth`")->required();
    app.add_option("--threads", a.threads, "thread counts (default 1,2)")->delimiter(',');
    app.add_option("--reps", a.reps, "measured runs per figure (median reported)")->check(CLI::Range(1, 100));
    app.add_option("--curve", a.curve, "token counts n for t(n)/t(1), comma-separated, or 'all' for 1..128");
    app.add_flag("!--no-isa", a.isa_table, "skip the per-SIMD-level decode table");
    CLI11_PARSE(app, argc, argv);

    std::vector<int> curve;
    if (a.curve == "all")
        for (int n = 1; n <= 128; ++n) curve.push_back(n);
    else
        for (size_t pos = 0; pos < a.curve.size();) {
            const size_t comma = a.curve.find(',', pos);
            curve.push_back(std::stoi(a.curve.substr(pos, comma - pos)));
            pos = comma == std::string::npos ? a.curve.size() : comma + 1;
        }

    std::printf("CPU: %s, %u hardware threads, kernels: %s\n\n", bench::cpu_name().c_str(), std::thread::hardware_concurrency(),
                cpu_isa_name(active_cpu_isa()));
    std::printf("| threads | read bandwidth (GB/s) |\n|---|---|\n");
    std::vector<double> stream;
    for (int t : a.threads) {
        stream.push_back(bench_limits::read_bandwidth(t));
        std::printf("| %d | %s |\n", t, fmt(stream.back(), "%.1f").c_str());
    }

    LoadOptions opts;
    std::vector<std::shared_ptr<const Model>> models;
    for (const std::string &path : a.models) models.push_back(Model::load(path, opts));

    std::printf("\n| model | type | weights/token (MB) | threads | prefill tok/s | decode tok/s | achieved GB/s | read GB/s beside it | of read bandwidth |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < models.size(); ++i) {
        const double bytes = bench_limits::weight_bytes_per_token(*models[i]);
        for (size_t ti = 0; ti < a.threads.size(); ++ti) {
            const Speed s = measure(models[i], a.threads[ti], a.reps, 32);
            const double gbs = bytes * s.decode_tps / 1e9;
            std::printf("| %s | %s | %s | %d | %s | %s | %s | %s | %s%% |\n", models[i]->name().c_str(), models[i]->weight_type(),
                        fmt(bytes / 1e6, "%.0f").c_str(), a.threads[ti], fmt(s.prefill_tps, "%.1f").c_str(), fmt(s.decode_tps, "%.2f").c_str(),
                        fmt(gbs, "%.1f").c_str(), fmt(s.read_gbs, "%.1f").c_str(), fmt(100.0 * gbs / s.read_gbs, "%.0f").c_str());
            std::fflush(stdout);
        }
    }

    const int max_threads = a.threads.back();
    if (a.isa_table) {
        std::printf("\n| model | type | threads | scalar tok/s | avx2 tok/s | avx512-vnni tok/s | best / scalar |\n|---|---|---|---|---|---|---|\n");
        for (const auto &m : models) {
            double tps[3] = {0, 0, 0};
            for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512Vnni}) {
                if (int(isa) > int(detected_cpu_isa())) continue;
                set_cpu_isa_cap(isa);
                tps[int(isa)] = measure(m, max_threads, 1, isa == CpuIsa::Scalar ? 4 : 16, false).decode_tps;
            }
            set_cpu_isa_cap(CpuIsa::Amx);
            const double best = std::max(tps[1], tps[2]);
            std::printf("| %s | %s | %d | %s | %s | %s | %sx |\n", m->name().c_str(), m->weight_type(), max_threads, fmt(tps[0]).c_str(),
                        fmt(tps[1]).c_str(), fmt(tps[2]).c_str(), fmt(tps[0] > 0 ? best / tps[0] : 0.0, "%.1f").c_str());
            std::fflush(stdout);
        }
    }

    // Columns: each model at the best level, and, where AMX is in use, also with AVX-512 only (AMX serves the Q8_0
    // batches of 16 tokens; everything else is the same kernels).
    std::vector<CpuIsa> levels = {active_cpu_isa()};
    if (active_cpu_isa() == CpuIsa::Amx) levels.push_back(CpuIsa::Avx512Vnni);
    std::printf("\nVerification cost t(n)/t(1), %d threads, context 64 (n tokens in one forward pass):\n\n", max_threads);
    std::printf("| n |");
    for (const auto &m : models)
        for (CpuIsa isa : levels) std::printf(" %s %s (%s) |", m->name().c_str(), m->weight_type(), cpu_isa_name(isa));
    std::printf("\n|---|");
    for (size_t i = 0; i < models.size() * levels.size(); ++i) std::printf("---|");
    std::printf("\n");
    std::vector<std::unique_ptr<CpuRunner>> runners;
    std::vector<double> t1;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<float> logits;
    for (const auto &m : models) {
        runners.push_back(std::make_unique<CpuRunner>(m, 512, max_threads));
        tokens.push_back(random_tokens(*m, 256, 2));
        logits.resize(size_t(m->hparams().n_vocab));
        runners.back()->eval(tokens.back().data(), 64, 0, logits.data(), false);
        t1.push_back(eval_time(*runners.back(), tokens.back(), 1, std::max(a.reps, 5), logits));
    }
    for (int n : curve) {
        std::printf("| %d |", n);
        for (size_t i = 0; i < models.size(); ++i)
            for (CpuIsa isa : levels) {
                set_cpu_isa_cap(isa);
                const double t = n == 1 ? t1[i] : eval_time(*runners[i], tokens[i], n, a.reps, logits);
                std::printf(" %s |", fmt(t / t1[i]).c_str());
            }
        set_cpu_isa_cap(CpuIsa::Amx);
        std::printf("\n");
        std::fflush(stdout);
    }
    return 0;
}
