// The CPU's attention kernel alone (backends/cpu/block_attention.h) against its bounds: one layer of a model's
// attention (every KV head, its group of query heads, `rows` query rows per head sharing the prefix) over C keys
// of a KV cache, timed on 1 and 2 threads, and printed beside
//   bytes   the K and V slices it must read once (C x hd x 2 x element size per KV head) over the read bandwidth
//           measured in the same run (a pass over a buffer larger than the cache), and
//   flops   2 x 2 x rows x heads x C x hd (scores and weighted values) over the machine's F32 multiply-add peak
//           measured in the same run (independent vector FMA chains on every thread).
//
//   bench_attention [--contexts 512,8192,32768] [--heads 32] [--kv-heads 8] [--hd 64] [--rows 1,4,16]
//                   [--kv-type f16] [--reps 5]
//
// Decoding is rows = 1 (the group's 4 query heads share each K/V block); verifying a tree of n nodes is rows = n.
#include "backends/cpu/block_attention.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kv_cache.h"

#include "bench_common.h"
#include "machine_limits.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

using namespace specula::internal;

int main(int argc, char **argv) {
    CLI::App app{"The CPU attention kernel against its byte and flop bounds"};
    std::string contexts_s = "512,8192,32768", rows_s = "1,4,16", kv_s = "f16";
    int heads = 32, kv_heads = 8, hd = 64, reps = 5;
    app.add_option("--contexts", contexts_s, "Keys in the cache");
    app.add_option("--rows", rows_s, "Query rows per head (1: decoding; n: a tree of n nodes)");
    app.add_option("--heads", heads, "Query heads");
    app.add_option("--kv-heads", kv_heads, "KV heads");
    app.add_option("--hd", hd, "Head dimension");
    app.add_option("--kv-type", kv_s, "KV cache type")->check(CLI::IsMember({"f32", "f16", "q8_0"}));
    app.add_option("--reps", reps, "Repetitions (median)");
    CLI11_PARSE(app, argc, argv);
    const KvType kv_type = kv_s == "f32" ? KvType::F32 : kv_s == "q8_0" ? KvType::Q8_0 : KvType::F16;
    const int group = heads / kv_heads;
    const std::vector<int32_t> contexts = bench::parse_int_list(contexts_s), row_counts = bench::parse_int_list(rows_s);
    const int32_t max_ctx = *std::max_element(contexts.begin(), contexts.end());
    const int32_t max_rows = *std::max_element(row_counts.begin(), row_counts.end());

    const double bw = bench_limits::read_bandwidth(2), peak1 = bench_limits::fma_peak(1), peak2 = bench_limits::fma_peak(2);
    std::printf("attention of one layer: %d heads / %d KV heads x %d, KV %s, SIMD %s\n", heads, kv_heads, hd, kv_type_name(kv_type),
                cpu_isa_name(active_cpu_isa()));
    std::printf("machine: read bandwidth %.1f GB/s (2 threads), F32 FMA peak %.0f GFLOP/s (1 thread), %.0f (2 threads)\n\n", bw, peak1,
                peak2);

    // The cache, stored as the CPU backend stores it (kv_cache.h): random values (what is read costs the same
    // whatever it holds).
    const int64_t width = int64_t(kv_heads) * hd;
    KvCache cache(1, max_ctx + max_rows, int32_t(width), kv_type, hd);
    std::mt19937 rng(1);
    {
        std::normal_distribution<float> g(0.0f, 1.0f);
        std::vector<float> k(static_cast<size_t>(width)), v(k.size());
        for (int32_t s = 0; s < max_ctx + max_rows; ++s) {
            for (float &x : k) x = g(rng);
            for (float &x : v) x = g(rng);
            cache.store(0, s, k.data(), v.data());
        }
    }
    const KvView keys = cache.keys(0), values = cache.values(0);
    std::vector<float> q(size_t(max_rows) * size_t(heads) * size_t(hd)), out(q.size());
    {
        std::normal_distribution<float> g(0.0f, 1.0f);
        for (float &x : q) x = g(rng);
    }
    // Tree rows: row i sees the prefix [0, C) and then slots C .. C + i (a chain: its ancestors and itself).
    std::vector<int32_t> extra(static_cast<size_t>(max_rows));

    std::printf("| context | rows | threads | ms (median) | best | bytes bound ms | flops bound ms | median / max(bounds) |\n|---|---|---|---|---|---|---|---|\n");
    for (int32_t ctx : contexts) {
        for (int32_t i = 0; i < max_rows; ++i) extra[size_t(i)] = ctx + i;
        for (int32_t rows : row_counts) {
            for (int threads : {1, 2}) {
                std::vector<BlockAttention> attention;
                attention.reserve(size_t(threads));
                for (int t = 0; t < threads; ++t) attention.emplace_back(hd);
                auto run_heads = [&](int t) {
                    std::vector<AttentionQuery> queries;
                    for (int kvh = t; kvh < kv_heads; kvh += threads) {
                        queries.clear();
                        for (int32_t r = 0; r < rows; ++r)
                            for (int gi = 0; gi < group; ++gi) {
                                const size_t h = size_t(kvh) * size_t(group) + size_t(gi);
                                float *qp = q.data() + (size_t(r) * size_t(heads) + h) * size_t(hd);
                                float *op = out.data() + (size_t(r) * size_t(heads) + h) * size_t(hd);
                                queries.push_back(AttentionQuery{qp, op, ctx, extra.data(), rows > 1 ? r + 1 : 0, 0});
                            }
                        attention[size_t(t)].run(keys, values, kvh * hd, 1.0f / 8.0f, queries);
                    }
                };
                std::vector<double> times;
                for (int rep = 0; rep <= reps; ++rep) {
                    const double t0 = bench::now_s();
                    std::vector<std::thread> th;
                    for (int t = 1; t < threads; ++t) th.emplace_back(run_heads, t);
                    run_heads(0);
                    for (auto &x : th) x.join();
                    if (rep > 0) times.push_back(bench::now_s() - t0);  // the first is a warm-up
                }
                const double ms = bench::median(times) * 1e3, best = *std::min_element(times.begin(), times.end()) * 1e3;
                const double bytes = double(ctx) * double(kv_row_bytes(kv_type, hd)) * 2 * kv_heads;
                const double flops = 4.0 * rows * heads * double(ctx) * hd;
                const double b_ms = bytes / (bw * 1e9) * 1e3, f_ms = flops / ((threads == 1 ? peak1 : peak2) * 1e9) * 1e3;
                std::printf("| %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.2f |\n", ctx, rows, threads, ms, best, b_ms, f_ms, ms / std::max(b_ms, f_ms));
            }
        }
    }
    return 0;
}
