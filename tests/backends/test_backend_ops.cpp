// Every backend against the CPU reference, one TargetRunner operation at a time, in the manner of llama.cpp's
// tests/test-backend-ops.cpp: the same checks run on each backend the registry has a usable device for (the CPU
// always; CUDA on a machine with a GPU) and, in test builds on x86-64, on the CUDA backend compiled against the CPU
// emulator. A backend added to backends/registry.cpp (Vulkan next) is tested here without a line changed.
//
// Per backend and fixture model:
//   - eval: a prompt batch, every row's logits, and decode steps after it, within the backend's tolerance of the
//     CPU's (0 for the CPU itself: bit-identical);
//   - eval_tree: each node's logits are bit-identical to decoding its path on the same backend (what makes greedy
//     speculative decoding lossless), and commit_tree_path leaves the cache that decoding the path leaves;
//   - read_kv / write_kv: rows copied into another runner continue decoding bit-identically;
//   - shift_kv: equals the CPU's shift within tolerance;
//   - make_longspec_drafter: the draft's root logits within tolerance of the CPU drafter's;
//   - make_draft_runner: a runner (or none) that decodes as a fresh runner of the backend does.
#include <catch2/catch.hpp>

#include "backends/backends_under_test.h"

#include "backend/backend_registry.h"
#include "backends/cpu/cpu_runner.h"
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "common/test_inputs.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "session/session.h"
#include "speculative/draft_tree.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"
#include "graph/model_graph.h"


#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

using namespace specula::internal;
using namespace backends_under_test_support;

namespace {


std::shared_ptr<const Model> stories() {
    static const std::shared_ptr<const Model> model = [] {
        std::filesystem::path path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
        if (!std::filesystem::exists(path)) path = std::filesystem::path(SPECULA_SOURCE_DIR) / "models/stories260K.gguf";
        return Model::load(path.string(), LoadOptions{});
    }();
    return model;
}

std::vector<int32_t> prompt_tokens(const Model &model, int32_t n) {
    std::vector<int32_t> t = model.vocab().tokenize("Once upon a time, there was a little girl named Lily. She loved to play outside in the sun", true, false);
    for (int32_t i = 0; int32_t(t.size()) < n; ++i) t.push_back(3 + (i * 37) % (model.hparams().n_vocab - 3));
    t.resize(size_t(n));
    return t;
}

using test_inputs::max_abs;

// Within `tol` of the reference, relative to its largest |logit|; tol 0: the same bits.
void check_close(const std::vector<float> &ref, const std::vector<float> &got, double tol, const std::string &what) {
    REQUIRE(ref.size() == got.size());
    INFO(what);
    if (tol == 0.0) {
        CHECK(std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)) == 0);
        return;
    }
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, double(std::fabs(ref[i] - got[i])));
    INFO("max |diff| " << worst << " at max |logit| " << max_abs(ref.data(), ref.size()));
    CHECK(worst <= tol * std::max(1.0, max_abs(ref.data(), ref.size())));
}

constexpr int32_t kCtx = 128;

}  // namespace

TEST_CASE("backend ops: eval of a batch, every row and decode steps match the CPU", "[backend-ops]") {
    const auto model = stories();
    const int32_t n_vocab = model->hparams().n_vocab;
    const std::vector<int32_t> tokens = prompt_tokens(*model, 24);
    ThreadPool pool(2);
    CpuRunner ref(model, kCtx, pool);
    std::vector<float> want(size_t(20) * size_t(n_vocab)), got(want.size());
    REQUIRE(ref.eval(tokens.data(), 20, 0, want.data(), true));
    std::vector<std::vector<float>> want_steps;
    for (int32_t i = 20; i < 24; ++i) {
        want_steps.emplace_back(size_t(n_vocab));
        REQUIRE(ref.eval(tokens.data() + i, 1, i, want_steps.back().data(), false));
    }
    for (const BackendUnderTest &b : backends_under_test()) {
        SECTION(b.name) {
            auto r = b.make(model, kCtx, pool);
            REQUIRE(r->n_ctx() == kCtx);
            REQUIRE(r->eval(tokens.data(), 20, 0, got.data(), true));
            check_close(want, got, b.tolerance, b.name + ": 20 rows of a prompt batch");
            for (int32_t i = 20; i < 24; ++i) {
                std::vector<float> step(static_cast<size_t>(n_vocab));
                REQUIRE(r->eval(tokens.data() + i, 1, i, step.data(), false));
                check_close(want_steps[size_t(i - 20)], step, b.tolerance, b.name + ": decode step at " + std::to_string(i));
            }
        }
    }
}

