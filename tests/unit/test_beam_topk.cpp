// build_beam_tree's candidate path (ScoreTopkFn: the scorer returns each row's k best log-probs, as the CUDA
// LongSpec drafter does from the device) builds the tree the full-logits path builds from the same log-probs, and
// is used only when nothing needs the full rows.
#include "sampling/sampler.h"
#include "speculative/beam_tree.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace specula::internal;

namespace {

constexpr int32_t kVocab = 50;

// Logits that depend on the node's token only; with ties (values on a 0.5 grid) so that the tie rules matter.
std::vector<float> make_table(uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(-8, 8);
    std::vector<float> t(size_t(kVocab) * kVocab);
    for (float &x : t) x = 0.5f * float(d(rng));
    return t;
}

void full_row(const std::vector<float> &table, int32_t token, float *out) {
    std::copy(table.begin() + ptrdiff_t(token) * kVocab, table.begin() + ptrdiff_t(token + 1) * kVocab, out);
}

// beam_tree.cpp's log_softmax, then the k best by (logp desc, id asc): what a device scorer returns.
void topk_row(const std::vector<float> &table, int32_t token, int32_t k, float *logp, int32_t *ids) {
    std::vector<float> x(static_cast<size_t>(kVocab));
    full_row(table, token, x.data());
    float max = -INFINITY;
    for (float v : x) max = std::max(max, v);
    double sum = 0;
    for (float v : x) sum += std::exp(double(v - max));
    const float lse = max + float(std::log(sum));
    for (float &v : x) v -= lse;
    std::vector<int32_t> order(static_cast<size_t>(kVocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[size_t(a)] > x[size_t(b)]; });
    for (int32_t i = 0; i < k; ++i) {
        logp[i] = x[size_t(order[size_t(i)])];
        ids[i] = order[size_t(i)];
    }
}

}  // namespace

TEST_CASE("beam tree from per-row candidates equals the tree from full logits", "[speculative]") {
    for (uint32_t seed : {1u, 2u, 3u}) {
        const std::vector<float> table = make_table(seed);
        for (const TreeShape &shape : {TreeShape{}, TreeShape{{2, 2, 2, 2, 2, 2}}, TreeShape{{32, 8}}, TreeShape::chain(5), TreeShape{{60, 3}}}) {
            DraftRequest req;
            const std::vector<int32_t> ctx = {int32_t(seed)};
            req.tokens = ctx;
            req.shape = shape;
            req.node_budget = 69;
            int full_calls = 0, topk_calls = 0;
            const ScoreLevelFn full = [&](const DraftTree &t, int32_t first, int32_t count, float *logits) {
                ++full_calls;
                for (int32_t i = 0; i < count; ++i) full_row(table, t.token(first + i), logits + size_t(i) * kVocab);
            };
            const ScoreTopkFn topk = [&](const DraftTree &t, int32_t first, int32_t count, int32_t k, float *logp, int32_t *ids) {
                ++topk_calls;
                for (int32_t i = 0; i < count; ++i) topk_row(table, t.token(first + i), k, logp + size_t(i) * k, ids + size_t(i) * k);
                return true;
            };
            DraftTree a, b;
            a.reset(ctx[0]);
            b.reset(ctx[0]);
            build_beam_tree(req, a, kVocab, kVocab, kVocab, full);
            const int levels = full_calls;
            full_calls = 0;
            build_beam_tree(req, b, kVocab, kVocab, kVocab, full, topk);
            INFO("seed " << seed << ", shape " << shape.to_string());
            CHECK(full_calls == 0);
            CHECK(topk_calls == levels);
            CHECK(a.tokens() == b.tokens());
            REQUIRE(a.size() == b.size());
            for (int32_t n = 1; n < a.size(); ++n) CHECK(a.parent(n) == b.parent(n));
        }
    }
}

