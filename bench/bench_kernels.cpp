// The CPU backend's matrix products alone, per weight type: how close one decode step's product (1 activation) comes
// to the machine's read bandwidth, and what a batch of n activations (a tree of n - 1 drafted nodes verified, a
// prompt slice) costs against it, at each SIMD level this CPU has:
//
//   bench_kernels [--types Q8_0,Q4_K,Q5_K,Q6_K] [--n 1,2,4,5,8,16,17,32] [--threads 1,2] [--levels avx2,avx512,amx]
//                 [--mb 512] [--reps 5]
//
// Each figure multiplies random matrices of the type (2048 columns; --mb of weights in all, far more than the caches
// hold, cycled so every pass reads its weights from memory) through the backend's own matmul (activation conversion,
// task split and thread pool included), and prints the median over --reps passes: ms per pass, GB/s of weights
// streamed (and the best pass, steadier where neighbours share the machine), that as a share of the read bandwidth measured
// before each level's rows, and t(n) / t(1), the cost of verifying n rows
// against one decode step.
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/packed/packed_matrix.h"
#include "bench_common.h"
#include "common/random_blocks.h"
#include "core/thread_pool.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"
#include "machine_limits.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

using namespace specula::internal;

namespace {

struct Matrices {
    std::vector<std::vector<uint8_t>> data;
    std::vector<WeightView> views;
    std::vector<std::unique_ptr<PackedMatrix>> packed;
    size_t bytes = 0;
};

Matrices make_matrices(const test_blocks::TypeCase &c, int64_t rows, int64_t cols, size_t total_bytes) {
    Matrices m;
    std::mt19937 rng(7);
    const size_t one = size_t(rows) * size_t(cols / c.block) * size_t(c.type_size);
    const size_t count = std::max<size_t>(1, total_bytes / one);
    m.data.reserve(count);
    m.views.reserve(count);
    for (size_t i = 0; i < count; ++i) {
        m.data.push_back(test_blocks::random_matrix(c, rows, cols, rng, false));
        WeightView w;
        w.data = m.data.back().data();
        w.type = c.type;
        w.rows = rows;
        w.cols = cols;
        w.row_bytes = size_t(cols / c.block) * size_t(c.type_size);
        m.views.push_back(w);
        m.packed.push_back(PackedMatrix::pack(m.views.back()));
        m.bytes += one;
    }
    m.data.clear();  // the packed copies are what the kernels read
    m.data.shrink_to_fit();
    return m;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Packed matrix products per weight type against the read bandwidth, and batch costs t(n)/t(1)"};
    std::string types_s = "Q8_0,Q4_K,Q5_K,Q6_K", n_s = "1,2,4,5,8,16,17,32", threads_s = "1,2", levels_s = "avx2,avx512,amx";
    int mb = 512, reps = 5;
    int64_t rows = 2048, cols = 2048;
    bool kernel_only = false;
    app.add_option("--types", types_s, "Weight types (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, F16, BF16, F32)")->capture_default_str();
    app.add_option("--n", n_s, "Activations per product (1: a decode step)")->capture_default_str();
    app.add_option("--threads", threads_s, "Thread counts")->capture_default_str();
    app.add_option("--levels", levels_s, "SIMD levels (those this CPU has)")->capture_default_str();
    app.add_option("--mb", mb, "Megabytes of weights per type, cycled through")->capture_default_str();
    app.add_option("--reps", reps, "Passes per figure (median)")->capture_default_str();
    app.add_option("--rows", rows, "Rows of each matrix")->capture_default_str();
    app.add_option("--cols", cols, "Columns of each matrix (a multiple of 256)")->capture_default_str();
    app.add_flag("--kernel-only", kernel_only,
                 "Time the packed kernel alone, on the calling thread (activations converted once, no thread pool): with --mb below "
                 "the L2 cache, the kernel's compute throughput");
    CLI11_PARSE(app, argc, argv);

    const std::vector<int32_t> ns = bench::parse_int_list(n_s), thread_counts = bench::parse_int_list(threads_s);
    std::vector<CpuIsa> levels;
    const std::string wanted_levels = "," + levels_s + ",";
    for (auto [isa, name] : {std::pair{CpuIsa::Avx2, "avx2"}, std::pair{CpuIsa::Avx512Vnni, "avx512"}, std::pair{CpuIsa::Amx, "amx"}})
        if (int(isa) <= int(detected_cpu_isa()) && wanted_levels.find("," + std::string(name) + ",") != std::string::npos) levels.push_back(isa);
    std::printf("CPU: %s; levels: ", bench::cpu_name().c_str());
    for (CpuIsa isa : levels) std::printf("%s ", cpu_isa_name(isa));
    std::printf("\n\n");

    std::string wanted = "," + types_s + ",";
    for (const test_blocks::TypeCase &c : test_blocks::kPackedTypes) {
        if (wanted.find("," + std::string(c.name) + ",") == std::string::npos) continue;
        const Matrices mats = make_matrices(c, rows, cols, size_t(mb) << 20);
        std::printf("%s: %zu matrices of %lld x %lld, %.1f MB\n\n", c.name, mats.views.size(), (long long)rows, (long long)cols, double(mats.bytes) / 1e6);
        std::printf("| level | threads | n | ms / pass | best | GB/s | read GB/s before | of read bandwidth | t(n)/t(1) |\n|---|---|---|---|---|---|---|---|---|\n");
        for (CpuIsa isa : levels) {
            set_cpu_isa_cap(isa);
            for (int t : thread_counts) {
                ThreadPool pool(t);
                const double bw = bench_limits::read_bandwidth(t);  // once per row set: it reads 5 GiB
                double t1 = 0.0;
                for (int32_t n : ns) {
                    std::vector<float> x(size_t(n) * size_t(cols)), y(size_t(n) * size_t(rows));
                    std::mt19937 rng(3);
                    std::normal_distribution<float> value(0.0f, 1.0f);
                    for (float &v : x) v = value(rng);
                    std::vector<uint8_t> scratch;
                    // --kernel-only: the activations as matmul converts them, once.
                    const test_blocks::ConvertedActs xc = test_blocks::convert_acts(c.type, x.data(), n, cols);
                    const PackedActs acts = xc.acts();
                    const PackedGemmFn gemm = packed_gemm(c.type, isa);
                    auto pass = [&] {
                        for (size_t i = 0; i < mats.views.size(); ++i) {
                            if (kernel_only) gemm(mats.packed[i]->view(), 0, mats.packed[i]->view().n_groups, acts, y.data(), rows);
                            else matmul(pool, CpuMatrix{&mats.views[i], mats.packed[i].get()}, x.data(), n, y.data(), scratch);
                        }
                    };
                    pass();  // warm: scratch, thread pool, page faults of y
                    std::vector<double> times;
                    for (int r = 0; r < reps; ++r) {
                        const double s = bench::now_s();
                        pass();
                        times.push_back(bench::now_s() - s);
                    }
                    const double ms = 1e3 * bench::median(times);
                    if (n == 1) t1 = ms;
                    const double gbs = double(mats.bytes) / (ms * 1e6);
                    const double best = 1e3 * *std::min_element(times.begin(), times.end());
                    std::printf("| %s | %d | %d | %.3f | %.3f | %.1f | %.1f | %.0f%% | %s |\n", cpu_isa_name(isa), t, n, ms, best, gbs, bw, 100.0 * gbs / bw,
                                t1 > 0 ? bench::fmt(ms / t1).c_str() : "-");
                }
            }
        }
        std::printf("\n");
    }
    return 0;
}