TEST_CASE("backend ops: a tree node's logits are decoding's bits, and a committed path is decoding's cache", "[backend-ops]") {
    const auto model = stories();
    const int32_t n_vocab = model->hparams().n_vocab;
    const std::vector<int32_t> tokens = prompt_tokens(*model, 16);
    ThreadPool pool(2);
    // A tree under the last prompt token: root, two children, a grandchild under each, one more under the first.
    DraftTree tree;
    tree.reset(tokens.back());
    const int32_t a = tree.add(0, 100), b = tree.add(0, 200);
    const int32_t a1 = tree.add(a, 101), b1 = tree.add(b, 201);
    const int32_t a2 = tree.add(a1, 102);
    std::vector<uint8_t> mask;
    tree.ancestor_mask(mask);
    const int32_t n_past = 15;
    std::vector<int32_t> positions(size_t(tree.size()));
    for (int32_t i = 0; i < tree.size(); ++i) positions[size_t(i)] = n_past + tree.depth(i);
    (void)b1;
    for (const BackendUnderTest &be : backends_under_test()) {
        SECTION(be.name) {
            auto r = be.make(model, kCtx, pool);
            std::vector<float> scratch(static_cast<size_t>(n_vocab));
            REQUIRE(r->eval(tokens.data(), n_past, 0, scratch.data(), false));
            std::vector<float> rows(size_t(tree.size()) * size_t(n_vocab));
            REQUIRE(r->eval_tree(tree.tokens().data(), tree.size(), n_past, 0, positions.data(), mask.data(), rows.data()));
            // Each node against decoding its path on a fresh runner of the same backend.
            for (int32_t node = 0; node < tree.size(); ++node) {
                auto plain = be.make(model, kCtx, pool);
                REQUIRE(plain->eval(tokens.data(), n_past, 0, scratch.data(), false));
                std::vector<int32_t> path;
                for (int32_t j = node; j >= 0; j = j == 0 ? -1 : tree.parent(j)) path.insert(path.begin(), tree.token(j));
                std::vector<float> want(static_cast<size_t>(n_vocab));
                for (size_t k = 0; k < path.size(); ++k) REQUIRE(plain->eval(&path[k], 1, n_past + int32_t(k), want.data(), false));
                const std::vector<float> got(rows.begin() + ptrdiff_t(node) * n_vocab, rows.begin() + ptrdiff_t(node + 1) * n_vocab);
                check_close(want, got, 0.0, be.name + ": tree node " + std::to_string(node) + " vs decoding its path");
            }
            // Commit root -> a -> a1 -> a2, then the next token's logits equal those after decoding that path.
            const int32_t nodes[4] = {0, a, a1, a2};
            r->commit_tree_path(n_past, nodes, 4);
            const int32_t next = 300;
            std::vector<float> after_commit(static_cast<size_t>(n_vocab)), after_decode(static_cast<size_t>(n_vocab));
            REQUIRE(r->eval(&next, 1, n_past + 4, after_commit.data(), false));
            auto plain = be.make(model, kCtx, pool);
            REQUIRE(plain->eval(tokens.data(), n_past, 0, scratch.data(), false));
            const int32_t path[4] = {tokens.back(), 100, 101, 102};
            REQUIRE(plain->eval(path, 4, n_past, scratch.data(), false));
            REQUIRE(plain->eval(&next, 1, n_past + 4, after_decode.data(), false));
            // A row's arithmetic does not depend on its batch on any backend: the path evaluated as one batch of
            // 4 leaves the rows a committed tree path leaves.
            check_close(after_decode, after_commit, 0.0, be.name + ": after commit_tree_path");
        }
    }
}