TEST_CASE("beam tree scores full logits when a penalty or a sampled chain needs them, or the scorer declines", "[speculative]") {
    const std::vector<float> table = make_table(7);
    DraftRequest req;
    const std::vector<int32_t> ctx = {3};
    req.tokens = ctx;
    req.shape = TreeShape{};
    req.node_budget = 69;
    int full_calls = 0, topk_calls = 0;
    const ScoreLevelFn full = [&](const DraftTree &t, int32_t first, int32_t count, float *logits) {
        ++full_calls;
        for (int32_t i = 0; i < count; ++i) full_row(table, t.token(first + i), logits + size_t(i) * kVocab);
    };
    bool accept = false;
    const ScoreTopkFn topk = [&](const DraftTree &t, int32_t first, int32_t count, int32_t k, float *logp, int32_t *ids) {
        ++topk_calls;
        if (!accept) return false;
        for (int32_t i = 0; i < count; ++i) topk_row(table, t.token(first + i), k, logp + size_t(i) * k, ids + size_t(i) * k);
        return true;
    };
    DraftTree reference, tree;
    reference.reset(3);
    build_beam_tree(req, reference, kVocab, kVocab, kVocab, full);
    // Declined: every level falls back to the full rows, same tree.
    full_calls = 0;
    tree.reset(3);
    build_beam_tree(req, tree, kVocab, kVocab, kVocab, full, topk);
    CHECK(topk_calls == full_calls);
    CHECK(full_calls > 0);
    CHECK(tree.tokens() == reference.tokens());
    // A contextual penalty acts on the full rows: the candidate scorer is not asked.
    accept = true;
    topk_calls = full_calls = 0;
    int penalised = 0;
    req.process_logits = [&](float *, std::span<const int32_t>) { ++penalised; };
    tree.reset(3);
    build_beam_tree(req, tree, kVocab, kVocab, kVocab, full, topk);
    CHECK(topk_calls == 0);
    CHECK(full_calls > 0);
    CHECK(penalised > 0);
    CHECK(tree.tokens() == reference.tokens());
    // A sampled chain draws from the full distribution.
    req.process_logits = nullptr;
    req.shape = TreeShape::chain(3);
    SamplerConfig sc;
    sc.temperature = 0.8f;
    sc.seed = 5;
    Sampler sampler(sc);
    req.sampler = &sampler;
    topk_calls = full_calls = 0;
    tree.reset(3);
    build_beam_tree(req, tree, kVocab, kVocab, kVocab, full, topk);
    CHECK(topk_calls == 0);
    CHECK(full_calls == 3);
    CHECK(tree.size() == 4);
}

TEST_CASE("beam tree: each node's first child is the draft's best token there, the one a chain drafts", "[speculative]") {
    // --tree auto reads a tree's greedy path (DraftTree::first_child from the root) as the chain the draft would
    // have drafted at that root (TreeTuner::record_greedy_path).
    for (uint32_t seed : {4u, 5u, 6u}) {
        const std::vector<float> table = make_table(seed);
        for (const TreeShape &shape : {TreeShape{{2, 2, 2, 2, 2, 2}}, TreeShape{{4, 4, 4, 4}}, TreeShape{{32, 8}}, TreeShape{{60, 3}}}) {
            DraftRequest req;
            const std::vector<int32_t> ctx = {int32_t(seed)};
            req.tokens = ctx;
            req.shape = shape;
            req.node_budget = 69;
            const ScoreLevelFn full = [&](const DraftTree &t, int32_t first, int32_t count, float *logits) {
                for (int32_t i = 0; i < count; ++i) full_row(table, t.token(first + i), logits + size_t(i) * kVocab);
            };
            DraftTree tree, chain;
            tree.reset(ctx[0]);
            build_beam_tree(req, tree, kVocab, kVocab, kVocab, full);
            INFO("seed " << seed << ", shape " << shape.to_string());
            for (int32_t n = 0; n < tree.size(); ++n) {
                if (tree.is_leaf(n)) continue;
                float logp[1];
                int32_t best[1];
                topk_row(table, tree.token(n), 1, logp, best);
                CHECK(tree.token(tree.first_child(n)) == best[0]);
            }
            // The path of first children is the chain's prefix.
            chain.reset(ctx[0]);
            req.shape = TreeShape::chain(shape.depth());
            build_beam_tree(req, chain, kVocab, kVocab, kVocab, full);
            int32_t depth = 0;
            for (int32_t node = tree.first_child(0); node >= 0; node = tree.first_child(node)) {
                ++depth;
                REQUIRE(depth < chain.size());
                CHECK(tree.token(node) == chain.token(depth));
            }
            CHECK(depth >= 1);
        }
    }
}
