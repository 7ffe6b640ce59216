// The n-gram drafter: prompt lookup (longest suffix, most recent earlier occurrence), TokenSwift's reuse table
// (top-k by count, ties to the most recent), the node budget, the lag, rewind, and the incremental index against
// a brute-force reference at every prefix of long sequences.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "speculative/ngram_drafter.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <vector>

using namespace specula::internal;

namespace {

NgramConfig lookup_only(int32_t lookup_min, int32_t lookup_max, int32_t max_chain) {
    NgramConfig c;
    c.lookup_min = lookup_min;
    c.lookup_max = lookup_max;
    c.max_chain = max_chain;
    c.table_topk = 0;
    return c;
}

NgramConfig table_only(int32_t n, int32_t topk, int32_t lag = 0) {
    NgramConfig c;
    c.max_chain = 0;
    c.table_n = n;
    c.table_topk = topk;
    c.lag = lag;
    return c;
}

DraftTree draft(Drafter &drafter, std::span<const int32_t> tokens, int32_t budget = 1000) {
    DraftTree tree;
    tree.reset(tokens.back());
    DraftRequest request;
    request.tokens = tokens;
    request.n_target_kv = int32_t(tokens.size()) - 1;
    request.node_budget = budget;
    request.shape = TreeShape::chain(1);  // ignored by the n-gram drafter
    drafter.draft(request, tree);
    return tree;
}

DraftTree draft(const NgramConfig &config, const std::vector<int32_t> &tokens, int32_t budget = 1000) {
    auto drafter = make_ngram_drafter(config);
    return draft(*drafter, tokens, budget);
}

// The tree as (parent, token) per node, in insertion order.
std::vector<std::pair<int32_t, int32_t>> layout(const DraftTree &tree) {
    std::vector<std::pair<int32_t, int32_t>> out;
    for (int32_t i = 0; i < tree.size(); ++i) out.emplace_back(tree.parent(i), tree.token(i));
    return out;
}

// Root-to-leaf token paths (root excluded), in order of the leaves.
std::vector<std::vector<int32_t>> paths(const DraftTree &tree) {
    std::vector<bool> has_child(size_t(tree.size()), false);
    for (int32_t i = 1; i < tree.size(); ++i) has_child[size_t(tree.parent(i))] = true;
    std::vector<std::vector<int32_t>> out;
    for (int32_t i = 1; i < tree.size(); ++i) {
        if (has_child[size_t(i)]) continue;
        std::vector<int32_t> path;
        for (int32_t j = i; j != 0; j = tree.parent(j)) path.push_back(tree.token(j));
        std::reverse(path.begin(), path.end());
        out.push_back(path);
    }
    return out;
}

using Paths = std::vector<std::vector<int32_t>>;

// The specification, by brute force: O(context) scans every round.
DraftTree reference(const NgramConfig &c, std::span<const int32_t> tokens, int32_t budget) {
    DraftTree tree;
    tree.reset(tokens.back());
    if (tree.size() >= budget) return tree;
    const int32_t L = int32_t(tokens.size());
    auto add_chain = [&](std::vector<int32_t> chain) {
        int32_t node = 0;
        for (int32_t t : chain) {
            int32_t child = tree.find_child(node, t);
            if (child < 0) {
                if (tree.size() >= budget) return false;
                child = tree.add(node, t);
            }
            node = child;
        }
        return tree.size() < budget;
    };
    if (c.max_chain > 0) {
        bool found = false;
        for (int32_t n = std::min(c.lookup_max, L); n >= c.lookup_min && !found; --n)
            for (int32_t p = L - 2; p >= n - 1 && !found; --p) {
                if (!std::equal(tokens.begin() + (p - n + 1), tokens.begin() + (p + 1), tokens.begin() + (L - n))) continue;
                found = true;
                // What followed, repeated from the start where it reaches the end (the root included).
                std::vector<int32_t> chain;
                for (int32_t i = 0; i < c.max_chain; ++i) chain.push_back(tokens[size_t(p + 1 + i % (L - 1 - p))]);
                if (!add_chain(chain)) return tree;
            }
    }
    if (c.table_topk > 0) {
        struct Stat {
            int32_t count = 0, last = -1;
        };
        std::map<std::vector<int32_t>, Stat> stats;
        for (int32_t s = 0; s + c.table_n <= L - c.lag; ++s) {
            if (tokens[size_t(s)] != tokens.back()) continue;
            Stat &st = stats[std::vector<int32_t>(tokens.begin() + s, tokens.begin() + s + c.table_n)];
            ++st.count;
            st.last = s;
        }
        std::vector<std::pair<std::vector<int32_t>, Stat>> ranked(stats.begin(), stats.end());
        std::sort(ranked.begin(), ranked.end(), [](const auto &a, const auto &b) {
            return a.second.count != b.second.count ? a.second.count > b.second.count : a.second.last > b.second.last;
        });
        for (size_t i = 0; i < ranked.size() && i < size_t(c.table_topk); ++i)
            if (!add_chain(std::vector<int32_t>(ranked[i].first.begin() + 1, ranked[i].first.end()))) return tree;
    }
    return tree;
}

struct Lcg {
    uint64_t state;
    uint32_t next() {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return uint32_t(state >> 33);
    }
};

// Text-like: random tokens from a small vocabulary, often copying an earlier stretch (so lookups hit).
std::vector<int32_t> repetitive(size_t length, uint32_t vocab, uint64_t seed) {
    Lcg rng{seed};
    std::vector<int32_t> out;
    while (out.size() < length) {
        if (out.size() > 8 && rng.next() % 3 == 0) {
            const size_t from = rng.next() % (out.size() - 4), n = 2 + rng.next() % 8;
            for (size_t i = 0; i < n && out.size() < length; ++i) out.push_back(out[from + i]);
        } else {
            out.push_back(int32_t(rng.next() % vocab));
        }
    }
    return out;
}

std::vector<NgramConfig> mixed_configs() {
    std::vector<NgramConfig> configs;
    configs.push_back(NgramConfig{});  // defaults: lookup 1..4, chain 8, table 4-grams top 20, no lag
    NgramConfig c;
    c.lookup_min = 2;
    c.lookup_max = 5;
    c.max_chain = 5;
    c.table_n = 3;
    c.table_topk = 4;
    c.lag = 7;
    configs.push_back(c);
    configs.push_back(lookup_only(1, 3, 6));
    configs.push_back(table_only(2, 3, 1));
    return configs;
}

}  // namespace