TEST_CASE("backend ops: KV rows read out and written into another runner continue bit-identically", "[backend-ops]") {
    const auto model = stories();
    const int32_t n_vocab = model->hparams().n_vocab;
    const std::vector<int32_t> tokens = prompt_tokens(*model, 33);
    ThreadPool pool(2);
    for (const BackendUnderTest &be : backends_under_test()) {
        SECTION(be.name) {
            auto a = be.make(model, kCtx, pool), b = be.make(model, kCtx, pool);
            std::vector<float> scratch(static_cast<size_t>(n_vocab)), want(static_cast<size_t>(n_vocab)), got(static_cast<size_t>(n_vocab));
            REQUIRE(a->eval(tokens.data(), 32, 0, scratch.data(), false));
            REQUIRE(a->kv_type() == b->kv_type());
            const size_t row_bytes = kv_row_bytes(a->kv_type(), a->kv_row_width());
            std::vector<uint8_t> rows(size_t(32) * row_bytes);
            for (int32_t layer = 0; layer < model->hparams().n_layer; ++layer)
                for (int kind = 0; kind < 2; ++kind) {
                    a->read_kv(layer, KvPart(kind), 0, 32, rows.data());
                    b->write_kv(layer, KvPart(kind), 0, 32, rows.data());
                }
            REQUIRE(a->eval(&tokens[32], 1, 32, want.data(), false));
            REQUIRE(b->eval(&tokens[32], 1, 32, got.data(), false));
            check_close(want, got, 0.0, be.name + ": decoding after the rows were copied");
        }
    }
}

TEST_CASE("backend ops: a context shift matches the CPU's", "[backend-ops]") {
    const auto model = stories();
    const int32_t n_vocab = model->hparams().n_vocab;
    const std::vector<int32_t> tokens = prompt_tokens(*model, 41);
    ThreadPool pool(2);
    CpuRunner ref(model, kCtx, pool);
    std::vector<float> scratch(static_cast<size_t>(n_vocab)), want(static_cast<size_t>(n_vocab)), got(static_cast<size_t>(n_vocab));
    REQUIRE(ref.eval(tokens.data(), 40, 0, scratch.data(), false));
    ref.shift_kv(4, 16, 40);
    REQUIRE(ref.eval(&tokens[40], 1, 24, want.data(), false));
    for (const BackendUnderTest &be : backends_under_test()) {
        SECTION(be.name) {
            auto r = be.make(model, kCtx, pool);
            REQUIRE(r->eval(tokens.data(), 40, 0, scratch.data(), false));
            r->shift_kv(4, 16, 40);
            REQUIRE(r->eval(&tokens[40], 1, 24, got.data(), false));
            check_close(want, got, be.tolerance, be.name + ": decoding after dropping 16 slots after 4");
        }
    }
}

TEST_CASE("backend ops: the backend's LongSpec drafter and its draft-model runner", "[backend-ops]") {
    const auto model = stories();
    const int32_t n_vocab = model->hparams().n_vocab;
    RandomDraftOptions opt;
    opt.window = 16;  // a 40-token context wraps the ring twice
    const auto draft = test_inputs::random_longspec_draft(model, opt, "backend-ops-draft");
    const std::vector<int32_t> context = prompt_tokens(*model, 41);
    ThreadPool pool(2);
    CpuRunner ref(model, kCtx, pool);
    std::vector<float> scratch(static_cast<size_t>(n_vocab)), want(static_cast<size_t>(n_vocab)), got(static_cast<size_t>(n_vocab));
    REQUIRE(ref.eval(context.data(), 40, 0, scratch.data(), false));
    DraftRequest request;
    request.tokens = context;
    request.n_target_kv = 40;
    REQUIRE(make_longspec_drafter(draft, 68, ref)->root_logits(request, want.data()));
    for (const BackendUnderTest &be : backends_under_test()) {
        SECTION(be.name) {
            auto r = be.make(model, kCtx, pool);
            REQUIRE(r->eval(context.data(), 40, 0, scratch.data(), false));
            auto drafter = make_longspec_drafter(draft, 68, *r);
            REQUIRE(drafter != nullptr);
            REQUIRE(drafter->root_logits(request, got.data()));
            // The draft layer reads the target's cache, F16 on every backend by default; GPU backends round their
            // own activations to F16 too (docs/cuda.md: 1e-2 of the CPU drafter's).
            check_close(want, got, be.tolerance == 0.0 ? 0.0 : 1e-2, be.name + ": the LongSpec draft's root logits");

            // A draft model's runner on this backend decodes as a fresh runner of the backend does.
            std::unique_ptr<TargetRunner> d = r->make_draft_runner(model, kCtx);
            if (d) {
                auto fresh = be.make(model, kCtx, pool);
                std::vector<float> dw(static_cast<size_t>(n_vocab)), fw(static_cast<size_t>(n_vocab));
                REQUIRE(d->eval(context.data(), 12, 0, dw.data(), false));
                REQUIRE(fresh->eval(context.data(), 12, 0, fw.data(), false));
                check_close(fw, dw, 0.0, be.name + ": the draft model's runner");
                CHECK(std::string(d->backend()) == r->backend());
            }
        }
    }
}

