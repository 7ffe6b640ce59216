// The plan a device verifier gets (speculative/tree_sampling_plan.h) describes the host verifier exactly: each
// node's edits, applied to a row by the formulas of backends/cuda/kernels/sampling.h, followed by the rest of the
// chain, give the very distribution Sampler::distribution() gives with the node's real history; the keys are
// those the host verifier would draw with; the plan refuses what only the host can verify.
#include "sampling/sampler.h"
#include "speculative/draft_tree.h"
#include "speculative/tree_sampling_plan.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace specula::internal;

namespace {

// A random tree of up to `max_nodes` nodes (parents before children, distinct sibling tokens).
DraftTree random_tree(std::mt19937 &rng, int32_t root, int32_t n_vocab, int32_t max_nodes) {
    DraftTree tree;
    tree.reset(root);
    std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
    for (int32_t i = 1; i < max_nodes; ++i) {
        std::uniform_int_distribution<int32_t> par(0, tree.size() - 1);
        tree.add(par(rng), tok(rng));  // an existing child is returned again: fewer nodes, still a tree
    }
    return tree;
}

// The node's history as the host verifier has it when it samples there: the context, then the path to the node.
std::vector<int32_t> history_of(const DraftTree &tree, const std::vector<int32_t> &context, int32_t node) {
    std::vector<int32_t> path;
    for (int32_t a = node; a > 0; a = tree.parent(a)) path.push_back(tree.token(a));
    std::vector<int32_t> h = context;
    h.insert(h.end(), path.rbegin(), path.rend());
    return h;
}

// The device's edit formulas (kernels/sampling.h) on a dense row.
std::vector<float> apply_edits(const TreeSamplingPlan &plan, int32_t node, const std::vector<float> &row) {
    std::vector<float> out = row;
    for (int32_t e = plan.edit_first[size_t(node)]; e < plan.edit_first[size_t(node) + 1]; ++e) {
        float &x = out[size_t(plan.edit_ids[size_t(e)])];
        if (plan.penalties && plan.edit_counts[size_t(e)] > 0) {
            x = x <= 0 ? x * plan.repeat : x / plan.repeat;
            const float f = float(plan.edit_counts[size_t(e)]) * plan.frequency;
            x -= f + plan.presence;
        }
        if (plan.contextual && plan.edit_in_context[size_t(e)]) x = x < 0 ? x * plan.theta : x / plan.theta;
    }
    return out;
}

}  // namespace

