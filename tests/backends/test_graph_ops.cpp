// Every graph operation (graph/graph.h) on every backend, in the manner of llama.cpp's tests/test-backend-ops.cpp:
// each operation, each shape class and weight type, run as a one-operation graph through the executor a backend's
// runner makes (TargetRunner::make_executor), against the CPU backend's result with a stated tolerance (NMSE: the
// squared error over the squared reference). The CPU backend itself is checked against straight double-precision
// loops written here. The backends are the registry's with a usable device (the CPU; Vulkan on lavapipe in CI;
// CUDA on a GPU) and, in test builds on x86-64, the CUDA backend compiled against the CPU emulator: a backend added
// to the registry inherits every test here without a line changed.
//
// Inputs reach a graph the way a model's do: through Embed, from a random F32 table, so a test graph is
//   Embed(a, table_a) [, Embed(b, table_b) ...], the operation under test, result in graph.logits.
#include <catch2/catch.hpp>

#include "backends/backends_under_test.h"

#include "backend/backend_registry.h"
#include "backends/cpu/cpu_runner.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"
#include "graph/graph.h"
#include "graph/model_graph.h"
#include "model/model.h"
#include "model/rope.h"
#include "model/synthetic_model.h"


#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace specula::internal;
using namespace backends_under_test_support;

namespace {


constexpr int32_t kCtx = 512;

// The runner the executors are made by: a tiny llama of real head size (4 heads of 64, 2 KV heads), written here.
std::shared_ptr<const Model> host_model() {
    static const std::shared_ptr<const Model> model = [] {
        const auto path = std::filesystem::temp_directory_path() / ("specula-graph-ops-" + std::to_string(::getpid()) + ".gguf");
        SyntheticOptions opt;
        opt.type = SyntheticType::F32;
        write_synthetic_model(*find_synthetic_shape("tiny-llama"), (std::filesystem::path(SPECULA_SOURCE_DIR) / "models/stories260K.gguf").string(),
                              path.string(), opt);
        LoadOptions lo;
        lo.use_mmap = false;
        auto m = Model::load(path.string(), lo);
        std::filesystem::remove(path);
        return m;
    }();
    return model;
}

// A test graph's weights: tensors laid out in one in-memory "file" (what backends key their copies by).
class WeightFile {
public:
    // Adds a tensor of rows x cols of `type`: random weights, or (F32 only) values from `fill`.
    size_t add(uint32_t type, int64_t rows, int64_t cols, uint64_t seed, const std::function<float(int64_t)> &fill = {}) {
        const TensorTypeLayout *layout = tensor_type_layout(type);
        Spec s{type, rows, cols, size_t(cols / layout->block_size) * layout->type_size, bytes_.size()};
        bytes_.resize(bytes_.size() + size_t(rows) * s.row_bytes + 64);  // 64: keep the next tensor aligned
        uint8_t *dst = bytes_.data() + s.offset;
        if (fill) {
            for (int64_t i = 0; i < rows * cols; ++i) {
                const float v = fill(i);
                std::memcpy(dst + 4 * i, &v, 4);
            }
        } else {
            random_weight_rows(type, rows, cols, seed, dst);
        }
        specs_.push_back(s);
        return specs_.size() - 1;
    }
    // Freezes the bytes; views become valid.
    void seal() {
        file_ = std::make_shared<FileBytes>(FileBytes::from_vector(std::move(bytes_)));
        for (const Spec &s : specs_) {
            WeightView w;
            w.data = file_->data() + s.offset;
            w.type = s.type;
            w.cols = s.cols;
            w.rows = s.rows;
            w.row_bytes = s.row_bytes;
            views_.push_back(w);
        }
    }
    const WeightView &view(size_t i) const { return views_[i]; }
    WeightSource source() const { return WeightSource{file_.get(), &cache_, file_}; }
    // Row r of tensor i as floats (the reference arithmetic's dequantization).
    std::vector<float> row(size_t i, int64_t r) const {
        const WeightView &w = views_[i];
        std::vector<float> out(size_t(w.cols));
        find_type_kernels(w.type)->to_float(w.row(r), out.data(), w.cols);
        return out;
    }

private:
    struct Spec {
        uint32_t type;
        int64_t rows, cols;
        size_t row_bytes, offset;
    };
    std::vector<uint8_t> bytes_;
    std::vector<Spec> specs_;
    std::shared_ptr<FileBytes> file_;
    BackendCache cache_;
    std::deque<WeightView> views_;
};

double nmse(const std::vector<float> &ref, const std::vector<float> &got) {
    REQUIRE(ref.size() == got.size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        err += (double(ref[i]) - double(got[i])) * (double(ref[i]) - double(got[i]));
        norm += double(ref[i]) * double(ref[i]);
    }
    return norm > 0 ? err / norm : err;
}

// A graph of the host model's shapes over one test file: tensors added by the caller.
std::shared_ptr<Graph> test_graph(const WeightFile &file) {
    auto g = std::make_shared<Graph>();
    g->name = "graph-ops";
    const auto model = host_model();
    g->hp = model->hparams();
    g->rope_freq_factors = model->weights().rope_freq_factors;
    g->attention_scale = 1.0f / std::sqrt(float(g->hp.head_dim));
    g->n_model_layers = g->hp.n_layer;
    g->sources.push_back(file.source());
    return g;
}

// Runs stage 0 then stage 1 (when present) of `g` on every backend over `rows0` / `rows1`, returning each backend's
// graph.logits rows of the last stage. prepare(runner) may fill the runner's cache first.
struct Result {
    std::string backend;
    bool reference;
    std::vector<float> values;
};
// not_yet: operations some backends have not implemented; those backends must refuse the graph with UNSUPPORTED
// naming it (and are left out of the comparison), the others run it.
std::vector<Result> run_everywhere(const std::shared_ptr<const Graph> &g, const std::vector<const BatchRows *> &stages,
                                   const std::function<void(TargetRunner &)> &prepare = {}, bool not_yet = false) {
    std::vector<Result> out;
    ThreadPool pool(2);
    const int32_t width = g->tensors[size_t(g->logits)].width;
    int32_t max_rows = 1;
    for (const BatchRows *r : stages) max_rows = std::max(max_rows, r->n);
    for (const BackendUnderTest &b : backends_under_test()) {
        auto runner = b.make(host_model(), kCtx, pool);
        if (prepare) prepare(*runner);
        std::unique_ptr<GraphExecutor> exec;
        try {
            exec = runner->make_executor(ExecutorRequest{g, max_rows});
        } catch (const Error &e) {
            if (!not_yet || b.reference || e.status() != SPECULA_ERR_UNSUPPORTED) throw;
            WARN(b.name << " refuses the graph (not implemented there yet): " << e.what());
            CHECK_THAT(e.what(), Catch::Matchers::Contains("is not implemented"));
            continue;
        }
        std::vector<float> values(size_t(stages.back()->n) * size_t(width));
        for (size_t s = 0; s < stages.size(); ++s) exec->run(int32_t(s), *stages[s], s + 1 == stages.size() ? values.data() : nullptr, false);
        out.push_back({b.name, b.reference, std::move(values)});
    }
    REQUIRE(!out.empty());
    return out;
}

// Every backend within `tol` NMSE of the CPU; the CPU within `ref_tol` of the straight loops' `want` (when given).
void check_all(const std::vector<Result> &results, double tol, const std::vector<float> *want, double ref_tol, const std::string &what) {
    const Result *cpu = nullptr;
    for (const Result &r : results)
        if (r.reference) cpu = &r;
    REQUIRE(cpu != nullptr);
    if (want != nullptr) {
        const double e = nmse(*want, cpu->values);
        INFO(what << ": cpu against the straight loops, NMSE " << e);
        CHECK(e <= ref_tol);
    }
    for (const Result &r : results) {
        if (r.reference) continue;
        const double e = nmse(cpu->values, r.values);
        INFO(what << ": " << r.backend << " against the cpu, NMSE " << e << " (tolerance " << tol << ")");
        CHECK(e <= tol);
    }
}

// A batch of n rows whose tokens pick rows of the input tables (below `vocab`), at positions pos0 + i, with no key
// lists and no stores.
BatchRows plain_rows(int32_t n, int32_t vocab, uint32_t seed, int32_t pos0 = 0) {
    std::mt19937 rng(seed);
    BatchRows rows;
    rows.reset(n);
    for (int32_t i = 0; i < n; ++i) {
        rows.tokens_mut()[i] = int32_t(rng() % uint32_t(vocab));
        rows.positions_mut()[i] = pos0 + i;
    }
    return rows;
}

constexpr int32_t kTableRows = 97;
float table_value(uint64_t seed, int64_t i) {  // smooth-ish inputs in about [-1, 1]
    return float(std::sin(double(i) * 0.37 + double(seed)) * 0.8 + std::cos(double(i) * 0.011 * double(seed % 7 + 1)) * 0.3);
}

}  // namespace