namespace {

// A synthetic model of a built-in shape (F32 weights, the bundled tokenizer), optionally changed first.
std::shared_ptr<const Model> synthetic(const std::string &shape_name, const std::function<void(SyntheticShape &)> &change = {}) {
    SyntheticShape shape = *find_synthetic_shape(shape_name);
    if (change) change(shape);
    const auto path = std::filesystem::temp_directory_path() / ("specula-arch-" + std::to_string(::getpid()) + "-" + shape_name + ".gguf");
    SyntheticOptions opt;
    opt.type = SyntheticType::F32;
    write_synthetic_model(shape, (std::filesystem::path(SPECULA_SOURCE_DIR) / "models/stories260K.gguf").string(), path.string(), opt);
    LoadOptions lo;
    lo.use_mmap = false;
    auto model = Model::load(path.string(), lo);
    std::filesystem::remove(path);
    return model;
}

// On every backend: a prompt's 20 rows of logits within the backend's tolerance of the CPU's, and a tree's nodes
// with decoding's logits bit for bit (the lossless invariant).
void check_on_every_backend(const std::shared_ptr<const Model> &model, const std::string &what, int32_t n_ctx = kCtx) {
    const int32_t n_vocab = model->hparams().n_vocab;
    std::vector<int32_t> tokens(24);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(3 + (i * 37) % size_t(n_vocab - 3));
    ThreadPool pool(2);
    CpuRunner ref(model, n_ctx, pool);
    std::vector<float> want(size_t(20) * size_t(n_vocab));
    REQUIRE(ref.eval(tokens.data(), 20, 0, want.data(), true));
    // A branch, and a path of 20 nodes: deeper than tiny-gemma's windows of 16, so its last nodes' sliding layers
    // see no committed key at all.
    DraftTree tree;
    tree.reset(tokens[20]);
    std::vector<int32_t> path = {tokens[20]}, nodes = {0};
    (void)tree.add(0, 200);
    for (int32_t k = 1; k < 20; ++k) {
        nodes.push_back(tree.add(nodes.back(), 99 + k));
        path.push_back(99 + k);
    }
    std::vector<uint8_t> mask;
    tree.ancestor_mask(mask);
    std::vector<int32_t> positions(size_t(tree.size()));
    for (int32_t i = 0; i < tree.size(); ++i) positions[size_t(i)] = 20 + tree.depth(i);
    for (const BackendUnderTest &be : backends_under_test()) {
        SECTION(be.name) {
            auto r = be.make(model, n_ctx, pool);
            std::vector<float> got(want.size());
            REQUIRE(r->eval(tokens.data(), 20, 0, got.data(), true));
            check_close(want, got, be.tolerance, be.name + ": 20 rows of " + what);
            std::vector<float> rows(size_t(tree.size()) * size_t(n_vocab));
            REQUIRE(r->eval_tree(tree.tokens().data(), tree.size(), 20, 0, positions.data(), mask.data(), rows.data()));
            auto dec = be.make(model, n_ctx, pool);
            std::vector<float> step(static_cast<size_t>(n_vocab));
            REQUIRE(dec->eval(tokens.data(), 20, 0, step.data(), false));
            for (size_t k = 0; k < path.size(); ++k) {
                REQUIRE(dec->eval(&path[k], 1, 20 + int32_t(k), step.data(), false));
                const std::vector<float> node(rows.begin() + ptrdiff_t(nodes[k]) * n_vocab, rows.begin() + ptrdiff_t(nodes[k] + 1) * n_vocab);
                check_close(step, node, 0.0, be.name + ": " + what + ", tree node " + std::to_string(nodes[k]) + " vs decoding its path");
            }
        }
    }
}

}  // namespace

