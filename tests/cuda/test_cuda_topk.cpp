// The device top-k of a level's draft logits (kernels/topk.cu) against a host reference, and the CUDA LongSpec
// drafter's beam trees with it (the default) and without it (SPECULA_CUDA_DEVICE_TOPK=0): the same trees.
#include "backends/cuda/cuda_runner.h"
#include "cuda_draft_fixtures.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/topk.h"
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <vector>

using namespace specula::internal;
using namespace specula::internal::SPECULA_CUDA_NAMESPACE;
using namespace cuda_draft_fixtures;

namespace {

struct TopkResult {
    std::vector<float> logp, lse;
    std::vector<int32_t> ids;
};

// Runs row_topk on `count` rows of n logits, row_stride floats apart (host data, uploaded).
TopkResult device_topk(const std::vector<float> &host, int32_t count, int32_t n, int64_t stride, int32_t k) {
    DeviceBuffer in(host.size() * 4), logp(size_t(count) * size_t(k) * 4), ids(logp.bytes()), lse(size_t(count) * 4);
    check(cudaMemcpy(in.as(), host.data(), host.size() * 4, cudaMemcpyHostToDevice), "upload");
    row_topk(in.as<float>(), count, n, stride, k, logp.as<float>(), ids.as<int32_t>(), lse.as<float>(), nullptr);
    check(cudaDeviceSynchronize(), "row_topk");
    TopkResult r;
    r.logp.resize(size_t(count) * size_t(k));
    r.ids.resize(r.logp.size());
    r.lse.resize(size_t(count));
    check(cudaMemcpy(r.logp.data(), logp.as(), logp.bytes(), cudaMemcpyDeviceToHost), "download");
    check(cudaMemcpy(r.ids.data(), ids.as(), ids.bytes(), cudaMemcpyDeviceToHost), "download");
    check(cudaMemcpy(r.lse.data(), lse.as(), lse.bytes(), cudaMemcpyDeviceToHost), "download");
    return r;
}

// The host's normaliser (speculative/beam_tree.cpp's log_softmax).
float host_lse(const float *x, int32_t n) {
    float max = -INFINITY;
    for (int32_t i = 0; i < n; ++i) max = std::max(max, x[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(double(x[i] - max));
    return max + float(std::log(sum));
}

// Checks one row: lse within 1e-5 of the host's; the pairs exactly the k best of x - lse (the device's lse) by
// (logp descending, lowest id), then (-inf, -1) past n.
void check_row(const float *x, int32_t n, int32_t k, const TopkResult &r, int32_t row) {
    const float lse = r.lse[size_t(row)], ref_lse = host_lse(x, n);
    INFO("row " << row << ", n " << n << ", k " << k << ", lse " << lse << " (host " << ref_lse << ")");
    CHECK(std::fabs(lse - ref_lse) <= 1e-5f * std::max(1.0f, std::fabs(ref_lse)));
    std::vector<float> logp(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        logp[size_t(i)] = x[i] - lse;
        if (std::isnan(logp[size_t(i)])) logp[size_t(i)] = -INFINITY;
    }
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logp[size_t(a)] > logp[size_t(b)]; });
    for (int32_t j = 0; j < k; ++j) {
        const size_t at = size_t(row) * size_t(k) + size_t(j);
        INFO("candidate " << j);
        if (j < n) {
            CHECK(r.ids[at] == order[size_t(j)]);
            CHECK(std::memcmp(&r.logp[at], &logp[size_t(order[size_t(j)])], 4) == 0);
            if (std::isfinite(ref_lse) && std::isfinite(x[order[size_t(j)]]))
                CHECK(std::fabs(r.logp[at] - (x[order[size_t(j)]] - ref_lse)) <= 1e-5f * std::max(1.0f, std::fabs(ref_lse)));
        } else {
            CHECK(r.ids[at] == -1);
            CHECK(r.logp[at] == -INFINITY);
        }
    }
}

std::vector<float> random_rows(size_t n, uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

}  // namespace

TEST_CASE("cuda row_topk: log-softmax top-k of random rows matches the host", "[cuda][topk]") {
    struct Case {
        int32_t count, n, stride, k;
    };
    // n not a multiple of the block (256), row strides wider than n, k from 1 to kTopkMaxK, the LongSpec widths.
    for (const Case c : {Case{3, 1000, 1000, 16}, Case{4, 257, 300, 4}, Case{2, 5000, 5003, 64}, Case{5, 512, 512, 1}, Case{16, 512, 512, 16},
                         Case{1, 255, 255, 64}, Case{2, 40000, 40000, 16}}) {
        const std::vector<float> x = random_rows(size_t(c.count) * size_t(c.stride), uint32_t(c.n * 7 + c.k), 3.0f);
        const TopkResult r = device_topk(x, c.count, c.n, c.stride, c.k);
        for (int32_t row = 0; row < c.count; ++row) check_row(x.data() + size_t(row) * size_t(c.stride), c.n, c.k, r, row);
    }
}

TEST_CASE("cuda row_topk: ties go to the lowest id, with -inf entries, n = 1 and k > n", "[cuda][topk]") {
    SECTION("ties") {
        // Values on a coarse grid: hundreds of exact ties, including across threads' strided subsets.
        std::vector<float> x = random_rows(3 * 2000, 11, 2.0f);
        for (float &v : x) v = std::round(v);
        const TopkResult r = device_topk(x, 3, 2000, 2000, 64);
        for (int32_t row = 0; row < 3; ++row) check_row(x.data() + size_t(row) * 2000, 2000, 64, r, row);
        // All equal: ids 0 .. k-1.
        const std::vector<float> flat(700, 0.25f);
        const TopkResult f = device_topk(flat, 1, 700, 700, 16);
        check_row(flat.data(), 700, 16, f, 0);
        for (int32_t j = 0; j < 16; ++j) CHECK(f.ids[size_t(j)] == j);
    }
    SECTION("-inf entries") {
        std::vector<float> x = random_rows(2 * 1500, 12, 2.0f);
        for (size_t i = 0; i < x.size(); ++i)
            if (i % 3 != 0) x[i] = -INFINITY;
        // Row 1 has only 5 finite entries: the rest of its 16 candidates are -inf, lowest ids first.
        for (size_t i = 1500; i < 3000; ++i) x[i] = (i - 1500) % 300 == 7 ? float(i % 5) : -INFINITY;
        const TopkResult r = device_topk(x, 2, 1500, 1500, 16);
        for (int32_t row = 0; row < 2; ++row) check_row(x.data() + size_t(row) * 1500, 1500, 16, r, row);
        CHECK(r.logp[16 + 5] == -INFINITY);
        CHECK(r.ids[16 + 5] == 0);
    }
    SECTION("n = 1 and k > n") {
        const std::vector<float> one = {3.5f};
        const TopkResult a = device_topk(one, 1, 1, 1, 64);
        check_row(one.data(), 1, 64, a, 0);
        CHECK(a.ids[0] == 0);
        CHECK(a.logp[0] == 0.0f);
        const std::vector<float> few = {1.0f, 2.0f, 2.0f, -1.0f, 0.5f};
        const TopkResult b = device_topk(few, 1, 5, 5, 16);
        check_row(few.data(), 5, 16, b, 0);
        CHECK(std::vector<int32_t>(b.ids.begin(), b.ids.begin() + 6) == std::vector<int32_t>{1, 2, 0, 4, 3, -1});
    }
}

TEST_CASE("cuda row_topk: a row's result does not depend on the launch", "[cuda][topk]") {
    const int32_t n = 3000, k = 16;
    const std::vector<float> x = random_rows(size_t(8) * n, 21, 4.0f);
    const TopkResult all = device_topk(x, 8, n, n, k);
    const TopkResult again = device_topk(x, 8, n, n, k);
    const std::vector<float> row5(x.begin() + 5 * n, x.begin() + 6 * n);
    const TopkResult alone = device_topk(row5, 1, n, n, k);
    CHECK(std::memcmp(all.logp.data(), again.logp.data(), all.logp.size() * 4) == 0);
    CHECK(all.ids == again.ids);
    CHECK(std::memcmp(all.logp.data() + 5 * k, alone.logp.data(), size_t(k) * 4) == 0);
    CHECK(std::equal(alone.ids.begin(), alone.ids.end(), all.ids.begin() + 5 * k));
    CHECK(std::memcmp(&all.lse[5], &alone.lse[0], 4) == 0);
}

TEST_CASE("cuda row_topk: a Llama-3-sized row (128256 logits)", "[cuda][topk]") {
    const int32_t n = 128256;
    std::vector<float> x = random_rows(size_t(2) * n, 31, 2.5f);
    x[size_t(n) + 77777] = 40.0f;  // a confident row: one dominant logit
    const TopkResult r = device_topk(x, 2, n, n, 16);
    for (int32_t row = 0; row < 2; ++row) check_row(x.data() + size_t(row) * n, n, 16, r, row);
    CHECK(r.ids[16] == 77777);
}

TEST_CASE("cuda: the LongSpec drafter builds the same trees with the device top-k as from full logits", "[cuda][longspec][topk]") {
    const auto model_path = source_dir() / "models/stories260K.gguf", draft_path = source_dir() / "models/drafts/stories260K.longspec.gguf";
    if (!test_fixtures::have_fixture(model_path) || !test_fixtures::have_fixture(draft_path)) return;
    const auto model = Model::load(model_path.string(), LoadOptions{});
    const auto draft = LongSpecDraft::load(draft_path.string(), model);
    const int32_t n_vocab = model->hparams().n_vocab;
    CudaRunner runner(model, 256, 0);
    const std::vector<int32_t> context = story_prompt(*model, 61);
    std::vector<float> scratch(static_cast<size_t>(n_vocab));
    REQUIRE(runner.eval(context.data(), 60, 0, scratch.data(), false));
    auto full = make_drafter(runner, draft, false), topk = make_drafter(runner, draft, true);
    REQUIRE(full != nullptr);
    REQUIRE(topk != nullptr);
    const size_t bytes = topk->allocated_bytes();
    int32_t compared = 0;
    for (int32_t n : {12, 33, 61}) {  // contexts of n tokens: the target's cache holds the first n - 1
        for (const TreeShape &shape : {TreeShape{}, TreeShape::chain(5), TreeShape{{32, 8}}, TreeShape{{2, 2, 2, 2, 2, 2, 2, 2}}}) {
            DraftRequest req;
            req.tokens = std::span<const int32_t>(context.data(), size_t(n));
            req.n_target_kv = n - 1;
            req.shape = shape;
            req.node_budget = 69;
            DraftTree a, b;
            a.reset(context[size_t(n - 1)]);
            b.reset(context[size_t(n - 1)]);
            full->draft(req, a);
            topk->draft(req, b);
            INFO("context " << n << ", shape " << shape.to_string());
            CHECK(a.size() > 1);
            CHECK(a.tokens() == b.tokens());
            REQUIRE(a.size() == b.size());
            for (int32_t i = 1; i < a.size(); ++i) CHECK(a.parent(i) == b.parent(i));
            compared += a.size() - 1;
        }
    }
    CHECK(compared > 100);
    CHECK(topk->allocated_bytes() == bytes);  // fixed at creation
}

TEST_CASE("cuda: greedy speculative decoding with the trained LongSpec draft is the same with and without the device top-k",
          "[cuda][longspec][topk][lossless]") {
    const auto model_path = source_dir() / "models/stories260K.gguf", draft_path = source_dir() / "models/drafts/stories260K.longspec.gguf";
    if (!test_fixtures::have_fixture(model_path) || !test_fixtures::have_fixture(draft_path)) return;
    const auto model = Model::load(model_path.string(), LoadOptions{});
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    const SessionConfig sc = cuda_session_config();
    const std::vector<int32_t> prompt = story_prompt(*model, 20);
    const int32_t n = 32;
    Session plain(model, sc, greedy);
    const std::vector<int32_t> expected = test_sessions::generate(plain, prompt, n);
    SpeculativeConfig c;
    c.longspec = LongSpecDraft::load(draft_path.string(), model);
    std::vector<int32_t> produced[2];
    SpeculativeStats stats[2];
    for (int device_topk = 0; device_topk < 2; ++device_topk) {
        setenv("SPECULA_CUDA_DEVICE_TOPK", device_topk ? "1" : "0", 1);
        Session s(model, sc, greedy);
        s.set_speculative(c);
        produced[device_topk] = test_sessions::generate(s, prompt, n);
        stats[device_topk] = s.speculative_stats();
        unsetenv("SPECULA_CUDA_DEVICE_TOPK");
        INFO("device top-k " << device_topk);
        CHECK(produced[device_topk] == expected);  // lossless either way
        CHECK(stats[device_topk].rounds > 0);
    }
    // The same trees: the same rounds, drafted and accepted counts.
    CHECK(stats[0].rounds == stats[1].rounds);
    CHECK(stats[0].drafted == stats[1].drafted);
    CHECK(stats[0].accepted == stats[1].accepted);
    CHECK(stats[0].accepted_at_depth == stats[1].accepted_at_depth);
}
