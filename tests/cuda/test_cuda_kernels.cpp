// The CUDA kernels against plain host loops, and the batch invariance the lossless guarantee rests on: a row's
// result is bit-identical whatever else shares the launch.
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/kernels/kernels.h"
#include "device_test_data.h"
#include "formats/half.h"

#include <catch2/catch.hpp>

#include <climits>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace specula::internal;
using namespace specula::internal::SPECULA_CUDA_NAMESPACE;

using namespace cuda_test_data;

TEST_CASE("cuda gemm matches a host loop and is batch invariant", "[cuda][kernels]") {
    for (const MatType type : {MatType::F32, MatType::F16}) {
        for (const auto &[rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {172, 64}, {64, 172}, {1000, 1536}, {4096, 520}}) {
            INFO((type == MatType::F32 ? "F32 " : "F16 ") << rows << "x" << cols);
            const TestMatrix w = make_matrix(type, rows, cols, uint32_t(rows * 7 + cols));
            const int32_t n = 69;
            std::vector<float> x = random_floats(size_t(n * cols), 11);
            if (type == MatType::F16)  // the tensor-core path rounds activations to F16: compare against that
                for (float &v : x) v = half_to_float(float_to_half(v));
            DeviceBuffer dx = upload(x), dy(size_t(n * rows) * 4), dy1(size_t(rows) * 4);
            DeviceBuffer scratch(std::max<size_t>(gemm_scratch_bytes(w.m, n), 256));
            gemm(w.m, dx.as<float>(), n, dy.as<float>(), scratch.as(), nullptr);
            const std::vector<float> y = download(dy, size_t(n * rows));
            double worst = 0;
            for (int32_t t = 0; t < n; ++t)
                for (int64_t r = 0; r < rows; ++r) {
                    double ref = 0;
                    for (int64_t c = 0; c < cols; ++c) ref += double(w.host[size_t(r * cols + c)]) * double(x[size_t(t * cols + c)]);
                    worst = std::max(worst, std::fabs(ref - double(y[size_t(t * rows + r)])));
                }
            CHECK(worst < 1e-3 * std::sqrt(double(cols)));
            // Every row alone (n = 1) gives the same bits as inside the batch of 69.
            for (int32_t t : {0, 17, 68}) {
                gemm(w.m, dx.as<float>() + size_t(t) * cols, 1, dy1.as<float>(), scratch.as(), nullptr);
                const std::vector<float> y1 = download(dy1, size_t(rows));
                INFO("row " << t);
                CHECK(std::memcmp(y1.data(), y.data() + size_t(t) * rows, size_t(rows) * 4) == 0);
            }
            // And inside batches that take the kernel's other tile counts per pass (2, 4, 8 tiles): rows 17.. of
            // the 69 as a batch of 18, 40 and 52.
            for (int32_t m : {18, 40, 52}) {
                DeviceBuffer dym(size_t(m * rows) * 4), scratch_m(std::max<size_t>(gemm_scratch_bytes(w.m, m), 256));
                gemm(w.m, dx.as<float>() + size_t(17) * cols, m, dym.as<float>(), scratch_m.as(), nullptr);
                const std::vector<float> ym = download(dym, size_t(m * rows));
                INFO("batch of " << m);
                CHECK(std::memcmp(ym.data(), y.data() + size_t(17) * rows, size_t(m * rows) * 4) == 0);
            }
        }
    }
}