TEST_CASE("backend ops: an architecture variant made of existing operations (llama with an output-projection bias) runs on "
          "every backend unchanged",
          "[backend-ops][graph]") {
    // The variant is bound by the core (model/weights.cpp: attn_output.bias, optional as in llama.cpp) and added by the
    // graph (graph/llama_graph.cpp); no backend file knows of it.
    const auto with_bias = synthetic("tiny-llama", [](SyntheticShape &s) { s.output_bias = true; });
    const auto without = synthetic("tiny-llama");
    REQUIRE(with_bias->weights().layers[0].bo);
    REQUIRE_FALSE(without->weights().layers[0].bo);
    const auto graph = build_model_graph(with_bias, 256);
    int32_t output_biases = 0;
    for (const Op &op : graph->stages[size_t(kBodyStage)])
        output_biases += op.kind == OpKind::AddBias && op.weight->data == with_bias->weights().layers[size_t(op.block)].bo.data;
    CHECK(output_biases == with_bias->hparams().n_layer);

    const int32_t n_vocab = with_bias->hparams().n_vocab;
    std::vector<int32_t> tokens(20);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(3 + (i * 37) % size_t(n_vocab - 3));
    ThreadPool pool(2);
    CpuRunner a(with_bias, kCtx, pool), b(without, kCtx, pool);
    std::vector<float> la(size_t(20) * size_t(n_vocab)), lb(la.size());
    REQUIRE(a.eval(tokens.data(), 20, 0, la.data(), true));
    REQUIRE(b.eval(tokens.data(), 20, 0, lb.data(), true));
    double moved = 0;
    for (size_t i = 0; i < la.size(); ++i) moved = std::max(moved, double(std::fabs(la[i] - lb[i])));
    INFO("the biases move the logits by up to " << moved);
    CHECK(moved > 1e-3);  // the bias is really applied
    check_on_every_backend(with_bias, "llama with output biases");
}

TEST_CASE("backend ops: qwen3 (per-head query and key norms, heads wider than n_embd / n_head, tied head) on every backend",
          "[backend-ops][graph][qwen3]") {
    const auto model = synthetic("tiny-qwen3");
    const HParams &hp = model->hparams();
    REQUIRE(hp.arch == Architecture::Qwen3);
    REQUIRE(hp.head_dim == 128);
    REQUIRE(hp.n_embd_q() != hp.n_embd);
    REQUIRE(model->weights().layers[0].q_norm);
    REQUIRE(model->weights().tied_output);
    int32_t head_norms = 0;
    const auto graph = build_model_graph(model, 256);
    for (const Op &op : graph->stages[size_t(kBodyStage)]) head_norms += op.kind == OpKind::RmsNorm && op.n_heads > 1;
    CHECK(head_norms == 2 * hp.n_layer);
    check_on_every_backend(model, "qwen3");
}

TEST_CASE("backend ops: gemma3 (sliding-window layers with their own RoPE, GeGLU, scaled embeddings, post-norms) on every "
          "backend",
          "[backend-ops][graph][gemma3]") {
    // tiny-gemma3: layers 0-4 and 6-7 local (a window of 16 positions, RoPE base 1e4), layer 5 global (base 1e6,
    // linear scaling x8). The checks' 20 prompt rows and the tree at position 20 cross the window.
    const auto model = synthetic("tiny-gemma3");
    const HParams &hp = model->hparams();
    REQUIRE(hp.arch == Architecture::Gemma3);
    REQUIRE(hp.n_swa == 16);
    REQUIRE(model->weights().layers[0].attn_post_norm);
    const auto graph = build_model_graph(model, 256);
    CHECK(graph->sliding_window == 16);
    CHECK(graph->hp_sliding.rope_freq_base == 10000.0f);
    CHECK(graph->hp.rope_freq_scale == 0.125f);
    int32_t sliding_attention = 0, sliding_rope = 0, geglu = 0, scale = 0;
    for (const Op &op : graph->stages[size_t(kBodyStage)]) {
        sliding_attention += op.kind == OpKind::Attention && op.sliding;
        sliding_rope += op.kind == OpKind::Rope && op.sliding;
        geglu += op.kind == OpKind::GeGlu;
        scale += op.kind == OpKind::Scale;
    }
    CHECK(sliding_attention == 7);
    CHECK(sliding_rope == 14);
    CHECK(geglu == hp.n_layer);
    CHECK(scale == 1);
    check_on_every_backend(model, "gemma3");
}

