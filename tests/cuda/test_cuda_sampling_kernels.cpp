// The device sampling chain and tree walk (kernels/sampling.cu) against the host's reference: the candidates of
// sample_chain_rows against Sampler::distribution() on the same logits and the history that produces the same edit
// lists, and walk_tree against verify_tree() on random trees. On the emulator the device code runs the host's float
// arithmetic and libm, so the candidates must be bit-identical; on a GPU expf / logf may differ in the last bit, so p
// is compared to 1e-6 relative (ids and counts still exactly).
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/sampling.h"
#include "device_test_data.h"
#include "sampling/sampler.h"
#include "speculative/draft_tree.h"
#include "speculative/verifier.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

using namespace specula::internal;
using namespace specula::internal::SPECULA_CUDA_NAMESPACE;
using cuda_test_data::upload;

namespace {

template <typename T> std::vector<T> fetch(const DeviceBuffer &b, size_t n) {
    std::vector<T> v(n);
    check(cudaMemcpy(v.data(), b.as(), n * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return v;
}

// An upload that is never empty (a row set without edits still passes valid pointers).
template <typename T> DeviceBuffer upload_padded(std::vector<T> v) {
    if (v.empty()) v.push_back(T{});
    return upload(v);
}

// A chain as a user configures it (SamplerConfig's numbers).
struct ChainCase {
    const char *name;
    float temperature;
    int32_t top_k;
    float top_p, min_p;
    bool penalties, contextual;
    float repeat = 1.3f, frequency = 0.2f, presence = 0.1f;
};

SamplerConfig config_of(const ChainCase &c, int32_t penalty_last_n, int32_t context_window, uint64_t seed) {
    SamplerConfig sc;
    sc.temperature = c.temperature;
    sc.top_k = c.top_k;
    sc.top_p = c.top_p;
    sc.min_p = c.min_p;
    sc.repeat_penalty = c.penalties ? c.repeat : 1.0f;
    sc.frequency_penalty = c.penalties ? c.frequency : 0.0f;
    sc.presence_penalty = c.penalties ? c.presence : 0.0f;
    sc.penalty_last_n = penalty_last_n;
    sc.context_penalty = c.contextual ? 1.5f : 1.0f;
    sc.context_penalty_window = context_window;
    sc.seed = seed;
    return sc;
}

// The device chain for a host config, as its caller derives it (top_k in 1 .. kSampleMaxK).
SamplingChain chain_of(const SamplerConfig &sc, int32_t n) {
    SamplingChain c;
    c.greedy = sc.temperature <= 0.0f;
    c.k = c.greedy ? 1 : std::min(sc.top_k, n);
    c.top_p_on = sc.top_p < 1.0f;
    c.top_p = sc.top_p;
    c.min_p_on = sc.min_p > 0.0f;
    c.min_p = sc.min_p;
    c.temperature = sc.temperature;
    c.penalties = (sc.repeat_penalty != 1.0f || sc.frequency_penalty != 0.0f || sc.presence_penalty != 0.0f) && sc.penalty_last_n != 0;
    c.repeat = sc.repeat_penalty;
    c.frequency = sc.frequency_penalty;
    c.presence = sc.presence_penalty;
    c.contextual = sc.context_penalty != 1.0f && sc.context_penalty_window != 0;
    c.theta = sc.context_penalty;
    return c;
}

// One row's edit list from a history, as the caller builds it: the ids counted in the penalty window (count > 0)
// and the ids of the contextual window (in_context), in a shuffled order, plus a few ids that neither step touches
// (count 0, not in context: they must come out unchanged).
struct Edits {
    std::vector<int32_t> ids, counts;
    std::vector<uint8_t> in_context;
};

Edits edits_of(const std::vector<int32_t> &history, int32_t penalty_last_n, int32_t context_window, int32_t n, std::mt19937 &rng) {
    const auto tail = [&](int32_t w) { return w < 0 ? history.size() : std::min(history.size(), size_t(w)); };
    std::map<int32_t, int32_t> counts;
    for (size_t i = history.size() - tail(penalty_last_n); i < history.size(); ++i) ++counts[history[i]];
    std::set<int32_t> context(history.end() - ptrdiff_t(tail(context_window)), history.end());
    std::set<int32_t> all(context);
    for (const auto &kv : counts) all.insert(kv.first);
    for (int i = 0; i < 3; ++i) all.insert(int32_t(rng() % uint32_t(n)));  // possibly untouched ids
    std::vector<int32_t> ids(all.begin(), all.end());
    std::shuffle(ids.begin(), ids.end(), rng);
    Edits e;
    for (const int32_t id : ids) {
        e.ids.push_back(id);
        const auto it = counts.find(id);
        e.counts.push_back(it == counts.end() ? 0 : it->second);
        e.in_context.push_back(context.count(id) ? 1 : 0);
    }
    return e;
}

struct DeviceCandidates {
    std::vector<int32_t> ids, n;
    std::vector<float> p;
};

DeviceCandidates run_chain(const std::vector<float> &logits, int32_t count, int32_t n, int64_t stride, const std::vector<Edits> &edits,
                           const SamplingChain &chain) {
    std::vector<int32_t> first = {0}, ids, counts;
    std::vector<uint8_t> in_context;
    for (const Edits &e : edits) {
        ids.insert(ids.end(), e.ids.begin(), e.ids.end());
        counts.insert(counts.end(), e.counts.begin(), e.counts.end());
        in_context.insert(in_context.end(), e.in_context.begin(), e.in_context.end());
        first.push_back(int32_t(ids.size()));
    }
    DeviceBuffer d_logits = upload(logits), d_first = upload(first), d_ids = upload_padded(ids), d_counts = upload_padded(counts),
                 d_ctx = upload_padded(in_context);
    const size_t slots = size_t(count) * size_t(kSampleMaxK);
    DeviceBuffer c_ids(slots * 4), c_p(slots * 4), c_n(size_t(count) * 4);
    sample_chain_rows(d_logits.as<float>(), count, n, stride, d_first.as<int32_t>(), d_ids.as<int32_t>(), d_counts.as<int32_t>(),
                      d_ctx.as<uint8_t>(), chain, c_ids.as<int32_t>(), c_p.as<float>(), c_n.as<int32_t>(), nullptr);
    check(cudaDeviceSynchronize(), "sample_chain_rows");
    return {fetch<int32_t>(c_ids, slots), fetch<int32_t>(c_n, size_t(count)), fetch<float>(c_p, slots)};
}

// The host's distribution of a row. A NaN logit becomes -inf first: the device ranks NaN as -inf, and the host's
// sort has no defined order for NaN (its comparison is then not a strict weak order).
Candidates host_distribution(const SamplerConfig &sc, const float *row, int32_t n, const std::vector<int32_t> &history) {
    std::vector<float> x(row, row + n);
    for (float &v : x)
        if (std::isnan(v)) v = -INFINITY;
    Candidates c;
    Sampler(sc).distribution(x.data(), n, history, c);
    return c;
}

bool same_p(float device, float host) {
#ifdef SPECULA_CUDA_EMULATION
    return std::memcmp(&device, &host, 4) == 0;
#else
    return std::fabs(device - host) <= 1e-6f * std::fabs(host) + 1e-30f || (std::isnan(device) && std::isnan(host));
#endif
}

// Row kinds: 0 normal (scale 3) with a few NaN and -inf, 1 whole numbers (hundreds of ties), 2 flat (scale 1: long
// top-p prefixes).
std::vector<float> make_rows(int32_t count, int32_t n, int64_t stride, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(size_t(count) * size_t(stride), 12345.0f);  // the padding past n must never be read
    for (int32_t r = 0; r < count; ++r) {
        float *row = x.data() + size_t(r) * size_t(stride);
        for (int32_t i = 0; i < n; ++i) {
            const float z = normal(rng);
            row[i] = r % 3 == 0 ? 3.0f * z : r % 3 == 1 ? std::round(2.0f * z) : z;
            if (r % 3 == 0 && rng() % 50 == 0) row[i] = rng() % 2 ? NAN : -INFINITY;
        }
        if (r % 3 == 0 && n == 7) {
            row[2] = NAN;
            row[5] = -INFINITY;
        }
    }
    return x;
}

// A history of up to 200 tokens, half of them among the row's ~20 best ids (so that the penalties reorder the top).
std::vector<int32_t> make_history(const float *row, int32_t n, std::mt19937 &rng) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    const size_t top = std::min<size_t>(20, size_t(n));
    std::partial_sort(order.begin(), order.begin() + ptrdiff_t(top), order.end(), [&](int32_t a, int32_t b) {
        const float va = std::isnan(row[a]) ? -INFINITY : row[a], vb = std::isnan(row[b]) ? -INFINITY : row[b];
        return va > vb || (va == vb && a < b);
    });
    std::vector<int32_t> h(rng() % 200);
    for (int32_t &t : h) t = rng() % 2 ? order[rng() % top] : int32_t(rng() % uint32_t(n));
    return h;
}

}  // namespace

TEST_CASE("cuda sample_chain_rows: the chain's candidates match the host sampler's distribution", "[cuda][kernels][sampling-kernels]") {
    const std::vector<ChainCase> chains = {
        {"greedy", 0.0f, 40, 0.95f, 0.05f, false, false},
        {"greedy, penalties and contextual", 0.0f, 40, 0.95f, 0.05f, true, true},
        {"top_k 1", 1.0f, 1, 1.0f, 0.0f, false, false},
        {"top_k 5, top_p 0.9, min_p 0.05, t 0.7, penalties", 0.7f, 5, 0.9f, 0.05f, true, false},
        {"top_k 40, top_p 0.98, t 1.3, contextual", 1.3f, 40, 0.98f, 0.0f, false, true},
        {"top_k 64, min_p 0.05, penalties and contextual", 1.0f, 64, 1.0f, 0.05f, true, true},
        {"top_k 64, top_p 0.9, t 0.7", 0.7f, 64, 0.9f, 0.0f, false, false},
        {"top_k 40, whole-number penalties (ties between edited and other ids)", 1.0f, 40, 1.0f, 0.0f, true, false, 1.0f, 1.0f, 1.0f},
        {"greedy, whole-number penalties", 0.0f, 40, 1.0f, 0.0f, true, false, 1.0f, 1.0f, 2.0f},
    };
    struct Shape {
        int32_t count, n;
    };
    int64_t compared = 0, tie_sensitive = 0, tie_rule_detected = 0;
    for (const Shape shape : {Shape{3, 7}, Shape{6, 300}, Shape{3, 5000}, Shape{2, 128256}}) {
        const int32_t n = shape.n, count = shape.count;
        const int64_t stride = n + 3;
        const std::vector<float> rows = make_rows(count, n, stride, uint32_t(n));
        for (size_t ci = 0; ci < chains.size(); ++ci) {
            const ChainCase &cc = chains[ci];
            std::mt19937 rng(uint32_t(n * 31 + int32_t(ci)));
            std::vector<std::vector<int32_t>> histories;
            std::vector<SamplerConfig> configs;
            std::vector<Edits> edits;
            SamplingChain chain;
            for (int32_t r = 0; r < count; ++r) {
                const float *row = rows.data() + size_t(r) * size_t(stride);
                histories.push_back(make_history(row, n, rng));
                const int32_t h = int32_t(histories.back().size());
                // Windows: everything, or a part of the history (ids counted but not in context, and the reverse).
                const int32_t last_n = rng() % 2 || h < 2 ? -1 : h / 2, window = rng() % 2 || h < 3 ? -1 : h / 3;
                // One chain for the launch: the windows only shape the edit lists, not the chain's numbers.
                configs.push_back(config_of(cc, last_n, window, 0));
                chain = chain_of(configs.back(), n);
                edits.push_back(edits_of(histories.back(), last_n, window, n, rng));
            }
            const DeviceCandidates d = run_chain(rows, count, n, stride, edits, chain);
            for (int32_t r = 0; r < count; ++r) {
                const float *row = rows.data() + size_t(r) * size_t(stride);
                const Candidates ref = host_distribution(configs[size_t(r)], row, n, histories[size_t(r)]);
                INFO("n " << n << ", row " << r << ", chain " << cc.name << ", " << edits[size_t(r)].ids.size() << " edits");
                REQUIRE(d.n[size_t(r)] == int32_t(ref.items.size()));
                for (size_t j = 0; j < ref.items.size(); ++j) {
                    const size_t at = size_t(r) * kSampleMaxK + j;
                    INFO("candidate " << j << ": device (" << d.ids[at] << ", " << d.p[at] << "), host (" << ref.items[j].id << ", "
                                      << ref.items[j].p << ")");
                    CHECK(d.ids[at] == ref.items[j].id);
                    CHECK(same_p(d.p[at], ref.items[j].p));
                }
                ++compared;
                // Negative control on the whole-number rows: the host with the tie rule flipped (the row and history
                // mirrored, id i as n - 1 - i, which reverses the order among equal logits only) must give other
                // candidates wherever ties decide them, and there the device must not match it.
                if (r % 3 == 1) {
                    std::vector<float> mirrored(row, row + n);
                    std::reverse(mirrored.begin(), mirrored.end());
                    std::vector<int32_t> mh = histories[size_t(r)];
                    for (int32_t &t : mh) t = n - 1 - t;
                    const Candidates flipped = host_distribution(configs[size_t(r)], mirrored.data(), n, mh);
                    std::vector<int32_t> ref_ids, flipped_ids, device_ids(d.ids.begin() + ptrdiff_t(size_t(r) * kSampleMaxK),
                                                                         d.ids.begin() + ptrdiff_t(size_t(r) * kSampleMaxK + ref.items.size()));
                    for (const Candidate &c : ref.items) ref_ids.push_back(c.id);
                    for (const Candidate &c : flipped.items) flipped_ids.push_back(n - 1 - c.id);
                    if (flipped_ids != ref_ids) {
                        ++tie_sensitive;
                        if (device_ids != flipped_ids) ++tie_rule_detected;
                    }
                }
            }
        }
    }
    CHECK(compared == int64_t(9 * (3 + 6 + 3 + 2)));
    CHECK(tie_sensitive >= 10);  // the data does exercise the tie rule
    CHECK(tie_rule_detected == tie_sensitive);
}

TEST_CASE("cuda walk_tree: the device walk matches verify_tree on random trees", "[cuda][kernels][sampling-kernels]") {
    const int32_t n_vocab = 300;
    const std::vector<ChainCase> chains = {
        {"greedy", 0.0f, 40, 0.95f, 0.05f, false, false},
        {"top_k 40, top_p 0.95, min_p 0.05, t 0.8", 0.8f, 40, 0.95f, 0.05f, false, false},
        {"top_k 64, t 1.3", 1.3f, 64, 1.0f, 0.0f, false, false},
        {"top_k 5, t 0.7", 0.7f, 5, 1.0f, 0.0f, false, false},
    };
    std::mt19937 rng(7);
    int64_t walks = 0, accepted = 0, deep = 0;
    for (int trial = 0; trial < 12; ++trial) {
        // A tree of up to 69 nodes and depth 6, parents before children, distinct sibling tokens (DraftTree::add).
        DraftTree tree;
        tree.reset(int32_t(rng() % n_vocab));
        const int32_t target = 1 + int32_t(rng() % 69);
        for (int attempts = 0; tree.size() < target && attempts < 1000; ++attempts) {
            const int32_t parent = int32_t(rng() % uint32_t(tree.size()));
            if (tree.depth(parent) < 6) tree.add(parent, int32_t(rng() % 12) * 25);  // few tokens: siblings collide
        }
        const int32_t nodes = tree.size();
        // Each node's row favours its children's tokens, so that walks go deep, but not always.
        std::vector<float> logits = cuda_test_data::random_floats(size_t(nodes) * n_vocab, uint32_t(100 + trial), 1.5f);
        std::uniform_real_distribution<float> boost(5.0f, 9.0f);
        for (int32_t c = 1; c < nodes; ++c) logits[size_t(tree.parent(c)) * n_vocab + size_t(tree.token(c))] += boost(rng);
        std::vector<int32_t> parents(static_cast<size_t>(nodes));
        for (int32_t i = 0; i < nodes; ++i) parents[size_t(i)] = tree.parent(i);  // the root's: -1
        const DeviceBuffer d_logits = upload(logits), d_parents = upload(parents), d_tokens = upload(tree.tokens()),
                           d_first = upload(std::vector<int32_t>(size_t(nodes) + 1, 0)), d_none = upload(std::vector<int32_t>{0}),
                           d_ctx = upload(std::vector<uint8_t>{0});
        const size_t slots = size_t(nodes) * kSampleMaxK;
        DeviceBuffer c_ids(slots * 4), c_p(slots * 4), c_n(size_t(nodes) * 4), out(size_t(nodes + 2) * 4);
        for (size_t ci = 0; ci < chains.size(); ++ci) {
            const SamplerConfig sc = config_of(chains[ci], -1, -1, uint64_t(trial * 10 + int(ci)));
            std::vector<int32_t> history = {5, 17, 5, tree.token(0)};
            Sampler host(sc);
            const VerifyOutcome ref = verify_tree(tree, logits.data(), n_vocab, host, history);
            // verify_tree draws one token per visited node with the sampler's next key: the node at depth d gets the d-th.
            const DeviceBuffer d_keys = upload(Sampler(sc).peek_keys(8));
            const SamplingChain chain = chain_of(sc, n_vocab);
            sample_chain_rows(d_logits.as<float>(), nodes, n_vocab, n_vocab, d_first.as<int32_t>(), d_none.as<int32_t>(), d_none.as<int32_t>(),
                              d_ctx.as<uint8_t>(), chain, c_ids.as<int32_t>(), c_p.as<float>(), c_n.as<int32_t>(), nullptr);
            walk_tree(d_parents.as<int32_t>(), d_tokens.as<int32_t>(), nodes, c_ids.as<int32_t>(), c_p.as<float>(), c_n.as<int32_t>(),
                      d_keys.as<uint64_t>(), chain.greedy, out.as<int32_t>(), nullptr);
            check(cudaDeviceSynchronize(), "walk_tree");
            const std::vector<int32_t> o = fetch<int32_t>(out, size_t(nodes) + 2);
            INFO("trial " << trial << ", " << nodes << " nodes, chain " << chains[ci].name);
            REQUIRE(o[0] == int32_t(ref.path.size()));
            CHECK(std::vector<int32_t>(o.begin() + 1, o.begin() + 1 + o[0]) == ref.path);
            CHECK(o[size_t(o[0]) + 1] == ref.bonus);
            ++walks;
            accepted += o[0];
            if (o[0] >= 3) ++deep;
        }
    }
    CHECK(walks == 12 * 4);
    CHECK(accepted >= walks);  // the walks do descend
    CHECK(deep > 0);
}