TEST_CASE("tree sampling plan: each node's edits and the chain give the host sampler's distribution", "[speculative][plan]") {
    const int32_t n_vocab = 97;
    std::mt19937 rng(7);
    std::normal_distribution<float> logit(0.0f, 2.0f);
    struct Setup {
        float temperature;
        int32_t top_k;
        float top_p, min_p, repeat, frequency, presence;
        int32_t last_n;
        float theta;
        int32_t window;
    };
    const Setup setups[] = {
        {0.0f, 40, 0.95f, 0.05f, 1.3f, 0.2f, 0.1f, 16, 1.0f, 0},   // greedy with penalties
        {0.0f, 40, 0.95f, 0.05f, 1.0f, 0.0f, 0.0f, 64, 1.5f, 8},   // greedy with the contextual penalty
        {0.8f, 40, 0.95f, 0.05f, 1.1f, 0.3f, 0.2f, 12, 1.4f, 20},  // everything on
        {1.0f, 5, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 64, 1.0f, 0},      // no edits at all
        {1.3f, 64, 0.9f, 0.0f, 1.2f, 0.0f, 0.0f, -1, 1.2f, -1},    // whole-history windows (short context)
    };
    int checked = 0, edited = 0;
    for (const Setup &s : setups) {
        SamplerConfig c;
        c.temperature = s.temperature;
        c.top_k = s.top_k;
        c.top_p = s.top_p;
        c.min_p = s.min_p;
        c.repeat_penalty = s.repeat;
        c.frequency_penalty = s.frequency;
        c.presence_penalty = s.presence;
        c.penalty_last_n = s.last_n;
        c.context_penalty = s.theta;
        c.context_penalty_window = s.window;
        c.seed = 11;
        const Sampler sampler(c);
        // The same chain without its history steps, for the edited rows.
        SamplerConfig plain = c;
        plain.repeat_penalty = 1.0f;
        plain.frequency_penalty = plain.presence_penalty = 0.0f;
        plain.context_penalty = 1.0f;
        const Sampler after_edits(plain);
        for (int trial = 0; trial < 6; ++trial) {
            std::vector<int32_t> context(size_t(5 + trial * 7));
            std::uniform_int_distribution<int32_t> tok(0, 30);  // a small range: repeats in the windows
            for (int32_t &t : context) t = tok(rng);
            const DraftTree tree = random_tree(rng, context.back(), 31, 40);
            TreeSamplingPlan plan;
            REQUIRE(plan_tree_sampling(tree, sampler, context, n_vocab, plan));
            REQUIRE(plan.edit_first.size() == size_t(tree.size()) + 1);
            CHECK(plan.keys.size() == (sampler.greedy() ? 0u : size_t(tree.max_depth()) + 1));
            for (int32_t node = 0; node < tree.size(); ++node) {
                std::vector<float> row(static_cast<size_t>(n_vocab));
                for (float &x : row) x = logit(rng);
                Candidates want, got;
                sampler.distribution(row.data(), n_vocab, history_of(tree, context, node), want);
                const std::vector<float> edited_row = apply_edits(plan, node, row);
                after_edits.distribution(edited_row.data(), n_vocab, {}, got);
                REQUIRE(want.items.size() == got.items.size());
                for (size_t j = 0; j < want.items.size(); ++j) {
                    CHECK(want.items[j].id == got.items[j].id);
                    CHECK(std::memcmp(&want.items[j].p, &got.items[j].p, sizeof(float)) == 0);
                }
                edited += plan.edit_first[size_t(node) + 1] - plan.edit_first[size_t(node)];
                ++checked;
            }
        }
    }
    CHECK(checked > 100);
    CHECK(edited > 1000);  // the penalties really acted
}

TEST_CASE("tree sampling plan: the keys are the sampler's next draws and skipping them moves it as far", "[speculative][plan]") {
    SamplerConfig c;
    c.seed = 42;
    Sampler a(c), b(c);
    const std::vector<uint64_t> k = a.peek_keys(5);
    CHECK(a.peek_keys(5) == k);  // peeking does not move the generator
    for (size_t i = 0; i < 3; ++i) CHECK(b.next_key() == k[i]);
    a.skip_draws(3);
    CHECK(a.next_key() == k[3]);
    CHECK(b.next_key() == k[3]);
    CHECK(a.next_key() == k[4]);
    CHECK(b.next_key() == k[4]);
}

TEST_CASE("tree sampling plan: sampled drafts and long history windows stay on the host", "[speculative][plan]") {
    SamplerConfig c;
    c.temperature = 1.0f;
    const Sampler sampler(c);
    DraftTree tree;
    tree.reset(3);
    tree.add(0, 5);
    tree.set_child_distribution(0, std::vector<float>(10, 0.1f));  // a child sampled under the Leviathan rule: it needs q
    TreeSamplingPlan plan;
    std::vector<int32_t> context{1, 2, 3};
    CHECK_FALSE(plan_tree_sampling(tree, sampler, context, 10, plan));

    SamplerConfig g = c;
    g.temperature = 0.0f;
    CHECK(plan_tree_sampling(tree, Sampler(g), context, 10, plan));  // greedy ignores q

    SamplerConfig windowed = c;
    windowed.repeat_penalty = 1.1f;
    windowed.penalty_last_n = -1;
    DraftTree plain_tree;
    plain_tree.reset(3);
    plain_tree.add(0, 4);
    std::vector<int32_t> long_context(size_t(kMaxPlanWindow) + 10, 1);
    CHECK_FALSE(plan_tree_sampling(plain_tree, Sampler(windowed), long_context, 10, plan));
    windowed.penalty_last_n = 64;
    CHECK(plan_tree_sampling(plain_tree, Sampler(windowed), long_context, 10, plan));
}
