// The pieces of speculative decoding on their own: tree bookkeeping, beam search, the verifier's rules on
// hand-made distributions, the two tree-attention modes on a real model, and the LongSpec draft's memory.
#include "backend/kv_rows.h"
#include "backends/cpu/cpu_runner.h"
#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"
#include "common/fixture_files.h"
#include "common/test_inputs.h"
#include "core/error.h"
#include "speculative/beam_tree.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"
#include "speculative/verifier.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

using namespace specula::internal;

TEST_CASE("draft tree keeps children unique and builds ancestor masks", "[speculative]") {
    DraftTree t;
    t.reset(7);
    const int32_t a = t.add(0, 1), b = t.add(0, 2), c = t.add(a, 3);
    CHECK(t.add(0, 1) == a);  // no duplicate child
    CHECK(t.size() == 4);
    CHECK(t.depth(c) == 2);
    CHECK(t.max_depth() == 2);
    CHECK(t.find_child(0, 2) == b);
    CHECK(t.find_child(b, 3) == -1);
    std::vector<uint8_t> m;
    t.ancestor_mask(m);
    const std::vector<uint8_t> expected = {1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1};
    CHECK(m == expected);
    t.ancestor_mask_rows(2, 2, m);  // rows of nodes 2..3 over columns 0..3
    CHECK(m == std::vector<uint8_t>(expected.begin() + 8, expected.end()));
}

TEST_CASE("tree shapes parse and reject bad input", "[speculative]") {
    CHECK(TreeShape::parse("4,16,16,16,16").max_nodes() == 68);
    CHECK(TreeShape::parse("1,1,1").is_chain());
    CHECK(TreeShape::parse("32,8").to_string() == "32,8");
    for (const char *bad : {"", "0", "4,,4", "4,x", "300", "-1", "4,"}) CHECK_THROWS_AS(TreeShape::parse(bad), Error);
}

TEST_CASE("beam tree keeps the globally best cumulative log-probabilities per level", "[speculative]") {
    // Vocabulary of 4; the scorer's logits depend only on the node's token, so cumulative scores are known.
    const float table[4][4] = {{0, 0, 0, 0}, {5, 1, 0, -2}, {0, 0, 3, 0}, {1, 1, 1, 1}};
    DraftRequest req;
    std::vector<int32_t> ctx = {3};
    req.tokens = ctx;
    req.shape = TreeShape{{2, 2}};
    req.node_budget = 100;
    DraftTree tree;
    tree.reset(3);
    build_beam_tree(req, tree, 4, 4, 4, [&](const DraftTree &t, int32_t first, int32_t count, float *logits) {
        for (int32_t i = 0; i < count; ++i) std::copy(table[t.token(first + i)], table[t.token(first + i)] + 4, logits + i * 4);
    });
    // Level 1 under token 3 (uniform): ties -> the lowest ids 0 and 1. Level 2: children of 0 are uniform
    // (log 1/4 each); token 1 strongly prefers 0: its best child beats all of 0's, its second (1) does not
    // beat 0's best (tie broken by parent order), so the level holds (1 -> 0) and (0 -> 0).
    REQUIRE(tree.size() == 5);
    CHECK(tree.token(1) == 0);
    CHECK(tree.token(2) == 1);
    CHECK(tree.parent(3) == 1);
    CHECK(tree.token(3) == 0);
    CHECK(tree.parent(4) == 2);
    CHECK(tree.token(4) == 0);
    // The node budget is exact.
    req.node_budget = 4;
    tree.reset(3);
    build_beam_tree(req, tree, 4, 4, 4, [&](const DraftTree &t, int32_t first, int32_t count, float *logits) {
        for (int32_t i = 0; i < count; ++i) std::copy(table[t.token(first + i)], table[t.token(first + i)] + 4, logits + i * 4);
    });
    CHECK(tree.size() == 4);
}

TEST_CASE("greedy verification accepts the deepest path matching the target argmax", "[speculative]") {
    // Vocabulary 3. Tree: root -> {1 (node 1), 2 (node 2)}, node 1 -> {0 (node 3)}.
    DraftTree t;
    t.reset(0);
    t.add(0, 1);
    t.add(0, 2);
    t.add(1, 0);
    // Target argmax: after root 1, after node 1 -> 0, after node 3 -> 2.
    const std::vector<float> logits = {0, 5, 1, /*n1*/ 9, 0, 0, /*n2*/ 0, 0, 0, /*n3*/ 0, 1, 7};
    SamplerConfig greedy;
    greedy.temperature = 0;
    Sampler s(greedy);
    std::vector<int32_t> history = {0};
    const VerifyOutcome o = verify_tree(t, logits.data(), 3, s, history);
    CHECK(o.path == std::vector<int32_t>{1, 3});
    CHECK(o.bonus == 2);
    CHECK(history == std::vector<int32_t>{0});  // restored
}