TEST_CASE("backend ops: gemma2 (alternating sliding-window layers, soft-capped scores and logits) on every backend",
          "[backend-ops][graph][gemma2]") {
    const auto model = synthetic("tiny-gemma2");
    const HParams &hp = model->hparams();
    REQUIRE(hp.arch == Architecture::Gemma2);
    REQUIRE(hp.n_swa == 16);
    CHECK(hp.attn_softcap == 0.15f);
    CHECK(hp.final_softcap == 0.5f);
    const auto graph = build_model_graph(model, 256);
    int32_t sliding = 0, capped = 0, softcaps = 0;
    for (const Op &op : graph->stages[size_t(kBodyStage)]) {
        sliding += op.kind == OpKind::Attention && op.sliding;
        capped += op.kind == OpKind::Attention && op.value == 0.15f;
    }
    for (const Op &op : graph->stages[size_t(kHeadStage)]) softcaps += op.kind == OpKind::SoftCap;
    CHECK(sliding == 2);  // layers 0 and 2
    CHECK(capped == 4);
    CHECK(softcaps == 1);
    CHECK(graph->hp_sliding.rope_freq_base == graph->hp.rope_freq_base);
    check_on_every_backend(model, "gemma2");
}

TEST_CASE("backend ops: phi3 (fused Q/K/V and gate/up matrices, a window on every layer, LongRoPE) and phi4-mini's partial "
          "rotation on every backend",
          "[backend-ops][graph][phi3]") {
    const auto model = synthetic("tiny-phi3");
    const HParams &hp = model->hparams();
    REQUIRE(hp.arch == Architecture::Phi3);
    REQUIRE(hp.n_swa == 16);
    CHECK(hp.rope_attn_factor > 1.1f);  // sqrt(1 + ln(4096 / 512) / ln(512))
    const ModelWeights &w = model->weights();
    // The fused matrices' rows, as views: Q, K, V one after another, the gate's rows before the up projection's.
    CHECK(w.layers[0].wk.data == w.layers[0].wq.data + size_t(hp.n_embd_q()) * w.layers[0].wq.row_bytes);
    CHECK(w.layers[0].ffn_up.data == w.layers[0].ffn_gate.data + size_t(hp.n_ff) * w.layers[0].ffn_gate.row_bytes);
    // The session's context picks LongRoPE's factors: short up to 512 positions, long past them.
    REQUIRE(!w.rope_freq_factors_long.empty());
    CHECK(build_model_graph(model, 512)->rope_freq_factors == w.rope_freq_factors);
    const auto graph = build_model_graph(model, 1024);
    CHECK(graph->rope_freq_factors == w.rope_freq_factors_long);
    int32_t sliding_attention = 0, sliding_rope = 0;
    for (const Op &op : graph->stages[size_t(kBodyStage)]) {
        sliding_attention += op.kind == OpKind::Attention && op.sliding;
        sliding_rope += op.kind == OpKind::Rope && op.sliding;
    }
    CHECK(sliding_attention == hp.n_layer);
    CHECK(sliding_rope == 0);  // rotated with the global settings, factors included
    CHECK_FALSE(graph->sliding_rope);
    check_on_every_backend(model, "phi3 (LongRoPE's long factors)", 1024);  // the short ones: the n-gram test below

    const auto mini = synthetic("tiny-phi4");
    REQUIRE(mini->hparams().rope_dim == 48);
    REQUIRE(mini->hparams().head_dim == 64);
    REQUIRE(mini->weights().tied_output);
    CHECK(mini->hparams().n_swa == 0);
    check_on_every_backend(mini, "phi4-mini's shape", 1024);
}