TEST_CASE("graph ops: mat_mul for every weight type and shape class", "[graph-ops]") {
    const uint32_t types[] = {uint32_t(TensorType::F32), uint32_t(TensorType::F16), uint32_t(TensorType::Q8_0),
                              uint32_t(TensorType::Q4_0), uint32_t(TensorType::Q4_K), uint32_t(TensorType::Q6_K)};
    struct Shape {
        int64_t rows, cols;
    };
    const Shape shapes[] = {{32, 256}, {67, 512}, {256, 1024}};  // a head's width, odd rows, a wide reduction
    for (uint32_t type : types)
        for (const Shape &sh : shapes)
            for (int32_t n : {1, 5, 33}) {
                WeightFile file;
                const size_t table = file.add(uint32_t(TensorType::F32), kTableRows, sh.cols, 0, [&](int64_t i) { return table_value(3, i); });
                const size_t w = file.add(type, sh.rows, sh.cols, 11 + type);
                file.seal();
                auto g = test_graph(file);
                const TensorId x = g->add_tensor("x", int32_t(sh.cols));
                g->logits = g->add_tensor("y", int32_t(sh.rows));
                GraphBuilder b(*g, 0);
                b.embed(x, file.view(table));
                b.matmul(g->logits, x, file.view(w));
                const BatchRows rows = plain_rows(n, kTableRows, uint32_t(n));
                // The straight loops: dequantized weights, double sums.
                std::vector<float> want(size_t(n) * size_t(sh.rows));
                for (int32_t i = 0; i < n; ++i) {
                    const std::vector<float> xr = file.row(table, rows.tokens()[i]);
                    for (int64_t r = 0; r < sh.rows; ++r) {
                        const std::vector<float> wr = file.row(w, r);
                        double acc = 0;
                        for (int64_t k = 0; k < sh.cols; ++k) acc += double(wr[size_t(k)]) * double(xr[size_t(k)]);
                        want[size_t(i) * size_t(sh.rows) + size_t(r)] = float(acc);
                    }
                }
                const bool quantized = type != uint32_t(TensorType::F32) && type != uint32_t(TensorType::F16);
                // Quantized weights meet activations quantized to 8 bits on the CPU (as in ggml) and F16 ones on GPUs.
                // F16 weights meet activations in F16 where ggml's dot type is F16.
                const double ref_tol = type == uint32_t(TensorType::F32) ? 1e-10 : quantized ? 1e-4 : 1e-6;
                check_all(run_everywhere(g, {&rows}), quantized ? 2e-4 : 2e-6, &want, ref_tol,
                          std::string("mat_mul ") + tensor_type_name(type) + " " + std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + " n=" +
                              std::to_string(n));
            }
}