TEST_CASE("the Leviathan rule accepts with min(1, p over q) and resamples from the residual", "[speculative]") {
    // Target p over 3 tokens (T = 1, no truncation); draft q. Empirical output frequencies must match p.
    const float logits_root[3] = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    const std::vector<float> q = {0.1f, 0.6f, 0.3f};
    SamplerConfig c;
    c.temperature = 1;
    c.top_k = 0;
    c.top_p = 1;
    c.min_p = 0;
    c.seed = 42;
    Sampler s(c);
    std::mt19937_64 draft_rng(5);
    std::vector<int> counts(3, 0);
    const int n = 200000;
    std::vector<float> logits(6, 0.0f);
    std::copy(logits_root, logits_root + 3, logits.begin());
    for (int i = 0; i < n; ++i) {
        const double u = double(draft_rng() >> 11) * 0x1.0p-53;
        const int32_t drafted = u < 0.1 ? 0 : (u < 0.7 ? 1 : 2);
        DraftTree t;
        t.reset(0);
        t.add(0, drafted);
        t.set_child_distribution(0, q);
        std::vector<int32_t> history = {0};
        const VerifyOutcome o = verify_tree(t, logits.data(), 3, s, history);
        ++counts[size_t(o.path.empty() ? o.bonus : drafted)];
    }
    for (int k = 0; k < 3; ++k) CHECK(double(counts[size_t(k)]) / n == Approx(std::exp(logits_root[k])).margin(0.005));
}

TEST_CASE("tree verification logits are bit-identical to plain decoding of each path, for every KV type", "[speculative][attention]") {
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = Model::load(path.string(), LoadOptions{});
    const int32_t n_vocab = model->hparams().n_vocab;
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time, there was a little dog", true, false);
    DraftTree t;
    t.reset(prompt.back());
    const int32_t a = t.add(0, 100), b = t.add(0, 200);
    t.add(a, 300);
    t.add(b, 301);
    t.add(4, 17);
    std::vector<uint8_t> mask;
    t.ancestor_mask(mask);
    std::vector<int32_t> pos(size_t(t.size()));
    const int32_t n_past = int32_t(prompt.size()) - 1;
    for (int32_t i = 0; i < t.size(); ++i) pos[size_t(i)] = n_past + t.depth(i);
    const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::Q8_0);
    CAPTURE(kv_type_name(type));
    std::vector<float> exact(size_t(t.size() * n_vocab)), ar(static_cast<size_t>(n_vocab));
    {
        CpuRunner r(model, 128, 2, type);
        r.eval(prompt.data(), n_past, 0, ar.data(), false);
        r.eval_tree(t.tokens().data(), t.size(), n_past, 0, pos.data(), mask.data(), exact.data());
    }
    // Every node is bit-identical to plain decoding of its path.
    for (int32_t node = 0; node < t.size(); ++node) {
        std::vector<int32_t> seq(prompt.begin(), prompt.end() - 1);
        std::vector<int32_t> path;
        for (int32_t j = node; j >= 0; j = t.parent(j)) path.insert(path.begin(), t.token(j));
        seq.insert(seq.end(), path.begin(), path.end());
        CpuRunner r(model, 128, 2, type);
        for (size_t i = 0; i < seq.size(); ++i) r.eval(&seq[i], 1, int32_t(i), ar.data(), false);
        for (int32_t v = 0; v < n_vocab; ++v) REQUIRE(ar[size_t(v)] == exact[size_t(node * n_vocab + v)]);
    }
}

