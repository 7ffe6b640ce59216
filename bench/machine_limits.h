// What a machine allows, measured in the run that reports against it (the benchmarks below the public API):
// its read bandwidth, its F32 multiply-add peak, and the weight bytes one decode step of a model must read.
// This VM shares its memory bus, so figures are only compared with limits measured beside them.
#pragma once

#include "backends/cpu/cpu_isa.h"
#include "model/model.h"

#include <immintrin.h>
// GCC 12's avx512fintrin.h warns that its own placeholder "__Y" (from _mm512_undefined_ps) is used uninitialized
// wherever its reductions inline (GCC bug 105593, fixed in 13): not our variables.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace bench_limits {

using namespace specula::internal;

inline double seconds_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// ---- read bandwidth --------------------------------------------------------------------------------------

__attribute__((target("avx512f"))) inline uint64_t read_avx512(const uint8_t *p, size_t n) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
        a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + i + 64));
        a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + i + 128));
        a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + i + 192));
    }
    return uint64_t(_mm512_reduce_add_epi64(_mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3))));
}

__attribute__((target("avx2"))) inline uint64_t read_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i *>(p + i + 96)));
    }
    const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return uint64_t(_mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 1) ^ _mm256_extract_epi64(a, 2) ^ _mm256_extract_epi64(a, 3));
}

// GB/s reading a 1 GiB buffer once with n_threads threads, each its own contiguous slice.
inline double read_bandwidth_once(int n_threads) {
    const size_t bytes = size_t(1) << 30;
    static uint8_t *buf = [&] {
        uint8_t *p = static_cast<uint8_t *>(std::aligned_alloc(64, bytes));
        std::memset(p, 1, bytes);
        return p;
    }();
    static volatile uint64_t sink = 0;
    const bool avx512 = int(detected_cpu_isa()) >= int(CpuIsa::Avx512Vnni);
    std::vector<std::thread> threads;
    std::vector<uint64_t> out(static_cast<size_t>(n_threads));
    const size_t slice = bytes / size_t(n_threads);
    const double t0 = seconds_now();
    for (int t = 0; t < n_threads; ++t)
        threads.emplace_back([&, t] { out[size_t(t)] = avx512 ? read_avx512(buf + size_t(t) * slice, slice) : read_avx2(buf + size_t(t) * slice, slice); });
    for (auto &th : threads) th.join();
    const double dt = seconds_now() - t0;
    for (uint64_t v : out) sink = sink ^ v;
    return double(bytes) / dt / 1e9;
}

// Best of 5 passes.
inline double read_bandwidth(int n_threads) {
    double best = 0;
    for (int pass = 0; pass < 5; ++pass) best = std::max(best, read_bandwidth_once(n_threads));
    return best;
}

// ---- the model -------------------------------------------------------------------------------------------

// Bytes of weights one decode step reads: every matrix of every layer plus the output head (the embedding
// contributes one row, which is negligible); with experts, the router, n_expert_used experts' three matrices (all
// experts are the same size) and the shared expert.
inline double weight_bytes_per_token(const Model &model) {
    const ModelWeights &w = model.weights();
    const HParams &hp = model.hparams();
    auto bytes = [](const WeightView &v) { return v ? double(v.row_bytes) * double(v.rows) : 0.0; };
    double total = bytes(w.output);
    for (const LayerWeights &l : w.layers) {
        for (const WeightView *v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.ffn_gate_inp, &l.ffn_gate_inp_shexp,
                                    &l.ffn_gate_shexp, &l.ffn_up_shexp, &l.ffn_down_shexp})
            total += bytes(*v);
        if (hp.is_moe())
            total += double(hp.n_expert_used) * (bytes(l.ffn_gate_exps[0]) + bytes(l.ffn_up_exps[0]) + bytes(l.ffn_down_exps[0]));
    }
    return total;
}

// ---- arithmetic ------------------------------------------------------------------------------------------

// F32 multiply-add peak of n_threads threads (GFLOP/s): twelve independent 8-lane FMA chains per thread.
__attribute__((target("avx2,fma"))) inline float fma_chains(long iters) {
    __m256 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(float(i));
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; ++it)
        for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
    __m256 s = a[0];
    for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
    return _mm256_cvtss_f32(s);
}

inline double fma_peak(int n_threads) {
    const long iters = 20000000;
    std::atomic<float> sink{0};
    const double t0 = seconds_now();
    std::vector<std::thread> threads;
    for (int t = 0; t < n_threads; ++t) threads.emplace_back([&] { sink = sink + fma_chains(iters); });
    for (auto &th : threads) th.join();
    return double(n_threads) * double(iters) * 12 * 8 * 2 / (seconds_now() - t0) / 1e9;
}

}  // namespace bench_limits