TEST_CASE("graph ops: embed gathers rows of every weight type", "[graph-ops]") {
    for (uint32_t type : {uint32_t(TensorType::F32), uint32_t(TensorType::F16), uint32_t(TensorType::Q8_0), uint32_t(TensorType::Q4_K)}) {
        WeightFile file;
        const size_t table = file.add(type, 300, 256, 5);
        file.seal();
        auto g = test_graph(file);
        g->logits = g->add_tensor("x", 256);
        GraphBuilder(*g, 0).embed(g->logits, file.view(table));
        const BatchRows rows = plain_rows(9, 300, 1);
        std::vector<float> want;
        for (int32_t i = 0; i < rows.n; ++i) {
            const std::vector<float> r = file.row(table, rows.tokens()[i]);
            want.insert(want.end(), r.begin(), r.end());
        }
        // A GPU may keep quantized tables as F16 (CUDA does): within F16 rounding.
        check_all(run_everywhere(g, {&rows}), type == uint32_t(TensorType::F32) ? 0.0 : 1e-6, &want, 0.0, std::string("embed ") + tensor_type_name(type));
    }
}

TEST_CASE("graph ops: rms_norm, add_bias, add and swiglu, row by row", "[graph-ops]") {
    for (int32_t width : {64, 256, 2048}) {
        WeightFile file;
        const size_t ta = file.add(uint32_t(TensorType::F32), kTableRows, width, 0, [&](int64_t i) { return table_value(1, i); });
        const size_t tb = file.add(uint32_t(TensorType::F32), kTableRows, width, 0, [&](int64_t i) { return table_value(2, i) * 3.0f; });
        const size_t scale = file.add(uint32_t(TensorType::F32), 1, width, 0, [&](int64_t i) { return 1.0f + 0.01f * float(i % 13); });
        file.seal();
        const BatchRows rows = plain_rows(7, kTableRows, uint32_t(width));
        const auto a_row = [&](int32_t i) { return file.row(ta, rows.tokens()[i]); };
        const auto b_row = [&](int32_t i) { return file.row(tb, rows.tokens()[i]); };
        const std::vector<float> s = file.row(scale, 0);
        const std::string w = " width " + std::to_string(width);
        {  // rms_norm
            auto g = test_graph(file);
            const TensorId a = g->add_tensor("a", width);
            g->logits = g->add_tensor("y", width);
            GraphBuilder b(*g, 0);
            b.embed(a, file.view(ta));
            b.rmsnorm(g->logits, a, file.view(scale), 1e-5f);
            std::vector<float> want;
            for (int32_t i = 0; i < rows.n; ++i) {
                const std::vector<float> x = a_row(i);
                double ss = 0;
                for (float v : x) ss += double(v) * double(v);
                const double inv = 1.0 / std::sqrt(ss / double(width) + 1e-5);
                for (int32_t j = 0; j < width; ++j) want.push_back(float(double(x[size_t(j)]) * inv * double(s[size_t(j)])));
            }
            check_all(run_everywhere(g, {&rows}), 1e-12, &want, 1e-12, "rms_norm" + w);
        }
        {  // add_bias, then add, then swiglu on the sum
            auto g = test_graph(file);
            const TensorId a = g->add_tensor("a", width), bt = g->add_tensor("b", width);
            g->logits = a;
            GraphBuilder b(*g, 0);
            b.embed(a, file.view(ta));
            b.embed(bt, file.view(tb));
            b.add_bias(a, file.view(scale));
            b.add(a, bt);
            b.swiglu(a, bt);
            std::vector<float> want;
            for (int32_t i = 0; i < rows.n; ++i) {
                const std::vector<float> x = a_row(i), y = b_row(i);
                for (int32_t j = 0; j < width; ++j) {
                    const double sum = double(x[size_t(j)]) + double(s[size_t(j)]) + double(y[size_t(j)]);
                    want.push_back(float(sum / (1.0 + std::exp(-sum)) * double(y[size_t(j)])));
                }
            }
            check_all(run_everywhere(g, {&rows}), 1e-12, &want, 1e-12, "add_bias, add, swiglu" + w);
        }
    }
}