TEST_CASE("backend ops: starcoder2 (LayerNorms with biases, biases on every projection, a GELU MLP) on every backend",
          "[backend-ops][graph][starcoder2]") {
    const auto model = synthetic("tiny-starcoder2");
    const HParams &hp = model->hparams();
    REQUIRE(hp.arch == Architecture::Starcoder2);
    const ModelWeights &w = model->weights();
    REQUIRE(w.output_norm_b);
    REQUIRE(w.layers[0].attn_norm_b);
    REQUIRE(w.layers[0].bo);
    REQUIRE_FALSE(w.layers[0].ffn_gate);
    const auto graph = build_model_graph(model, kCtx);
    int32_t layer_norms = 0, gelus = 0, biases = 0;
    for (const Op &op : graph->stages[size_t(kBodyStage)]) {
        layer_norms += op.kind == OpKind::LayerNorm;
        gelus += op.kind == OpKind::Gelu;
        biases += op.kind == OpKind::AddBias;
    }
    CHECK(layer_norms == 2 * hp.n_layer + 1);
    CHECK(gelus == hp.n_layer);
    CHECK(biases == 8 * hp.n_layer + 1);  // two norms, Q, K, V, the output projection, up and down; the final norm
    check_on_every_backend(model, "starcoder2");
}

namespace {

// Speculative decoding stays lossless on every backend for the architectures beyond llama: greedy tokens with each
// drafter equal plain greedy's on that backend (the CPU's: tests/unit/test_architectures.cpp). The prompt repeats
// itself so that every drafter finds continuations; prompt and output cross tiny-gemma's windows of 16 many times.
void check_lossless_on_backends(const char *shape, int32_t n_tokens, bool every_drafter) {
    const auto model = synthetic(shape);
    std::vector<std::pair<std::string, SpeculativeConfig>> drafters(1);
    drafters[0].first = "n-grams";
    drafters[0].second.ngram = true;
    if (every_drafter) {
        // LongSpec's cross-attention reads all of the target's last layer, a sliding one in tiny-gemma3
        // (graph/longspec_graph.cpp); the draft model is one layer of the same family.
        RandomDraftOptions ro;
        ro.window = 16;
        ro.init_scale = 0.2f;
        drafters.emplace_back("LongSpec", SpeculativeConfig{});
        drafters.back().second.longspec = test_inputs::random_longspec_draft(model, ro, std::string("ops-") + shape);
        drafters.emplace_back("draft model", SpeculativeConfig{});
        drafters.back().second.draft_model = synthetic(shape, [](SyntheticShape &s) { s.n_layer = 1; });
    }
    std::vector<int32_t> prompt;
    for (int32_t i = 0; i < 12; ++i) prompt.push_back(3 + (i * 97) % 400);
    for (int r = 0; r < 2; ++r) prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 12);
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    for (const BackendUnderTest &be : backends_under_test()) {
        if (be.reference) continue;
        INFO(shape << " on " << be.name);
        SessionConfig sc;
        sc.n_ctx = 128;
        sc.n_threads = 2;
        sc.make_runner = be.make;
        Session plain(model, sc, greedy);
        const std::vector<int32_t> want = test_sessions::generate(plain, prompt, n_tokens);
        for (const auto &[name, spec] : drafters) {
            INFO(name);
            Session s(model, sc, greedy);
            s.set_speculative(spec);
            CHECK(test_sessions::generate(s, prompt, n_tokens) == want);
            CHECK(s.speculative_stats().drafted > 0);
        }
    }
}

}  // namespace

TEST_CASE("backend ops: greedy speculative decoding with n-grams equals plain greedy on every backend for gemma3, gemma2, phi3 "
          "and starcoder2",
          "[backend-ops][lossless][gemma3][gemma2][phi3][starcoder2]") {
    check_lossless_on_backends("tiny-gemma3", 24, false);
    check_lossless_on_backends("tiny-gemma2", 24, false);
    check_lossless_on_backends("tiny-phi3", 24, false);
    check_lossless_on_backends("tiny-starcoder2", 24, false);
}

// Mixtures of experts: route, expert_mat_mul (rows grouped by expert), mix_experts and sigmoid_gate on every backend;
// a tree path's nodes have decoding's bits.
TEST_CASE("backend ops: mixtures of experts (Mixtral, qwen2moe's shared expert, qwen3moe) on every backend", "[backend-ops][graph][moe]") {
    for (const char *shape : {"tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe"}) {
        const auto model = synthetic(shape);
        REQUIRE(model->hparams().is_moe());
        check_on_every_backend(model, shape);
    }
}