TEST_CASE("ngram drafter name and config checks", "[speculative]") {
    CHECK(std::string(make_ngram_drafter(NgramConfig{})->name()) == "ngram");
    NgramConfig bad;
    bad.lookup_min = 0;
    CHECK_THROWS_AS(make_ngram_drafter(bad), Error);
    bad = NgramConfig{};
    bad.lookup_max = 0;
    CHECK_THROWS_AS(make_ngram_drafter(bad), Error);
    bad = NgramConfig{};
    bad.table_n = 1;
    CHECK_THROWS_AS(make_ngram_drafter(bad), Error);
    bad = NgramConfig{};
    bad.lag = -1;
    CHECK_THROWS_AS(make_ngram_drafter(bad), Error);
}

TEST_CASE("prompt lookup proposes what followed the repeated phrase", "[speculative]") {
    const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 9, 1, 2, 3};
    // Seven tokens followed, the root last: the eighth repeats them (the text repeats with period 7).
    CHECK(paths(draft(lookup_only(1, 4, 8), tokens)) == Paths{{4, 5, 6, 9, 1, 2, 3, 4}});
    CHECK(paths(draft(lookup_only(1, 4, 3), tokens)) == Paths{{4, 5, 6}});
    // The tree is a chain under the root.
    const DraftTree tree = draft(lookup_only(1, 4, 3), tokens);
    REQUIRE(tree.size() == 4);
    CHECK(tree.token(0) == 3);
    CHECK(tree.parent(1) == 0);
    CHECK(tree.parent(2) == 1);
    CHECK(tree.parent(3) == 2);
}

TEST_CASE("prompt lookup continues a text that loops: a match d tokens back repeats with period d", "[speculative]") {
    // A loop of 3 tokens: the last 4 tokens (3 1 2 3) occurred 3 tokens earlier, so the chain is the loop, repeated
    // up to max_chain. (Cut at the root, it was 1 2 3: 3 tokens a round on text a draft chain of 8 predicted whole.)
    const std::vector<int32_t> tokens = {7, 1, 2, 3, 1, 2, 3, 1, 2, 3};
    CHECK(paths(draft(lookup_only(1, 4, 8), tokens)) == Paths{{1, 2, 3, 1, 2, 3, 1, 2}});
    CHECK(paths(draft(lookup_only(1, 4, 2), tokens)) == Paths{{1, 2}});
    // The same token over and over: the chain is that token.
    CHECK(paths(draft(lookup_only(1, 4, 5), std::vector<int32_t>{4, 9, 9})) == Paths{{9, 9, 9, 9, 9}});
    // Within the node budget, like any chain.
    CHECK(paths(draft(lookup_only(1, 4, 8), tokens, 4)) == Paths{{1, 2, 3}});
}