TEST_CASE("graph ops: geglu (GELU with the tanh approximation), scale and soft_cap, row by row (gemma)", "[graph-ops]") {
    for (int32_t width : {64, 2048}) {
        WeightFile file;
        const size_t ta = file.add(uint32_t(TensorType::F32), kTableRows, width, 0, [&](int64_t i) { return table_value(21, i) * 4.0f; });
        const size_t tb = file.add(uint32_t(TensorType::F32), kTableRows, width, 0, [&](int64_t i) { return table_value(22, i); });
        file.seal();
        auto g = test_graph(file);
        const TensorId a = g->add_tensor("a", width), bt = g->add_tensor("b", width);
        g->logits = a;
        GraphBuilder b(*g, 0);
        b.embed(a, file.view(ta));
        b.embed(bt, file.view(tb));
        b.scale(a, 1.5f);
        b.geglu(a, bt);
        b.softcap(a, 0.75f);
        const BatchRows rows = plain_rows(7, kTableRows, uint32_t(width));
        std::vector<float> want;
        for (int32_t i = 0; i < rows.n; ++i) {
            const std::vector<float> x = file.row(ta, rows.tokens()[i]), y = file.row(tb, rows.tokens()[i]);
            for (int32_t j = 0; j < width; ++j) {
                const double v = double(x[size_t(j)]) * 1.5;
                const double gelu = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
                want.push_back(float(0.75 * std::tanh(gelu * double(y[size_t(j)]) / 0.75)));
            }
        }
        check_all(run_everywhere(g, {&rows}), 1e-12, &want, 1e-12, "scale, geglu, soft_cap width " + std::to_string(width));
    }
}

TEST_CASE("graph ops: layer_norm (then its bias) and gelu, row by row (starcoder2)", "[graph-ops]") {
    for (int32_t width : {64, 3072}) {
        WeightFile file;
        // Rows with an offset, so that the mean matters; values reaching past GELU's +-10 cut-offs.
        const size_t ta = file.add(uint32_t(TensorType::F32), kTableRows, width, 0, [&](int64_t i) { return 1.5f + table_value(31, i) * 6.0f; });
        const size_t scale = file.add(uint32_t(TensorType::F32), 1, width, 0, [&](int64_t i) { return 0.5f + 0.02f * float(i % 97); });
        const size_t bias = file.add(uint32_t(TensorType::F32), 1, width, 0, [&](int64_t i) { return table_value(32, i); });
        file.seal();
        auto g = test_graph(file);
        const TensorId a = g->add_tensor("a", width);
        g->logits = g->add_tensor("y", width);
        GraphBuilder b(*g, 0);
        b.embed(a, file.view(ta));
        b.layernorm(g->logits, a, file.view(scale), 1e-5f);
        b.add_bias(g->logits, file.view(bias));
        b.scale(g->logits, 4.0f);
        b.gelu(g->logits);
        const BatchRows rows = plain_rows(7, kTableRows, uint32_t(width));
        const std::vector<float> s = file.row(scale, 0), bv = file.row(bias, 0);
        std::vector<float> want;
        for (int32_t i = 0; i < rows.n; ++i) {
            const std::vector<float> x = file.row(ta, rows.tokens()[i]);
            double mean = 0, var = 0;
            for (float v : x) mean += double(v);
            mean /= double(width);
            for (float v : x) var += (double(v) - mean) * (double(v) - mean);
            var /= double(width);
            for (int32_t j = 0; j < width; ++j) {
                const double v = 4.0 * ((double(x[size_t(j)]) - mean) / std::sqrt(var + 1e-5) * double(s[size_t(j)]) + double(bv[size_t(j)]));
                want.push_back(float(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)))));
            }
        }
        // GELU rounds its input and result to F16 as ggml's CPU does (about 2^-12 relative each): hence 1e-6 against
        // the exact loops; the backends round the same way.
        check_all(run_everywhere(g, {&rows}), 1e-9, &want, 1e-6, "layer_norm, add_bias, gelu width " + std::to_string(width));
    }
}