TEST_CASE("backend ops: greedy speculative decoding with n-grams equals plain greedy on every backend for the mixtures of experts",
          "[backend-ops][lossless][moe]") {
    check_lossless_on_backends("tiny-qwen3moe", 24, false);
    check_lossless_on_backends("tiny-mixtral", 24, false);
}

// Every drafter and more tokens: ~10 minutes on the CUDA emulator, so not registered with ctest
// (`specula_backend_ops_tests "[slow]"` runs it).
TEST_CASE("backend ops: greedy speculative decoding with every drafter equals plain greedy on every backend for qwen3, gemma3, "
          "gemma2, phi3, starcoder2 and the mixtures of experts",
          "[backend-ops][lossless][slow]") {
    for (const char *shape : {"tiny-qwen3", "tiny-gemma3", "tiny-gemma2", "tiny-phi3", "tiny-starcoder2", "tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe"})
        check_lossless_on_backends(shape, 48, true);
}

TEST_CASE("backend ops: a wide tree (48 nodes, 4 children each) at position 60 has decoding's bits on every backend "
          "(gemma3)",
          "[backend-ops][graph]") {
    // Many rows over many keys: on llvmpipe (Vulkan on the CPU), attention's workgroups once ran past the driver's
    // silent limit of 65535 loop iterations, and a 40-node tree's last rows lost keys (vulkan_ops.cpp: the budget;
    // qwen3 and gemma2 lost them too). The last 12 rows' paths are decoded (the CUDA emulator is slow).
    const std::string shape = "tiny-gemma3";
    const auto model = synthetic(shape);
    const int32_t n_vocab = model->hparams().n_vocab, n_past = 60, n_nodes = 48;
    std::vector<int32_t> tokens(size_t(n_past) + 1);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(3 + (i * 37) % size_t(n_vocab - 3));
    ThreadPool pool(2);
    DraftTree tree;
    tree.reset(tokens[size_t(n_past)]);
    std::vector<bool> leaf(size_t(n_nodes), true);
    for (int32_t k = 1; k < n_nodes; ++k) {
        tree.add((k - 1) / 4, 50 + k);
        leaf[size_t((k - 1) / 4)] = false;
    }
    std::vector<uint8_t> mask;
    tree.ancestor_mask(mask);
    std::vector<int32_t> positions(size_t(tree.size()));
    for (int32_t i = 0; i < tree.size(); ++i) positions[size_t(i)] = n_past + tree.depth(i);
    for (const BackendUnderTest &be : backends_under_test()) {
        if (be.reference) continue;
        SECTION(shape + " on " + be.name) {
            auto r = be.make(model, kCtx, pool);
            std::vector<float> step(static_cast<size_t>(n_vocab));
            REQUIRE(r->eval(tokens.data(), n_past, 0, step.data(), false));
            std::vector<float> rows(size_t(tree.size()) * size_t(n_vocab));
            REQUIRE(r->eval_tree(tree.tokens().data(), tree.size(), n_past, 0, positions.data(), mask.data(), rows.data()));
            // Each leaf's path decoded from n_past on one runner (a path rewrites the slots the last one used).
            auto dec = be.make(model, kCtx, pool);
            REQUIRE(dec->eval(tokens.data(), n_past, 0, step.data(), false));
            std::vector<bool> seen(size_t(n_nodes), false);
            for (int32_t node = n_nodes - 12; node < n_nodes; ++node) {
                REQUIRE(leaf[size_t(node)]);
                std::vector<int32_t> path;
                for (int32_t j = node; j >= 0; j = j == 0 ? -1 : tree.parent(j)) path.insert(path.begin(), j);
                for (size_t k = 0; k < path.size(); ++k) {
                    const int32_t id = path[k], token = tree.token(id);
                    REQUIRE(dec->eval(&token, 1, n_past + int32_t(k), step.data(), false));
                    if (seen[size_t(id)]) continue;
                    seen[size_t(id)] = true;
                    const std::vector<float> got(rows.begin() + ptrdiff_t(id) * n_vocab, rows.begin() + ptrdiff_t(id + 1) * n_vocab);
                    check_close(step, got, 0.0, be.name + ": " + shape + ", tree node " + std::to_string(id) + " vs decoding its path");
                }
            }
        }
    }
}