TEST_CASE("prompt lookup prefers the longest suffix then the most recent occurrence", "[speculative]") {
    // "1 2 3" occurred once (followed by 5); "2 3" occurred more recently (followed by 6).
    const std::vector<int32_t> tokens = {7, 3, 8, 1, 2, 3, 5, 2, 3, 6, 1, 2, 3};
    CHECK(paths(draft(lookup_only(1, 3, 2), tokens)) == Paths{{5, 2}});
    CHECK(paths(draft(lookup_only(1, 2, 2), tokens)) == Paths{{6, 1}});
    // With the shortest suffix longer than any match: nothing.
    CHECK(draft(lookup_only(4, 4, 2), tokens).size() == 1);
    // Single tokens: the most recent earlier 1 is followed by 6, then the root itself, and so on.
    CHECK(paths(draft(lookup_only(1, 1, 8), std::vector<int32_t>{1, 5, 1, 6, 1})) == Paths{{6, 1, 6, 1, 6, 1, 6, 1}});
    // The suffix itself never counts as a match.
    CHECK(draft(lookup_only(1, 4, 8), std::vector<int32_t>{4, 5, 6}).size() == 1);
    CHECK(draft(lookup_only(1, 4, 8), std::vector<int32_t>{4}).size() == 1);
}

TEST_CASE("ngram drafter proposes nothing when nothing matches", "[speculative]") {
    const std::vector<int32_t> tokens = {10, 11, 12, 13, 14, 15};
    CHECK(draft(NgramConfig{}, tokens).size() == 1);
    // The table holds n-grams, but none starts with the root.
    CHECK(draft(table_only(2, 5), std::vector<int32_t>{1, 2, 1, 2, 3}).size() == 1);
}

TEST_CASE("reuse table proposes the top-k n-grams of the root by count, ties to the most recent", "[speculative]") {
    // Bigrams from 1: (1,5) x3, (1,7) x2, (1,6) x1, (1,8) x1 (the later one).
    const std::vector<int32_t> tokens = {1, 5, 1, 6, 1, 5, 1, 7, 1, 5, 1, 7, 1, 8, 1};
    CHECK(paths(draft(table_only(2, 3), tokens)) == Paths{{5}, {7}, {8}});
    CHECK(paths(draft(table_only(2, 4), tokens)) == Paths{{5}, {7}, {8}, {6}});
    CHECK(paths(draft(table_only(2, 10), tokens)) == Paths{{5}, {7}, {8}, {6}});
    CHECK(paths(draft(table_only(2, 1), tokens)) == Paths{{5}});
    // Trigrams: (1,5,1) x3, (1,7,1) x2, (1,6,1), (1,8,1); shared prefixes merge (here none below the root).
    CHECK(paths(draft(table_only(3, 2), tokens)) == Paths{{5, 1}, {7, 1}});
    // Chains that share a prefix merge into one branch.
    const std::vector<int32_t> shared = {1, 2, 3, 1, 2, 3, 1, 2, 4, 1};
    const DraftTree tree = draft(table_only(3, 5), shared);
    CHECK(paths(tree) == Paths{{2, 3}, {2, 4}});
    CHECK(tree.size() == 4);
}

TEST_CASE("ngram drafter: prompt-lookup chain first, then table chains", "[speculative]") {
    NgramConfig c;
    c.lookup_min = 1;
    c.lookup_max = 2;
    c.max_chain = 3;
    c.table_n = 2;
    c.table_topk = 2;
    // Root 1: lookup "9 1" (n=2) matched at 0..1 -> 2 3 1; bigrams from 1: (1,4) x2, (1,2) x1 (merges).
    const std::vector<int32_t> tokens = {9, 1, 2, 3, 1, 4, 1, 4, 9, 1};
    const DraftTree tree = draft(c, tokens);
    CHECK(paths(tree) == Paths{{2, 3, 1}, {4}});
    CHECK(tree.token(1) == 2);
    CHECK(tree.token(4) == 4);
}

TEST_CASE("ngram drafter respects the node budget exactly", "[speculative]") {
    const std::vector<int32_t> tokens = repetitive(600, 6, 3);
    for (const NgramConfig &config : mixed_configs()) {
        const DraftTree full = draft(config, tokens, 100000);
        REQUIRE(full.size() >= 4);
        const auto full_layout = layout(full);
        for (int32_t budget : {0, 1, 2, 3, 5, 8, 13, 21, 34, 1000}) {
            const DraftTree tree = draft(config, tokens, budget);
            CHECK(tree.size() <= std::max(budget, 1));
            CHECK(tree.size() == std::min(std::max(budget, 1), full.size()));
            // A smaller budget keeps a prefix of the unbounded tree.
            auto got = layout(tree);
            CHECK(std::equal(got.begin(), got.end(), full_layout.begin()));
        }
    }
}