// Mixture of experts (llama.cpp's build_moe_ffn): route, expert_mat_mul (one input for every slot, then one input
// per slot), mix_experts and sigmoid_gate against straight loops; a row's bits are those of the same row alone
// on every backend (each groups a batch's rows by expert: grouping must change nothing).
TEST_CASE("graph ops: route, expert_mat_mul, mix_experts and sigmoid_gate (mixture of experts), rows grouped by expert", "[graph-ops]") {
    struct Variant {
        uint32_t type;
        int32_t n_expert, top_k;
        bool norm;
    };
    const Variant variants[] = {{uint32_t(TensorType::F32), 8, 2, true}, {uint32_t(TensorType::Q8_0), 16, 4, false}, {uint32_t(TensorType::Q4_K), 6, 3, true}};
    const int32_t d = 256, f = 256;
    for (const Variant &v : variants) {
        const std::string what = std::string(tensor_type_name(v.type)) + ", " + std::to_string(v.top_k) + " of " + std::to_string(v.n_expert) + " experts";
        WeightFile file;
        const size_t table = file.add(uint32_t(TensorType::F32), kTableRows, d, 0, [&](int64_t i) { return table_value(41, i) * 1.5f; });
        // Router rows far apart, so the straight loops' choice is the backends' (no near-ties).
        const size_t router = file.add(uint32_t(TensorType::F32), v.n_expert, d, 0, [&](int64_t i) { return table_value(43 + i / d, i) * 0.4f; });
        const size_t shared = file.add(uint32_t(TensorType::F32), 1, d, 0, [&](int64_t i) { return table_value(47, i) * 0.1f; });
        const size_t gates = file.add(v.type, int64_t(v.n_expert) * f, d, 51 + v.type), ups = file.add(v.type, int64_t(v.n_expert) * f, d, 53 + v.type);
        const size_t downs = file.add(v.type, int64_t(v.n_expert) * d, f, 57 + v.type);
        file.seal();
        std::vector<WeightView> gate_exps, up_exps, down_exps;  // expert e: rows [e * f, (e + 1) * f) of the stack
        for (int32_t e = 0; e < v.n_expert; ++e) {
            gate_exps.push_back(file.view(gates).rows_view(int64_t(e) * f, f));
            up_exps.push_back(file.view(ups).rows_view(int64_t(e) * f, f));
            down_exps.push_back(file.view(downs).rows_view(int64_t(e) * d, d));
        }
        auto g = test_graph(file);
        const TensorId x = g->add_tensor("x", d), logits = g->add_tensor("router", v.n_expert), route = g->add_tensor("route", 2 * v.top_k);
        const TensorId eg = g->add_tensor("gate", v.top_k * f), eu = g->add_tensor("up", v.top_k * f), ed = g->add_tensor("down", v.top_k * d);
        const TensorId sg = g->add_tensor("shared_gate", 1);
        g->logits = g->add_tensor("y", d);
        GraphBuilder b(*g, 0);
        b.embed(x, file.view(table));
        b.matmul(logits, x, file.view(router));
        b.route(route, logits, v.top_k, v.norm);
        b.expert_matmul(eg, x, route, gate_exps, v.top_k);
        b.expert_matmul(eu, x, route, up_exps, v.top_k);
        b.swiglu(eg, eu);
        b.expert_matmul(ed, eg, route, down_exps, v.top_k);
        b.mix_experts(g->logits, ed, route, v.top_k);
        b.matmul(sg, x, file.view(shared));
        b.sigmoid_gate(g->logits, sg);
        // 24 rows from 97 table rows: experts are shared between rows, some by many.
        const BatchRows rows = plain_rows(24, kTableRows, 5 + uint32_t(v.n_expert));

        std::vector<float> want;
        auto dot = [](const std::vector<float> &a, const std::vector<float> &w) {
            double acc = 0;
            for (size_t i = 0; i < a.size(); ++i) acc += double(a[i]) * double(w[i]);
            return acc;
        };
        for (int32_t i = 0; i < rows.n; ++i) {
            const std::vector<float> xr = file.row(table, rows.tokens()[i]);
            std::vector<double> p(size_t(v.n_expert));
            double mx = -1e300, sum = 0;
            for (int32_t e = 0; e < v.n_expert; ++e) mx = std::max(mx, p[size_t(e)] = dot(xr, file.row(router, e)));
            for (double &q : p) sum += (q = std::exp(q - mx));
            std::vector<int32_t> order(size_t(v.n_expert));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return p[size_t(a)] > p[size_t(c)]; });
            double chosen = 0;
            for (int32_t j = 0; j < v.top_k; ++j) chosen += p[size_t(order[size_t(j)])] / sum;
            std::vector<double> y(size_t(d), 0.0);
            for (int32_t j = 0; j < v.top_k; ++j) {
                const int32_t e = order[size_t(j)];
                const double wgt = p[size_t(e)] / sum / (v.norm ? chosen : 1.0);
                std::vector<float> h(static_cast<size_t>(f));
                for (int32_t r = 0; r < f; ++r) {
                    const double gv = dot(xr, file.row(gates, int64_t(e) * f + r)), uv = dot(xr, file.row(ups, int64_t(e) * f + r));
                    h[size_t(r)] = float(gv / (1.0 + std::exp(-gv)) * uv);
                }
                for (int32_t r = 0; r < d; ++r) y[size_t(r)] += wgt * dot(h, file.row(downs, int64_t(e) * d + r));
            }
            const double gate = 1.0 / (1.0 + std::exp(-dot(xr, file.row(shared, 0))));
            for (double yv : y) want.push_back(float(yv * gate));
        }
        const bool quantized = v.type != uint32_t(TensorType::F32);
        const std::vector<Result> results = run_everywhere(g, {&rows});
        // Quantized: two products in a row, each with its activations quantized to 8 bits on the CPU (mat_mul's 1e-4
        // each) and rounded to F16 on the GPUs (mat_mul's 2e-4 between them each).
        check_all(results, quantized ? 5e-4 : 2e-6, &want, quantized ? 5e-4 : 1e-10, what);
        // Each row alone: on every backend, the same bits as in the batch (its experts' products did not depend on who
        // shared them).
        for (int32_t i = 0; i < rows.n; ++i) {
            BatchRows one;
            one.reset(1);
            one.tokens_mut()[0] = rows.tokens()[i];
            one.positions_mut()[0] = i;
            const std::vector<Result> alone = run_everywhere(g, {&one});
            REQUIRE(alone.size() == results.size());
            for (size_t b = 0; b < results.size(); ++b) {
                INFO(what << ": row " << i << " alone on " << results[b].backend);
                CHECK(std::memcmp(alone[b].values.data(), results[b].values.data() + size_t(i) * size_t(d), size_t(d) * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("graph ops: rms_norm over each head of a row (qwen3's query and key norms)", "[graph-ops]") {
    for (const auto &[heads, head] : {std::pair<int32_t, int32_t>{2, 128}, {4, 64}, {16, 128}}) {
        const int32_t width = heads * head;
        WeightFile file;
        const size_t ta = file.add(uint32_t(TensorType::F32), kTableRows, width, 0, [&](int64_t i) { return table_value(11, i) * float(1 + i % 3); });
        const size_t scale = file.add(uint32_t(TensorType::F32), 1, head, 0, [&](int64_t i) { return 0.75f + 0.01f * float(i % 50); });
        file.seal();
        auto g = test_graph(file);
        const TensorId a = g->add_tensor("a", width);
        g->logits = g->add_tensor("y", width);
        GraphBuilder b(*g, 0);
        b.embed(a, file.view(ta));
        b.rmsnorm_heads(g->logits, a, file.view(scale), 1e-6f, heads);
        const BatchRows rows = plain_rows(5, kTableRows, uint32_t(width));
        const std::vector<float> s = file.row(scale, 0);
        std::vector<float> want;
        for (int32_t i = 0; i < rows.n; ++i) {
            const std::vector<float> x = file.row(ta, rows.tokens()[i]);
            for (int32_t h = 0; h < heads; ++h) {
                double ss = 0;
                for (int32_t j = 0; j < head; ++j) ss += double(x[size_t(h * head + j)]) * double(x[size_t(h * head + j)]);
                const double inv = 1.0 / std::sqrt(ss / double(head) + 1e-6);
                for (int32_t j = 0; j < head; ++j) want.push_back(float(double(x[size_t(h * head + j)]) * inv * double(s[size_t(j)])));
            }
        }
        check_all(run_everywhere(g, {&rows}), 1e-12, &want, 1e-12, "rms_norm of " + std::to_string(heads) + " heads of " + std::to_string(head));
    }
}

TEST_CASE("graph ops: rope with NORM and NEOX pairing, partial rotation, other bases and frequency factors", "[graph-ops]") {
    struct Variant {
        const char *name;
        RopeType type;
        int32_t rope_dim;
        float base;
        bool factors;
    };
    const Variant variants[] = {{"norm", RopeType::Norm, 64, 10000.0f, false},
                                {"neox", RopeType::Neox, 64, 1000000.0f, false},
                                {"partial", RopeType::Neox, 32, 10000.0f, false},
                                {"llama3 factors", RopeType::Norm, 64, 500000.0f, true}};
    for (const Variant &v : variants) {
        WeightFile file;
        const int32_t heads = 4, width = heads * 64;
        const size_t ta = file.add(uint32_t(TensorType::F32), kTableRows, width, 0, [&](int64_t i) { return table_value(4, i); });
        file.seal();
        auto g = test_graph(file);
        g->hp.rope_type = v.type;
        g->hp.rope_dim = v.rope_dim;
        g->hp.rope_freq_base = v.base;
        g->rope_freq_factors.clear();
        if (v.factors)
            for (int32_t i = 0; i < v.rope_dim / 2; ++i) g->rope_freq_factors.push_back(1.0f + float(i % 5));
        g->logits = g->add_tensor("x", width);
        GraphBuilder b(*g, 0);
        b.embed(g->logits, file.view(ta));
        b.rope(g->logits, heads);
        BatchRows rows = plain_rows(6, kTableRows, 9);
        const int32_t positions[] = {0, 1, 17, 255, 256, kCtx - 1};
        std::copy(std::begin(positions), std::end(positions), rows.positions_mut());
        std::vector<float> want;
        for (int32_t i = 0; i < rows.n; ++i) {
            std::vector<float> x = file.row(ta, rows.tokens()[i]);
            std::vector<float> c(size_t(v.rope_dim / 2)), s(c.size());
            rope_angles(g->hp, g->rope_freq_factors, rows.positions()[i], c.data(), s.data());
            rope_rotate(x.data(), heads, g->hp, c.data(), s.data());
            want.insert(want.end(), x.begin(), x.end());
        }
        check_all(run_everywhere(g, {&rows}), 1e-12, &want, 0.0, std::string("rope ") + v.name);
    }
}

namespace {

// softmax(q . K^T * scale) V of one query head over the listed key rows (floats), in double.
void naive_attention(const float *q, int32_t hd, float scale, const std::vector<const float *> &k, const std::vector<const float *> &v, float *out) {
    if (k.empty()) {
        std::fill(out, out + hd, 0.0f);
        return;
    }
    std::vector<double> s(k.size());
    double m = -1e300;
    for (size_t t = 0; t < k.size(); ++t) {
        double d = 0;
        for (int32_t j = 0; j < hd; ++j) d += double(q[j]) * double(k[t][j]);
        s[t] = d * double(scale);
        m = std::max(m, s[t]);
    }
    double sum = 0;
    for (double &x : s) sum += (x = std::exp(x - m));
    for (int32_t j = 0; j < hd; ++j) {
        double acc = 0;
        for (size_t t = 0; t < k.size(); ++t) acc += s[t] * double(v[t][j]);
        out[j] = float(acc / sum);
    }
}

}  // namespace

TEST_CASE("graph ops: store_kv and attention over the graph's own store, every key-list class", "[graph-ops]") {
    const auto model = host_model();
    const HParams &hp = model->hparams();
    const int32_t hd = hp.head_dim, dq = hp.n_embd_q(), dkv = hp.n_embd_kv(), group = hp.n_head / hp.n_head_kv;
    const int32_t slots = 700;
    struct Case {
        const char *name;
        int32_t n_prefix;  // keys stored by stage 0 at slots [0, n_prefix)
        int32_t n;         // rows of stage 1, stored at slots n_prefix + i
        enum { Causal, Tree, PrefixOnly, Listed } kind;
    };
    const Case cases[] = {{"decode after 0", 0, 1, Case::Causal},       {"decode after 63", 63, 1, Case::Causal},
                          {"decode after 64", 64, 1, Case::Causal},     {"decode after 300", 300, 1, Case::Causal},
                          {"causal batch of 17 after 100", 100, 17, Case::Causal}, {"tree of 9 after 65", 65, 9, Case::Tree},
                          {"prefix only (not invariant) of 500", 500, 3, Case::PrefixOnly},
                          {"listed slots, no prefix (the draft's ring)", 200, 5, Case::Listed}};
    for (const Case &c : cases) {
        WeightFile file;
        const size_t tq = file.add(uint32_t(TensorType::F32), kTableRows, dq, 0, [&](int64_t i) { return table_value(5, i); });
        const size_t tk = file.add(uint32_t(TensorType::F32), kTableRows, dkv, 0, [&](int64_t i) { return table_value(6, i); });
        const size_t tv = file.add(uint32_t(TensorType::F32), kTableRows, dkv, 0, [&](int64_t i) { return table_value(7, i) * 2.0f; });
        file.seal();
        auto g = test_graph(file);
        g->local_kv_slots = slots;
        const TensorId q = g->add_tensor("q", dq), k = g->add_tensor("k", dkv), v = g->add_tensor("v", dkv);
        g->logits = g->add_tensor("att", dq);
        GraphBuilder s0(*g, 0);
        s0.embed(k, file.view(tk));
        s0.embed(v, file.view(tv));
        s0.store_kv(KvStore::Local, 0, k, v);
        GraphBuilder s1(*g, 1);
        s1.embed(q, file.view(tq));
        s1.embed(k, file.view(tk));
        s1.embed(v, file.view(tv));
        s1.store_kv(KvStore::Local, 0, k, v);
        s1.attention(g->logits, q, KvStore::Local, 0, 0);

        BatchRows prefix = plain_rows(std::max(c.n_prefix, 1), kTableRows, 21);
        if (c.n_prefix > 0) prefix.stores.push_back(StoreRun{0, 0, c.n_prefix});
        BatchRows rows = plain_rows(c.n, kTableRows, 22, c.n_prefix);
        rows.stores.push_back(StoreRun{0, c.n_prefix, c.n});
        std::mt19937 rng(7);
        std::vector<std::vector<int32_t>> keys(size_t(c.n));  // each row's slots, in order
        switch (c.kind) {
        case Case::Causal:
            rows.add_causal_list(c.n_prefix);
            for (int32_t i = 0; i < c.n; ++i)
                for (int32_t s = 0; s <= c.n_prefix + i; ++s) keys[size_t(i)].push_back(s);
            break;
        case Case::Tree:
            rows.begin_list(c.n_prefix, true);
            for (int32_t i = 0; i < c.n; ++i) {
                for (int32_t s = 0; s < c.n_prefix; ++s) keys[size_t(i)].push_back(s);
                for (int32_t j = 0; j <= i; ++j)
                    if (j == i || rng() % 2) {
                        rows.push_slot(i, c.n_prefix + j);
                        keys[size_t(i)].push_back(c.n_prefix + j);
                    }
            }
            rows.end_list();
            break;
        case Case::PrefixOnly:
            rows.add_prefix_list(c.n_prefix, false);
            for (int32_t i = 0; i < c.n; ++i)
                for (int32_t s = 0; s < c.n_prefix; ++s) keys[size_t(i)].push_back(s);
            break;
        case Case::Listed:
            rows.begin_list(0, true);
            for (int32_t i = 0; i < c.n; ++i)
                for (int32_t s = 0; s < c.n_prefix + c.n; ++s)
                    if (s >= c.n_prefix ? s == c.n_prefix + i : rng() % 3 != 0) {
                        rows.push_slot(i, s);
                        keys[size_t(i)].push_back(s);
                    }
            rows.end_list();
            break;
        }
        // The straight loops over the tables' rows, per query head of each row.
        std::vector<std::vector<float>> k_rows(static_cast<size_t>(slots)), v_rows(static_cast<size_t>(slots));
        for (int32_t s = 0; s < c.n_prefix; ++s) {
            k_rows[size_t(s)] = file.row(tk, prefix.tokens()[s]);
            v_rows[size_t(s)] = file.row(tv, prefix.tokens()[s]);
        }
        for (int32_t i = 0; i < c.n; ++i) {
            k_rows[size_t(c.n_prefix + i)] = file.row(tk, rows.tokens()[i]);
            v_rows[size_t(c.n_prefix + i)] = file.row(tv, rows.tokens()[i]);
        }
        std::vector<float> want(size_t(c.n) * size_t(dq));
        for (int32_t i = 0; i < c.n; ++i) {
            const std::vector<float> qr = file.row(tq, rows.tokens()[i]);
            for (int32_t h = 0; h < hp.n_head; ++h) {
                const int32_t kvh = h / group;
                std::vector<const float *> kk, vv;
                for (int32_t s : keys[size_t(i)]) {
                    kk.push_back(k_rows[size_t(s)].data() + kvh * hd);
                    vv.push_back(v_rows[size_t(s)].data() + kvh * hd);
                }
                naive_attention(qr.data() + h * hd, hd, g->attention_scale, kk, vv, want.data() + size_t(i) * size_t(dq) + size_t(h * hd));
            }
        }
        // GPUs keep their stores in F16 (and CUDA rounds queries and weights to F16 on tensor cores).
        check_all(run_everywhere(g, {&prefix, &rows}), 2e-6, &want, 1e-10, std::string("attention, ") + c.name);
    }
}

TEST_CASE("graph ops: attention over the runner's cache (the draft's cross-attention) reads it in place", "[graph-ops]") {
    const auto model = host_model();
    const HParams &hp = model->hparams();
    const int32_t hd = hp.head_dim, dq = hp.n_embd_q(), dkv = hp.n_embd_kv(), group = hp.n_head / hp.n_head_kv;
    const int32_t layer = hp.n_layer - 1, n_prefix = 333;
    // The cache's rows, as F16 (every backend's default cache type), written through write_kv.
    std::vector<std::vector<float>> k_rows(static_cast<size_t>(n_prefix)), v_rows(static_cast<size_t>(n_prefix));
    std::vector<uint16_t> k_half(size_t(n_prefix) * size_t(dkv)), v_half(k_half.size());
    for (int32_t s = 0; s < n_prefix; ++s)
        for (int32_t j = 0; j < dkv; ++j) {
            k_half[size_t(s) * size_t(dkv) + size_t(j)] = float_to_half(table_value(8, int64_t(s) * dkv + j));
            v_half[size_t(s) * size_t(dkv) + size_t(j)] = float_to_half(table_value(9, int64_t(s) * dkv + j));
            k_rows[size_t(s)].push_back(half_to_float(k_half[size_t(s) * size_t(dkv) + size_t(j)]));
            v_rows[size_t(s)].push_back(half_to_float(v_half[size_t(s) * size_t(dkv) + size_t(j)]));
        }
    WeightFile file;
    const size_t tq = file.add(uint32_t(TensorType::F32), kTableRows, dq, 0, [&](int64_t i) { return table_value(10, i); });
    file.seal();
    auto g = test_graph(file);
    const TensorId q = g->add_tensor("q", dq);
    g->logits = g->add_tensor("att", dq);
    GraphBuilder b(*g, 0);
    b.embed(q, file.view(tq));
    b.attention(g->logits, q, KvStore::Model, layer, 0);
    for (bool invariant : {true, false}) {
        BatchRows rows = plain_rows(4, kTableRows, 31);
        rows.add_prefix_list(n_prefix, invariant);
        std::vector<float> want(size_t(rows.n) * size_t(dq));
        for (int32_t i = 0; i < rows.n; ++i) {
            const std::vector<float> qr = file.row(tq, rows.tokens()[i]);
            for (int32_t h = 0; h < hp.n_head; ++h) {
                std::vector<const float *> kk, vv;
                for (int32_t s = 0; s < n_prefix; ++s) {
                    kk.push_back(k_rows[size_t(s)].data() + (h / group) * hd);
                    vv.push_back(v_rows[size_t(s)].data() + (h / group) * hd);
                }
                naive_attention(qr.data() + h * hd, hd, g->attention_scale, kk, vv, want.data() + size_t(i) * size_t(dq) + size_t(h * hd));
            }
        }
        const auto results = run_everywhere(g, {&rows}, [&](TargetRunner &r) {
            REQUIRE(r.kv_type() == KvType::F16);
            r.write_kv(layer, KvPart::Keys, 0, n_prefix, k_half.data());
            r.write_kv(layer, KvPart::Values, 0, n_prefix, v_half.data());
        });
        check_all(results, 2e-6, &want, 1e-10, invariant ? "cross-attention, fixed split" : "cross-attention, split by length");
    }
}