namespace {

// Slots [0, n) of the target cache's last layer filled with small values: what the draft's cross-attention reads.
void fill_last_layer(CpuRunner &runner, const HParams &hp, int32_t n, std::mt19937 &rng) {
    std::uniform_int_distribution<int32_t> tok(3, hp.n_vocab - 1);
    std::vector<float> k_row(size_t(hp.n_embd_kv())), v_row(k_row.size());
    std::vector<uint8_t> k_bytes(kv_row_bytes(runner.kv_type(), hp.n_embd_kv())), v_bytes(k_bytes.size());
    for (int32_t slot = 0; slot < n; ++slot) {
        for (int32_t j = 0; j < hp.n_embd_kv(); ++j) {
            k_row[size_t(j)] = float(tok(rng) % 7) * 0.1f;
            v_row[size_t(j)] = float(tok(rng) % 5) * 0.1f;
        }
        kv_store_row(runner.kv_type(), k_row.data(), hp.n_embd_kv(), k_bytes.data());
        kv_store_row(runner.kv_type(), v_row.data(), hp.n_embd_kv(), v_bytes.data());
        runner.write_kv(hp.n_layer - 1, KvPart::Keys, slot, 1, k_bytes.data());
        runner.write_kv(hp.n_layer - 1, KvPart::Values, slot, 1, v_bytes.data());
    }
}

}  // namespace

TEST_CASE("the LongSpec draft allocates the same bytes at context 1K and 64K", "[speculative][memory]") {
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = Model::load(path.string(), LoadOptions{});
    RandomDraftOptions opt;
    opt.window = 64;
    const auto draft = test_inputs::random_longspec_draft(model, opt, "memory");
    const HParams &hp = model->hparams();
    std::mt19937 rng(1);
    std::uniform_int_distribution<int32_t> tok(3, hp.n_vocab - 1);
    size_t bytes[2] = {0, 0};
    const int32_t contexts[2] = {1024, 65536};
    for (int c = 0; c < 2; ++c) {
        // A target cache of this context length filled with values (what the draft's cross-attention reads).
        ThreadPool pool(2);
        CpuRunner runner(model, contexts[c], pool);
        fill_last_layer(runner, hp, contexts[c], rng);
        std::vector<int32_t> tokens(static_cast<size_t>(contexts[c]));
        for (int32_t &x : tokens) x = tok(rng);
        auto drafter = make_longspec_drafter(draft, 68, runner);
        DraftRequest req;
        req.node_budget = 69;
        DraftTree tree;
        for (int round = 0; round < 3; ++round) {  // a few rounds as the context grows
            const size_t n = tokens.size() - size_t(2 - round);
            req.tokens = std::span<const int32_t>(tokens.data(), n);
            req.n_target_kv = int32_t(n) - 1;
            tree.reset(tokens[n - 1]);
            drafter->draft(req, tree);
            CHECK(tree.size() == 69);
        }
        bytes[c] = drafter->allocated_bytes();
    }
    INFO("draft bytes at 1K: " << bytes[0] << ", at 64K: " << bytes[1]);
    CHECK(bytes[0] == bytes[1]);
    CHECK(bytes[0] > 0);
}

TEST_CASE("the LongSpec drafter's prefill writes the ring its first round would, and reports what it wrote", "[speculative]") {
    // Session::evaluate_pending calls prefill() at prompt processing (and after set_speculative on an evaluated
    // context, or a restore), so that the first round does not pay for the prompt. Drafting after it must see the
    // same ring: the same root logits, bit for bit, as a drafter that caught up in its round.
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = Model::load(path.string(), LoadOptions{});
    RandomDraftOptions opt;
    opt.window = 64;
    const auto draft = test_inputs::random_longspec_draft(model, opt, "prefill");
    const HParams &hp = model->hparams();
    ThreadPool pool(2);
    CpuRunner runner(model, 512, pool);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> tok(3, hp.n_vocab - 1);
    fill_last_layer(runner, hp, 512, rng);
    std::vector<int32_t> tokens(300);
    for (int32_t &x : tokens) x = tok(rng);
    auto prefilled = make_longspec_drafter(draft, 16, runner), lazy = make_longspec_drafter(draft, 16, runner);
    CHECK(prefilled->catch_up_bound() == 65);
    CHECK(prefilled->prefill(std::span<const int32_t>(tokens.data(), 299)) == 65);  // the ring, not 299 tokens
    CHECK(prefilled->prefill(std::span<const int32_t>(tokens.data(), 299)) == 0);   // nothing new
    DraftRequest req;
    req.tokens = tokens;
    req.n_target_kv = 299;
    req.node_budget = 17;
    std::vector<float> a(size_t(hp.n_vocab)), b(a.size());
    REQUIRE(prefilled->root_logits(req, a.data()));
    REQUIRE(lazy->root_logits(req, b.data()));
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}