TEST_CASE("cuda attention: split-K chunks with tree tails and the hybrid merge agree with a host softmax", "[cuda][kernels]") {
    AttentionShape s;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.chunk = 64;
    s.scale = 1.0f / 8.0f;
    const int32_t dkv = s.n_head_kv * s.head_dim, n_slots = 300, n_past = 250;
    std::vector<float> kf = random_floats(size_t(n_slots * dkv), 1), vf = random_floats(size_t(n_slots * dkv), 2);
    std::vector<uint16_t> kh(kf.size()), vh(vf.size());
    for (size_t i = 0; i < kf.size(); ++i) {
        kh[i] = float_to_half(kf[i]);
        kf[i] = half_to_float(kh[i]);
        vh[i] = float_to_half(vf[i]);
        vf[i] = half_to_float(vh[i]);
    }
    DeviceBuffer dk = upload(kh), dv = upload(vh);
    // A tree of 6 nodes in slots n_past..: 0 root; 1, 2 children of 0; 3 child of 1; 4 child of 3; 5 child of 2.
    const std::vector<int32_t> parent = {-1, 0, 0, 1, 3, 2};
    const int32_t n = int32_t(parent.size());
    std::vector<uint8_t> mask(size_t(n * n), 0);
    std::vector<std::vector<int32_t>> anc(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        for (int32_t j = i; j >= 0; j = parent[size_t(j)]) anc[size_t(i)].insert(anc[size_t(i)].begin(), j);
        for (int32_t j : anc[size_t(i)]) mask[size_t(i * n + j)] = 1;
    }
    std::vector<int32_t> ints;  // tail_start, tail_len, tail_slots
    std::vector<int32_t> starts, lens, slots;
    int32_t max_tail = 0;
    for (int32_t i = 0; i < n; ++i) {
        starts.push_back(int32_t(slots.size()));
        lens.push_back(int32_t(anc[size_t(i)].size()));
        for (int32_t j : anc[size_t(i)]) slots.push_back(n_past + j);
        max_tail = std::max(max_tail, lens.back());
    }
    DeviceBuffer d_starts = upload(starts), d_lens = upload(lens), d_slots = upload(slots), d_mask = upload(mask);
    const std::vector<float> q = random_floats(size_t(n * s.n_head * s.head_dim), 3);
    DeviceBuffer dq = upload(q);
    AttentionRows rows;
    rows.n = n;
    rows.n_prefix = n_past;
    rows.max_keys = n_past + max_tail;
    rows.tail_start = d_starts.as<int32_t>();
    rows.tail_len = d_lens.as<int32_t>();
    rows.tail_slots = d_slots.as<int32_t>();
    DeviceBuffer partials(attention_partials_floats(s, n, rows.max_keys) * 4), tree_partials(size_t(n * s.n_head * (s.head_dim + 2)) * 4);
    DeviceBuffer out_exact(q.size() * 4), out_hybrid(q.size() * 4);
    attention_chunks(dq.as<float>(), dk.as<__half>(), dv.as<__half>(), dkv, rows, s, partials.as<float>(), nullptr);
    attention_merge(partials.as<float>(), nullptr, rows, s, out_exact.as<float>(), nullptr, nullptr);
    AttentionRows prefix = rows;
    prefix.max_keys = n_past;
    prefix.tail_start = prefix.tail_len = prefix.tail_slots = nullptr;
    attention_chunks(dq.as<float>(), dk.as<__half>(), dv.as<__half>(), dkv, prefix, s, partials.as<float>(), nullptr);
    attention_tree(dq.as<float>(), dk.as<__half>(), dv.as<__half>(), dkv, n, n_past, n, d_mask.as<uint8_t>(), s, tree_partials.as<float>(), nullptr);
    attention_merge(partials.as<float>(), tree_partials.as<float>(), prefix, s, out_hybrid.as<float>(), nullptr, nullptr);
    const std::vector<float> exact = download(out_exact, q.size()), hybrid = download(out_hybrid, q.size());

    double worst_exact = 0, worst_hybrid = 0;
    const int32_t group = s.n_head / s.n_head_kv;
    for (int32_t i = 0; i < n; ++i)
        for (int32_t h = 0; h < s.n_head; ++h) {
            std::vector<int32_t> keys;
            for (int32_t p = 0; p < n_past; ++p) keys.push_back(p);
            for (int32_t j : anc[size_t(i)]) keys.push_back(n_past + j);
            std::vector<double> sc;
            double mx = -1e30;
            for (int32_t slot : keys) {
                double dot = 0;
                for (int d = 0; d < s.head_dim; ++d)
                    dot += double(q[size_t((i * s.n_head + h) * s.head_dim + d)]) * double(kf[size_t(slot * dkv + (h / group) * s.head_dim + d)]);
                sc.push_back(dot * s.scale);
                mx = std::max(mx, sc.back());
            }
            double sum = 0;
            for (double &v : sc) sum += (v = std::exp(v - mx));
            for (int d = 0; d < s.head_dim; ++d) {
                double o = 0;
                for (size_t k = 0; k < keys.size(); ++k) o += sc[k] / sum * double(vf[size_t(keys[k] * dkv + (h / group) * s.head_dim + d)]);
                const size_t at = size_t((i * s.n_head + h) * s.head_dim + d);
                worst_exact = std::max(worst_exact, std::fabs(o - double(exact[at])));
                worst_hybrid = std::max(worst_hybrid, std::fabs(o - double(hybrid[at])));
            }
        }
    // The chunks run on tensor cores with queries and probabilities rounded to F16 (relative 2^-11): ~1e-4 here.
    CHECK(worst_exact < 5e-4);
    CHECK(worst_hybrid < 5e-4);

    // Batch invariance: node 4 (depth 3) decoded alone, with its ancestors committed in slots n_past.. (here the
    // path 0, 1, 3, 4 is already in those slots only for node 0; so build the decode view on a copy of the cache).
    std::vector<uint16_t> kc = kh, vc = vh;
    const std::vector<int32_t> path = anc[4];
    for (size_t d = 0; d < path.size(); ++d)
        for (int32_t e = 0; e < dkv; ++e) {
            kc[size_t((n_past + int32_t(d)) * dkv + e)] = kh[size_t((n_past + path[d]) * dkv + e)];
            vc[size_t((n_past + int32_t(d)) * dkv + e)] = vh[size_t((n_past + path[d]) * dkv + e)];
        }
    DeviceBuffer dk2 = upload(kc), dv2 = upload(vc);
    const int32_t pos = n_past + int32_t(path.size()) - 1;
    std::vector<int32_t> one_len = {1};
    DeviceBuffer d_one = upload(one_len);
    AttentionRows decode;
    decode.n = 1;
    decode.n_prefix = pos;
    decode.max_keys = pos + 1;
    decode.tail_len = d_one.as<int32_t>();  // causal: key p is slot p
    DeviceBuffer dq4 = upload(std::vector<float>(q.begin() + 4 * s.n_head * s.head_dim, q.begin() + 5 * s.n_head * s.head_dim));
    DeviceBuffer out1(size_t(s.n_head * s.head_dim) * 4);
    attention_chunks(dq4.as<float>(), dk2.as<__half>(), dv2.as<__half>(), dkv, decode, s, partials.as<float>(), nullptr);
    attention_merge(partials.as<float>(), nullptr, decode, s, out1.as<float>(), nullptr, nullptr);
    const std::vector<float> alone = download(out1, size_t(s.n_head * s.head_dim));
    CHECK(std::memcmp(alone.data(), exact.data() + size_t(4 * s.n_head * s.head_dim), alone.size() * 4) == 0);
}

