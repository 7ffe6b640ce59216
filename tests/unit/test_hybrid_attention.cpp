// Hybrid tree attention (prefix part + masked tree part, merged by log-sum-exp) must equal plain masked
// attention over the whole sequence: the identity LongSpec's verification relies on.
#include "backends/cpu/hybrid_attention.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

using namespace specula::internal;

namespace {

// Naive: softmax over all visible keys of the full sequence, with a max-subtracted double-precision sum.
void naive_attention(const float *q, int hd, float scale, const float *k, const float *v, size_t stride,
                     const std::vector<uint8_t> &visible, float *out) {
    std::vector<double> s(visible.size());
    double m = -INFINITY;
    for (size_t t = 0; t < visible.size(); ++t) {
        if (!visible[t]) continue;
        double dot = 0;
        for (int j = 0; j < hd; ++j) dot += double(q[j]) * double(k[t * stride + size_t(j)]);
        s[t] = dot * scale;
        m = std::max(m, s[t]);
    }
    double sum = 0;
    std::vector<double> acc(size_t(hd), 0.0);
    for (size_t t = 0; t < visible.size(); ++t) {
        if (!visible[t]) continue;
        const double w = std::exp(s[t] - m);
        sum += w;
        for (int j = 0; j < hd; ++j) acc[size_t(j)] += w * double(v[t * stride + size_t(j)]);
    }
    for (int j = 0; j < hd; ++j) out[j] = sum > 0 ? float(acc[size_t(j)] / sum) : 0.0f;
}

}  // namespace

TEST_CASE("hybrid tree attention equals naive masked attention over the full sequence", "[speculative][attention]") {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> coin(0, 2);
    struct Case {
        int n_prefix, n_tree, hd, n_head, n_head_kv;
    };
    // GQA, odd sizes, an empty prefix, a prefix longer than one softmax block, a one-node tree.
    const Case cases[] = {{0, 5, 8, 4, 2}, {1, 1, 3, 3, 1}, {37, 9, 7, 6, 3}, {130, 17, 16, 8, 2}, {200, 69, 64, 4, 4}};
    for (const Case &c : cases) {
        const int dkv = c.n_head_kv * c.hd, n_keys = c.n_prefix + c.n_tree, group = c.n_head / c.n_head_kv;
        std::vector<float> k(size_t(n_keys * dkv)), v(k.size()), q(size_t(c.n_tree * c.n_head * c.hd));
        for (float &x : k) x = normal(rng);
        for (float &x : v) x = normal(rng);
        for (float &x : q) x = 2.0f * normal(rng);
        // Tree mask: a random forest over the tree rows (each row sees itself and random earlier rows), plus
        // some rows that see no tree key at all (the all-masked case).
        std::vector<uint8_t> tree_mask(size_t(c.n_tree * c.n_tree), 0);
        for (int i = 0; i < c.n_tree; ++i) {
            if (c.n_prefix > 0 && i % 4 == 3) continue;  // all-masked tree row (the prefix still has keys)
            tree_mask[size_t(i * c.n_tree + i)] = 1;
            for (int j = 0; j < i; ++j) tree_mask[size_t(i * c.n_tree + j)] = coin(rng) == 0;
        }
        const float scale = 1.0f / std::sqrt(float(c.hd));
        std::vector<float> hybrid(size_t(c.hd)), tree_part(size_t(c.hd)), expected(size_t(c.hd));
        for (int i = 0; i < c.n_tree; ++i)
            for (int h = 0; h < c.n_head; ++h) {
                const int kvh = h / group;
                const float *qv = q.data() + (i * c.n_head + h) * c.hd;
                const float *kb = k.data() + kvh * c.hd, *vb = v.data() + kvh * c.hd;
                const float l1 = attend_with_lse(qv, c.hd, scale, kb, vb, size_t(dkv), c.n_prefix, nullptr, hybrid.data());
                const float l2 = attend_with_lse(qv, c.hd, scale, kb + size_t(c.n_prefix * dkv), vb + size_t(c.n_prefix * dkv), size_t(dkv),
                                                 c.n_tree, tree_mask.data() + i * c.n_tree, tree_part.data());
                merge_attention(hybrid.data(), l1, tree_part.data(), l2, c.hd);

                std::vector<uint8_t> visible(size_t(n_keys), 0);
                for (int t = 0; t < c.n_prefix; ++t) visible[size_t(t)] = 1;
                for (int j = 0; j < c.n_tree; ++j) visible[size_t(c.n_prefix + j)] = tree_mask[size_t(i * c.n_tree + j)];
                naive_attention(qv, c.hd, scale, kb, vb, size_t(dkv), visible, expected.data());
                for (int j = 0; j < c.hd; ++j) {
                    INFO("case prefix " << c.n_prefix << " tree " << c.n_tree << " hd " << c.hd << " row " << i << " head " << h);
                    REQUIRE(hybrid[size_t(j)] == Approx(expected[size_t(j)]).margin(2e-5).epsilon(1e-4));
                }
            }
    }
}

TEST_CASE("attention with no visible key returns minus infinity and zeros, and merging it is a no-op", "[speculative][attention]") {
    const float q[2] = {1, 2}, k[4] = {1, 0, 0, 1}, v[4] = {3, 4, 5, 6};
    const uint8_t none[2] = {0, 0};
    float out[2] = {9, 9};
    CHECK(attend_with_lse(q, 2, 1.0f, k, v, 2, 2, none, out) == -INFINITY);
    CHECK(out[0] == 0.0f);
    CHECK(out[1] == 0.0f);
    float full[2];
    const float lse = attend_with_lse(q, 2, 1.0f, k, v, 2, 2, nullptr, full);
    CHECK(lse == Approx(std::log(std::exp(1.0) + std::exp(2.0))));
    float merged[2] = {full[0], full[1]};
    CHECK(merge_attention(merged, lse, out, -INFINITY, 2) == lse);
    CHECK(merged[0] == full[0]);
    float from_empty[2] = {0, 0};
    CHECK(merge_attention(from_empty, -INFINITY, full, lse, 2) == lse);
    CHECK(from_empty[1] == full[1]);
}