TEST_CASE("ngram drafter: the table ignores the newest lag tokens", "[speculative]") {
    // The bigram (1,5) uses positions 0 and 1; the context has 6 tokens.
    const std::vector<int32_t> tokens = {1, 5, 9, 9, 9, 1};
    CHECK(paths(draft(table_only(2, 3, 0), tokens)) == Paths{{5}});
    CHECK(paths(draft(table_only(2, 3, 4), tokens)) == Paths{{5}});
    CHECK(draft(table_only(2, 3, 5), tokens).size() == 1);
    CHECK(draft(table_only(2, 3, 100), tokens).size() == 1);
    // Counts too: (1,7) twice but once within the lag, (1,5) once.
    const std::vector<int32_t> counted = {1, 5, 1, 7, 2, 2, 1, 7, 2, 1};
    CHECK(paths(draft(table_only(2, 1, 0), counted)) == Paths{{7}});
    CHECK(paths(draft(table_only(2, 2, 3), counted)) == Paths{{7}, {5}});  // tie (1 each): 7 is more recent
    CHECK(paths(draft(table_only(2, 2, 7), counted)) == Paths{{5}});
}

TEST_CASE("ngram drafter after rewind reflects only the new history", "[speculative]") {
    NgramConfig c;
    c.table_n = 2;
    c.table_topk = 4;
    auto drafter = make_ngram_drafter(c);
    const std::vector<int32_t> before = {10, 11, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2};
    CHECK(paths(draft(*drafter, before)) == Paths{{3, 4, 1, 2, 3, 4, 1, 2}});
    drafter->rewind(2);
    const std::vector<int32_t> after = {10, 11, 1, 2, 7, 8, 1, 2, 7, 8, 1, 2};
    const DraftTree tree = draft(*drafter, after);
    CHECK(paths(tree) == Paths{{7, 8, 1, 2, 7, 8, 1, 2}});
    for (int32_t t : tree.tokens()) {
        CHECK(t != 3);
        CHECK(t != 4);
    }
    CHECK(layout(tree) == layout(draft(c, after)));

    // Dropping just the root and drafting a different one.
    drafter->rewind(int32_t(after.size()) - 1);
    std::vector<int32_t> other = after;
    other.back() = 7;
    CHECK(layout(draft(*drafter, other)) == layout(draft(c, other)));
    CHECK(paths(draft(*drafter, other)) == Paths{{8, 1, 7, 8, 1, 7, 8, 1}});

    // Rewinding past everything.
    drafter->rewind(0);
    const std::vector<int32_t> fresh = {5, 6, 5};
    CHECK(paths(draft(*drafter, fresh)) == Paths{{6, 5, 6, 5, 6, 5, 6, 5}});
}

TEST_CASE("ngram drafter incremental indexing matches from-scratch and the brute-force reference", "[speculative]") {
    const std::vector<int32_t> tokens = repetitive(1500, 12, 11);
    for (const NgramConfig &config : mixed_configs()) {
        auto incremental = make_ngram_drafter(config);
        size_t previous_bytes = 0;
        for (size_t length = 1; length <= tokens.size(); ++length) {
            const std::span<const int32_t> prefix(tokens.data(), length);
            const int32_t budget = 1 + int32_t(length % 40);
            const DraftTree got = draft(*incremental, prefix, budget);
            const DraftTree want = reference(config, prefix, budget);
            REQUIRE(layout(got) == layout(want));
            // Never a token the context does not hold.
            const std::set<int32_t> seen(prefix.begin(), prefix.end());
            for (int32_t t : got.tokens()) REQUIRE(seen.count(t) == 1);
            if (length % 500 == 0) {
                // A fresh drafter fed the whole prefix at once gives the same tree.
                auto scratch = make_ngram_drafter(config);
                CHECK(layout(draft(*scratch, prefix, budget)) == layout(got));
                CHECK(incremental->allocated_bytes() >= previous_bytes);
                previous_bytes = incremental->allocated_bytes();
            }
        }
        CHECK(previous_bytes > 0);
    }
}

TEST_CASE("ngram drafter with rewinds in the middle matches the brute-force reference", "[speculative]") {
    const std::vector<int32_t> a = repetitive(800, 10, 5), b = repetitive(800, 10, 6);
    for (const NgramConfig &config : mixed_configs()) {
        auto drafter = make_ngram_drafter(config);
        Lcg rng{99};
        std::vector<int32_t> context;
        for (int round = 0; round < 600; ++round) {
            // Mostly grow (from a or b), sometimes cut back a few tokens.
            if (context.size() > 20 && rng.next() % 8 == 0) {
                const size_t cut = context.size() - 1 - rng.next() % 15;
                context.resize(cut);
                drafter->rewind(int32_t(cut));
            }
            const std::vector<int32_t> &source = rng.next() % 2 ? a : b;
            context.push_back(source[rng.next() % source.size()]);
            if (rng.next() % 2) context.push_back(context[rng.next() % context.size()]);
            const DraftTree got = draft(*drafter, context, 64);
            REQUIRE(layout(got) == layout(reference(config, context, 64)));
        }
    }
}