namespace {

// A K/V cache for one layer (F16 on the device, its values on the host) and the queries of a set of rows, each
// row with its logical key list: prefix slots 0 .. n_prefix - 1, then its tail slots. With a window, row i (at
// position n_prefix + tails[i].size() - 1) sees only the keys at the last `window` logical positions.
struct AttentionCase {
    AttentionShape s;
    int32_t n_prefix = 0;
    bool causal = false;                      // tails are n_prefix .. n_prefix + i, passed as tail_slots == nullptr
    int32_t window = 0;
    std::vector<std::vector<int32_t>> tails;  // per row
    std::vector<uint16_t> kh, vh;             // n_slots x dkv
    std::vector<float> q;                     // rows x n_head x head_dim
    int32_t dkv() const { return s.n_head_kv * s.head_dim; }
    size_t q_floats() const { return size_t(s.n_head) * size_t(s.head_dim); }
};

AttentionCase make_case(int32_t n_head, int32_t n_head_kv, int32_t head_dim, int32_t chunk, int32_t n_prefix, int32_t n_slots, uint32_t seed) {
    AttentionCase c;
    c.s.n_head = n_head;
    c.s.n_head_kv = n_head_kv;
    c.s.head_dim = head_dim;
    c.s.chunk = chunk;
    c.s.scale = 1.0f / std::sqrt(float(head_dim));
    c.n_prefix = n_prefix;
    const std::vector<float> kf = random_floats(size_t(n_slots * c.dkv()), seed), vf = random_floats(size_t(n_slots * c.dkv()), seed + 1);
    for (float x : kf) c.kh.push_back(float_to_half(x));
    for (float x : vf) c.vh.push_back(float_to_half(x));
    return c;
}

// Row i's first logical key: its window's start, 0 without one.
int32_t row_from(const AttentionCase &c, size_t i) {
    return c.window > 0 ? std::max(0, c.n_prefix + int32_t(c.tails[i].size()) - c.window) : 0;
}

// Row i's tail entries inside its window (tail entry j sits at logical position n_prefix + j), as
// graph/batch_rows.cpp lists a tree node's path.
std::vector<int32_t> kept_tail(const AttentionCase &c, size_t i) {
    std::vector<int32_t> kept;
    for (size_t j = 0; j < c.tails[i].size(); ++j)
        if (c.n_prefix + int32_t(j) >= row_from(c, i)) kept.push_back(c.tails[i][j]);
    return kept;
}

// Cache slots that no row reads hold NaN: the kernel must not let them reach a result (0 * NaN is NaN).
void poison_slots(AttentionCase &c, int32_t from) {
    for (size_t e = size_t(from) * size_t(c.dkv()); e < c.kh.size(); ++e) c.kh[e] = c.vh[e] = 0x7E00;
}

struct AttentionResult {
    std::vector<float> out, lse;
};

// attention_chunks + attention_merge over the case's rows.
AttentionResult run_attention(const AttentionCase &c) {
    const int32_t n = int32_t(c.tails.size());
    std::vector<int32_t> starts, lens, slots, from;
    int32_t max_keys = 0, min_from = INT32_MAX;
    for (size_t i = 0; i < c.tails.size(); ++i) {
        // A causal row's tail is its whole run (the window cuts it by `from`); a tree row lists its window's nodes.
        const std::vector<int32_t> t = c.causal ? c.tails[i] : kept_tail(c, i);
        from.push_back(row_from(c, i));
        min_from = std::min(min_from, from.back());
        starts.push_back(int32_t(slots.size()));
        lens.push_back(int32_t(t.size()));
        slots.insert(slots.end(), t.begin(), t.end());
        max_keys = std::max(max_keys, (c.causal ? c.n_prefix : std::max(from.back(), c.n_prefix)) + int32_t(t.size()));
    }
    slots.push_back(0);  // never empty
    DeviceBuffer dk = upload(c.kh), dv = upload(c.vh), dq = upload(c.q), d_starts = upload(starts), d_lens = upload(lens), d_slots = upload(slots),
                 d_from = upload(from);
    AttentionRows rows;
    rows.n = n;
    rows.n_prefix = c.n_prefix;
    rows.max_keys = max_keys;
    rows.tail_start = d_starts.as<int32_t>();
    rows.tail_len = d_lens.as<int32_t>();
    rows.tail_slots = c.causal ? nullptr : d_slots.as<int32_t>();
    if (c.window > 0) {
        rows.from = d_from.as<int32_t>();
        rows.min_from = min_from;
    }
    DeviceBuffer partials(attention_partials_floats(c.s, n, max_keys) * 4), out(size_t(n) * c.q_floats() * 4), lse(size_t(n * c.s.n_head) * 4);
    attention_chunks(dq.as<float>(), dk.as<__half>(), dv.as<__half>(), c.dkv(), rows, c.s, partials.as<float>(), nullptr);
    attention_merge(partials.as<float>(), nullptr, rows, c.s, out.as<float>(), lse.as<float>(), nullptr);
    return {download(out, size_t(n) * c.q_floats()), download(lse, size_t(n * c.s.n_head))};
}

// Largest |softmax(cap(q k^T * scale)) v - out| over the case's rows, in double precision on the host.
double worst_error(const AttentionCase &c, const AttentionResult &r) {
    const int32_t hd = c.s.head_dim, group = c.s.n_head / c.s.n_head_kv;
    double worst = 0;
    for (size_t i = 0; i < c.tails.size(); ++i) {
        std::vector<int32_t> keys;
        for (int32_t p = row_from(c, i); p < c.n_prefix; ++p) keys.push_back(p);
        const std::vector<int32_t> tail = kept_tail(c, i);
        keys.insert(keys.end(), tail.begin(), tail.end());
        for (int32_t h = 0; h < c.s.n_head; ++h) {
            const size_t kv0 = size_t((h / group) * hd), q0 = i * c.q_floats() + size_t(h * hd);
            std::vector<double> w;
            double mx = -1e300, sum = 0;
            for (int32_t slot : keys) {
                double dot = 0;
                for (int32_t d = 0; d < hd; ++d) dot += double(c.q[q0 + size_t(d)]) * double(half_to_float(c.kh[size_t(slot) * size_t(c.dkv()) + kv0 + size_t(d)]));
                const double x = dot * c.s.scale;
                w.push_back(c.s.softcap > 0.0f ? std::tanh(x / c.s.softcap) * c.s.softcap : x);
                mx = std::max(mx, w.back());
            }
            for (double &x : w) sum += (x = std::exp(x - mx));
            for (int32_t d = 0; d < hd; ++d) {
                double o = 0;
                for (size_t k = 0; k < keys.size(); ++k) o += w[k] / sum * double(half_to_float(c.vh[size_t(keys[k]) * size_t(c.dkv()) + kv0 + size_t(d)]));
                worst = std::max(worst, std::fabs(o - double(r.out[q0 + size_t(d)])));
            }
        }
    }
    return worst;
}

// Row i of the case as a single row: with the same prefix and tail (as_decode false: for a tree, its tail keys
// go through the per-row path), or decoded (as_decode true): its tail copied into the slots after the prefix,
// so that every key is a shared prefix key but the last, which is its own causal tail.
AttentionCase single_row(const AttentionCase &c, size_t i, bool as_decode) {
    AttentionCase one = c;
    one.q.assign(c.q.begin() + std::ptrdiff_t(i * c.q_floats()), c.q.begin() + std::ptrdiff_t((i + 1) * c.q_floats()));
    one.tails = {c.tails[i]};
    if (!as_decode) return one;
    const std::vector<int32_t> &tail = c.tails[i];
    const size_t dkv = size_t(c.dkv());
    for (size_t j = 0; j < tail.size(); ++j)
        for (size_t e = 0; e < dkv; ++e) {
            one.kh[(size_t(c.n_prefix) + j) * dkv + e] = c.kh[size_t(tail[j]) * dkv + e];
            one.vh[(size_t(c.n_prefix) + j) * dkv + e] = c.vh[size_t(tail[j]) * dkv + e];
        }
    one.n_prefix = c.n_prefix + int32_t(tail.size()) - 1;
    one.causal = true;
    one.tails = {{one.n_prefix}};
    return one;
}

}  // namespace

TEST_CASE("cuda attention on tensor cores: causal batches and trees match a host softmax, and each row alone has the same bits",
          "[cuda][kernels][tree]") {
    struct Config {
        const char *name;
        int32_t n_head, n_head_kv, head_dim, chunk, n_prefix, n_rows;
        bool tree;
        int32_t window = 0;   // gemma's sliding layers
        float softcap = 0.0f;  // gemma2's capped scores
    };
    const std::vector<Config> configs = {
        {"causal prefill, GQA 4, head_dim 64", 8, 2, 64, 64, 0, 40, false},
        {"causal batch after a prefix, GQA 4, head_dim 64", 8, 2, 64, 64, 90, 40, false},
        {"tree of 40 nodes, GQA 4, head_dim 64", 8, 2, 64, 64, 250, 40, true},
        {"tree, head_dim 8 (padded to 16), GQA 2", 8, 4, 8, 64, 70, 24, true},
        {"causal batch, head_dim 40, GQA 7", 14, 2, 40, 128, 37, 40, false},
        {"tree, head_dim 256, GQA 4", 4, 1, 256, 64, 33, 12, true},
        {"tree, 20 query heads per KV head (two query tiles per row)", 20, 1, 32, 64, 100, 10, true},
        // Windows: rows whose first key is inside a chunk, chunks below every window left out of the launch, tree
        // paths longer than the window (their keys start past the prefix), and soft-capped scores.
        {"causal batch after a prefix, window 24", 8, 2, 64, 64, 90, 40, false, 24},
        {"causal prefill, window 16, scores capped at 1", 8, 2, 64, 64, 0, 40, false, 16, 1.0f},
        {"tree of 40 nodes, window 5 (deep paths start past the prefix)", 8, 2, 64, 64, 250, 40, true, 5},
        {"tree, window 100 over chunks of 32, scores capped at 0.5", 8, 2, 64, 32, 250, 40, true, 100, 0.5f},
        {"tree, window 3, head_dim 8, GQA 2", 8, 4, 8, 64, 70, 24, true, 3},
    };
    for (const Config &cfg : configs) {
        INFO(cfg.name);
        const int32_t n_slots = cfg.n_prefix + cfg.n_rows + 24;
        AttentionCase c = make_case(cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.chunk, cfg.n_prefix, n_slots, uint32_t(cfg.head_dim * 31 + cfg.n_prefix));
        poison_slots(c, cfg.n_prefix + cfg.n_rows);
        c.causal = !cfg.tree;
        c.window = cfg.window;
        c.s.softcap = cfg.softcap;
        if (cfg.window > 0)  // slots below every window hold NaN too: a window must not read them
            for (size_t e = 0; e < size_t(std::max(0, cfg.n_prefix - cfg.window - 40)) * size_t(c.dkv()); ++e) c.kh[e] = c.vh[e] = 0x7E00;
        std::mt19937 rng(uint32_t(cfg.n_rows));
        std::vector<int32_t> parent(size_t(cfg.n_rows), -1);
        for (int32_t i = 0; i < cfg.n_rows; ++i) {
            // A tree's node i sits in slot n_prefix + i under a random earlier node; a causal row's parent is the row before.
            if (i > 0) parent[size_t(i)] = cfg.tree ? int32_t(rng() % uint32_t(i)) : i - 1;
            std::vector<int32_t> tail;
            for (int32_t j = i; j >= 0; j = parent[size_t(j)]) tail.insert(tail.begin(), cfg.n_prefix + j);
            c.tails.push_back(tail);
        }
        c.q = random_floats(size_t(cfg.n_rows) * c.q_floats(), uint32_t(cfg.n_rows + cfg.head_dim));
        const AttentionResult all = run_attention(c);
        const double worst = worst_error(c, all);
        INFO("worst error " << worst);
        // Queries and probabilities are F16 operands (rounding error up to 2^-11 relative): with few keys per row
        // (a prompt's first rows) nothing averages out, and |v| reaches 4 here.
        CHECK(worst < 2e-3);

        for (size_t i = 0; i < c.tails.size(); ++i) {
            INFO("row " << i << " (" << c.tails[i].size() << " tail keys)");
            for (const bool as_decode : {false, true}) {
                if (as_decode && c.causal) continue;  // a causal row alone is already its decode
                const AttentionResult one = run_attention(single_row(c, i, as_decode));
                INFO((as_decode ? "decoded" : "alone"));
                CHECK(std::memcmp(one.out.data(), all.out.data() + i * c.q_floats(), c.q_floats() * 4) == 0);
                CHECK(std::memcmp(one.lse.data(), all.lse.data() + i * size_t(c.s.n_head), size_t(c.s.n_head) * 4) == 0);
            }
        }
    }
}

TEST_CASE("cuda argmax picks the lowest index among ties", "[cuda][kernels]") {
    std::vector<float> v = random_floats(100000, 5);
    v[777] = 50.0f;
    v[99999] = 50.0f;
    DeviceBuffer dv = upload(v), out(4);
    argmax(dv.as<float>(), int32_t(v.size()), out.as<int32_t>(), nullptr);
    int32_t got = -1;
    check(cudaMemcpy(&got, out.as(), 4, cudaMemcpyDeviceToHost), "download");
    CHECK(got == 777);
}
