// The CPU's one attention path (backends/cpu/block_attention.h) and the typed KV cache it reads: a row's result is
// right (against a double-precision softmax over the stored values), and bit-identical however its keys arrive
// (contiguous, or as a tree node's listed slots) and whichever rows share the call -- across block boundaries and
// for every KV type. Then the same on a real model: tree nodes at 8K context against plain decoding of their paths.
#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/block_attention.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_runner.h"
#include "backends/cpu/kv_cache.h"
#include "common/fixture_files.h"
#include "formats/half.h"
#include "model/model.h"
#include "speculative/draft_tree.h"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace specula::internal;

namespace {

constexpr int32_t kHd = 64, kHeads = 2, kWidth = kHd * kHeads;

// A cache of one layer holding n random rows.
KvCache random_cache(KvType type, int32_t n, uint32_t seed, int32_t head_dim = kHd) {
    KvCache kv(1, n, kWidth, type, head_dim);
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> k(kWidth), v(kWidth);
    for (int32_t s = 0; s < n; ++s) {
        for (int32_t j = 0; j < kWidth; ++j) {
            k[size_t(j)] = g(rng) * 2.0f;
            v[size_t(j)] = g(rng);
        }
        kv.store(0, s, k.data(), v.data());
    }
    return kv;
}

std::vector<float> stored(const KvView &rows, int32_t slot, int32_t first) {
    std::vector<float> out(kHd);
    kv_load_head(rows, slot, nullptr, 1, first, kHd, out.data());
    return out;
}

}  // namespace

TEST_CASE("exp_weights: AVX2 and AVX-512 give the reference's bits, and both are exp to about an ulp", "[cpu][attention]") {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-100.0f, 0.0f);
    for (int32_t n : {1, 7, 8, 9, 15, 16, 17, 24, 25, 31, 33, 63, 64}) {
        std::vector<float> x(static_cast<size_t>(n));
        for (float &e : x) e = u(rng);
        x[0] = 0.0f;
        std::vector<float> a = x, b = x;
        const float sa = exp_weights(a.data(), n, 0.0f), sb = attention_kernels_testing::exp_weights_reference(b.data(), n, 0.0f);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(&sa, &sb, sizeof sa) == 0);
        double sum = 0.0;
        for (int32_t t = 0; t < n; ++t) {
            const double want = x[size_t(t)] < -87.0f ? 0.0 : std::exp(double(x[size_t(t)]));
            CHECK(std::fabs(b[size_t(t)] - want) <= 2e-7 * want + 1e-38);
            sum += b[size_t(t)];
        }
        CHECK(sb == Approx(sum).epsilon(1e-6));
        float want_max = x[0];
        for (float e : x) want_max = std::max(want_max, e);
        CHECK(scores_max(x.data(), n) == want_max);
    }
    if (detected_cpu_isa() < CpuIsa::Avx2) SPECULA_SKIP("this CPU has no AVX2: only the reference ran");
}

TEST_CASE("block attention matches a double softmax over the stored keys, for every KV type and across block edges",
          "[cpu][attention]") {
    const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::Q8_0);
    CAPTURE(kv_type_name(type));
    const KvCache kv = random_cache(type, 300, 1);
    std::mt19937 rng(2);
    std::normal_distribution<float> g(0.0f, 0.3f);
    std::vector<float> q(kHd), out(kHd);
    for (float &x : q) x = g(rng);
    BlockAttention att(kHd);
    const float scale = 0.125f;
    for (int32_t n : {1, 2, 63, 64, 65, 127, 128, 129, 300}) {
        for (int32_t head = 0; head < kHeads; ++head) {
            const AttentionQuery query{q.data(), out.data(), n, nullptr, 0};
            att.run(kv.keys(0), kv.values(0), head * kHd, scale, {&query, 1});
            std::vector<double> s(static_cast<size_t>(n)), want(kHd, 0.0);
            double max = -1e300, sum = 0.0;
            for (int32_t t = 0; t < n; ++t) {
                const std::vector<float> k = stored(kv.keys(0), t, head * kHd);
                double d = 0.0;
                for (int32_t j = 0; j < kHd; ++j) d += double(k[size_t(j)]) * q[size_t(j)];
                s[size_t(t)] = d * scale;
                max = std::max(max, s[size_t(t)]);
            }
            for (int32_t t = 0; t < n; ++t) {
                const double w = std::exp(s[size_t(t)] - max);
                sum += w;
                const std::vector<float> v = stored(kv.values(0), t, head * kHd);
                for (int32_t j = 0; j < kHd; ++j) want[size_t(j)] += w * v[size_t(j)];
            }
            INFO("keys " << n << " head " << head);
            for (int32_t j = 0; j < kHd; ++j) REQUIRE(out[size_t(j)] == Approx(want[size_t(j)] / sum).margin(1e-5));
        }
    }
}

TEST_CASE("block attention: a row's bits do not depend on its batch or on how its keys are listed", "[cpu][attention]") {
    const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::Q8_0);
    CAPTURE(kv_type_name(type));
    const KvCache kv = random_cache(type, 400, 3);
    std::mt19937 rng(4);
    std::normal_distribution<float> g(0.0f, 0.5f);
    std::vector<float> qs(8 * kHd);
    for (float &x : qs) x = g(rng);
    BlockAttention att(kHd);
    // Each case: the row's keys are slots [0, total); as a tree node they are the run [0, prefix) followed by the
    // listed slots prefix..total-1 (a chain of ancestors written right after the prefix).
    for (const auto &[prefix, total] : std::vector<std::pair<int32_t, int32_t>>{{10, 14}, {60, 70}, {64, 64}, {64, 65}, {100, 140}, {127, 129}, {128, 200}, {250, 330}}) {
        INFO("prefix " << prefix << " keys " << total);
        std::vector<float> alone(kHd), listed(kHd), batched(8 * kHd);
        const AttentionQuery solo{qs.data(), alone.data(), total, nullptr, 0};
        att.run(kv.keys(0), kv.values(0), kHd, 0.125f, {&solo, 1});
        std::vector<int32_t> path;
        for (int32_t s = prefix; s < total; ++s) path.push_back(s);
        const AttentionQuery node{qs.data(), listed.data(), prefix, path.data(), int32_t(path.size())};
        att.run(kv.keys(0), kv.values(0), kHd, 0.125f, {&node, 1});
        CHECK(std::memcmp(alone.data(), listed.data(), kHd * sizeof(float)) == 0);
        // The same node among seven other rows with other runs and lists (a tree level, a prompt batch).
        std::vector<AttentionQuery> rows;
        std::vector<std::vector<int32_t>> lists(8);
        for (int32_t r = 0; r < 8; ++r) {
            if (r == 5) {
                rows.push_back(AttentionQuery{qs.data(), batched.data() + 5 * kHd, prefix, path.data(), int32_t(path.size())});
                continue;
            }
            const int32_t run = 1 + (r * 53) % 390;
            for (int32_t s = run; s < std::min(400, run + r); s += 2) lists[size_t(r)].push_back(s);
            rows.push_back(AttentionQuery{qs.data() + r * kHd, batched.data() + r * kHd, run, lists[size_t(r)].data(), int32_t(lists[size_t(r)].size())});
        }
        att.run(kv.keys(0), kv.values(0), kHd, 0.125f, rows);
        CHECK(std::memcmp(alone.data(), batched.data() + 5 * kHd, kHd * sizeof(float)) == 0);
    }
}

TEST_CASE("block attention with a sliding window: right, and a row's bits do not depend on its batch or how its keys are listed",
          "[cpu][attention]") {
    const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::Q8_0);
    CAPTURE(kv_type_name(type));
    const KvCache kv = random_cache(type, 400, 5);
    std::mt19937 rng(6);
    std::normal_distribution<float> g(0.0f, 0.5f);
    std::vector<float> qs(8 * kHd);
    for (float &x : qs) x = g(rng);
    BlockAttention att(kHd);
    // Each case: a row decoded at position total - 1 sees slots [from, total) (a window); as a tree node, the run
    // [from, prefix) then the listed slots prefix..total-1, of which a window that starts past the run keeps the
    // last total - from. Windows starting on, before and after block edges, inside the listed part, and empty runs.
    const std::vector<std::array<int32_t, 3>> cases{{0, 10, 14},  {5, 10, 14},    {12, 10, 14},  {3, 60, 70},    {64, 64, 65},  {63, 100, 140},
                                                    {65, 100, 140}, {100, 120, 140}, {130, 128, 200}, {64, 128, 200}, {250, 300, 330}, {1, 2, 3}};
    for (const auto &[from, prefix, total] : cases) {
        INFO("from " << from << " prefix " << prefix << " keys " << total);
        std::vector<float> alone(kHd), listed(kHd), batched(8 * kHd);
        AttentionQuery solo{qs.data(), alone.data(), total, nullptr, 0};
        solo.from = from;
        att.run(kv.keys(0), kv.values(0), kHd, 0.125f, {&solo, 1});
        // Right: a double softmax over slots [from, total).
        {
            std::vector<double> sc, want(kHd, 0.0);
            double max = -1e300, sum = 0.0;
            for (int32_t t = from; t < total; ++t) {
                const std::vector<float> k = stored(kv.keys(0), t, kHd);
                double d = 0.0;
                for (int32_t j = 0; j < kHd; ++j) d += double(k[size_t(j)]) * qs[size_t(j)];
                sc.push_back(d * 0.125);
                max = std::max(max, sc.back());
            }
            for (int32_t t = from; t < total; ++t) {
                const double w = std::exp(sc[size_t(t - from)] - max);
                sum += w;
                const std::vector<float> v = stored(kv.values(0), t, kHd);
                for (int32_t j = 0; j < kHd; ++j) want[size_t(j)] += w * v[size_t(j)];
            }
            for (int32_t j = 0; j < kHd; ++j) REQUIRE(alone[size_t(j)] == Approx(want[size_t(j)] / sum).margin(1e-5));
        }
        std::vector<int32_t> path;
        for (int32_t s = std::max(prefix, from); s < total; ++s) path.push_back(s);
        AttentionQuery node{qs.data(), listed.data(), prefix, path.data(), int32_t(path.size())};
        node.from = from;
        att.run(kv.keys(0), kv.values(0), kHd, 0.125f, {&node, 1});
        CHECK(std::memcmp(alone.data(), listed.data(), kHd * sizeof(float)) == 0);
        // Among seven other rows with other windows, runs and lists.
        std::vector<AttentionQuery> rows;
        std::vector<std::vector<int32_t>> lists(8);
        for (int32_t r = 0; r < 8; ++r) {
            if (r == 3) {
                rows.push_back(node);
                rows.back().out = batched.data() + 3 * kHd;
                continue;
            }
            const int32_t run = 1 + (r * 53) % 390;
            for (int32_t s = run; s < std::min(400, run + r); s += 2) lists[size_t(r)].push_back(s);
            AttentionQuery other{qs.data() + r * kHd, batched.data() + r * kHd, run, lists[size_t(r)].data(), int32_t(lists[size_t(r)].size())};
            other.from = (r * 37) % (run + 1);
            rows.push_back(other);
        }
        att.run(kv.keys(0), kv.values(0), kHd, 0.125f, rows);
        CHECK(std::memcmp(alone.data(), batched.data() + 3 * kHd, kHd * sizeof(float)) == 0);
    }
}

TEST_CASE("KV cache stored by head: the same stored values, attention and whole rows as stored by slot", "[cpu][attention]") {
    // The backend stores each head's slots contiguously (kv_cache.h); snapshots, prompt caches and the GPU mirrors
    // move whole slot rows. Both layouts must round the same values, attend to the same bits, and agree on rows.
    const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::Q8_0);
    CAPTURE(kv_type_name(type));
    const int32_t n = 200;
    KvCache by_head = random_cache(type, n, 7), by_slot = random_cache(type, n, 7, 0);
    CHECK(by_head.group_width() == kHd);
    CHECK(by_slot.group_width() == kWidth);
    CHECK(by_head.bytes() == by_slot.bytes());
    std::vector<uint8_t> a(size_t(n) * by_head.row_bytes()), b(a.size());
    for (const KvPart part : {KvPart::Keys, KvPart::Values}) {
        by_head.read_rows(0, part, 0, n, a.data());
        by_slot.read_rows(0, part, 0, n, b.data());
        CHECK(a == b);
    }
    std::mt19937 rng(8);
    std::normal_distribution<float> g(0.0f, 0.3f);
    std::vector<float> q(kHd), out_h(kHd), out_s(kHd);
    for (float &x : q) x = g(rng);
    BlockAttention att(kHd);
    for (int32_t head = 0; head < kHeads; ++head) {
        const int32_t extra[] = {150, 3, 199};
        const AttentionQuery qh{q.data(), out_h.data(), 130, extra, 3}, qs{q.data(), out_s.data(), 130, extra, 3};
        att.run(by_head.keys(0), by_head.values(0), head * kHd, 0.125f, {&qh, 1});
        att.run(by_slot.keys(0), by_slot.values(0), head * kHd, 0.125f, {&qs, 1});
        CHECK(std::memcmp(out_h.data(), out_s.data(), kHd * sizeof(float)) == 0);
        CHECK(stored(by_head.keys(0), 77, head * kHd) == stored(by_slot.keys(0), 77, head * kHd));
    }
    // The stored values as read for attention are the type's own conversion (Q8_0: scale x int8, the SIMD path
    // against the element loop here; F16: the half; F32: the float), from the whole-row bytes.
    by_slot.read_rows(0, KvPart::Keys, 0, n, b.data());
    for (int32_t slot : {0, 63, 199})
        for (int32_t head = 0; head < kHeads; ++head) {
            const uint8_t *row = b.data() + size_t(slot) * by_slot.row_bytes();
            std::vector<float> want(kHd);
            for (int32_t j = 0; j < kHd; ++j) {
                const int32_t e = head * kHd + j;
                if (type == KvType::F32) std::memcpy(&want[size_t(j)], row + size_t(e) * 4, 4);
                else if (type == KvType::F16) want[size_t(j)] = half_to_float(reinterpret_cast<const uint16_t *>(row)[e]);
                else {
                    const uint8_t *block = row + size_t(e / 32) * 34;
                    uint16_t d;
                    std::memcpy(&d, block, 2);
                    want[size_t(j)] = float(int8_t(block[2 + e % 32])) * half_to_float(d);
                }
            }
            CHECK(stored(by_head.keys(0), slot, head * kHd) == want);
        }
    // Rows written back land in every head's place: slots 10..19 from slots 100..109, then a slot copied.
    by_slot.read_rows(0, KvPart::Keys, 100, 10, b.data());
    by_head.write_rows(0, KvPart::Keys, 10, 10, b.data());
    by_slot.read_rows(0, KvPart::Values, 100, 10, b.data());
    by_head.write_rows(0, KvPart::Values, 10, 10, b.data());
    by_head.copy_slot(0, 5, 104);
    for (int32_t head = 0; head < kHeads; ++head) {
        CHECK(stored(by_head.keys(0), 13, head * kHd) == stored(by_slot.keys(0), 103, head * kHd));
        CHECK(stored(by_head.values(0), 19, head * kHd) == stored(by_slot.values(0), 109, head * kHd));
        CHECK(stored(by_head.keys(0), 5, head * kHd) == stored(by_slot.keys(0), 104, head * kHd));
        CHECK(stored(by_head.values(0), 5, head * kHd) == stored(by_slot.values(0), 104, head * kHd));
        CHECK(stored(by_head.keys(0), 20, head * kHd) == stored(by_slot.keys(0), 20, head * kHd));  // untouched
    }
    // A slice across heads (a whole row) reads the same either way.
    std::vector<float> row_h(kWidth), row_s(kWidth);
    kv_load_head(by_head.values(0), 150, nullptr, 1, 0, kWidth, row_h.data());
    kv_load_head(by_slot.values(0), 150, nullptr, 1, 0, kWidth, row_s.data());
    CHECK(row_h == row_s);
    // A head Q8_0 cannot store alone (48 elements: not whole blocks) keeps whole rows.
    CHECK(KvCache(1, 4, 96, KvType::Q8_0, 48).group_width() == 96);
    CHECK(KvCache(1, 4, 96, KvType::F16, 48).group_width() == 48);
}

TEST_CASE("KV cache: bytes per type, and Q8_0 refuses rows that are not whole blocks", "[cpu][attention]") {
    CHECK(KvCache(1, 10, 64, KvType::F32).bytes() == 2 * 10 * 64 * 4);
    CHECK(KvCache(1, 10, 64, KvType::F16).bytes() == 2 * 10 * 64 * 2);
    CHECK(KvCache(1, 10, 64, KvType::Q8_0).bytes() == 2 * 10 * 2 * 34);
    CHECK_THROWS(KvCache(1, 10, 48, KvType::Q8_0));
}

// The lossless invariant at long context: with 8K tokens committed (so the prefix ends inside a block and the tree
// crosses into the next), every tree node's logits equal plain decoding of its path, bit for bit, for every type.
TEST_CASE("tree verification at 8K context is bit-identical to plain decoding, every KV type", "[speculative][attention][long]") {
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = Model::load(path.string(), LoadOptions{});
    const HParams &hp = model->hparams();
    const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::Q8_0);
    CAPTURE(kv_type_name(type));
    if (!kv_type_fits(type, hp.n_embd_kv())) {
        SPECULA_SKIP("this model's KV rows are not whole Q8_0 blocks");
        return;
    }
    const int32_t n_past = 8190;
    std::mt19937 rng(9);
    std::uniform_int_distribution<int32_t> tok(3, hp.n_vocab - 1);
    std::vector<int32_t> prompt(static_cast<size_t>(n_past) + 1);
    for (int32_t &t : prompt) t = tok(rng);
    CpuRunner r(model, n_past + 64, 2, type);
    std::vector<float> logits(static_cast<size_t>(hp.n_vocab));
    for (int32_t i = 0; i < n_past; i += 512) REQUIRE(r.eval(prompt.data() + i, std::min(512, n_past - i), i, logits.data(), false));

    DraftTree t;
    t.reset(prompt.back());
    const int32_t a = t.add(0, tok(rng)), b = t.add(0, tok(rng));
    const int32_t c = t.add(a, tok(rng));
    t.add(b, tok(rng));
    const int32_t d = t.add(c, tok(rng));
    t.add(d, tok(rng));
    std::vector<uint8_t> mask;
    t.ancestor_mask(mask);
    std::vector<int32_t> pos(static_cast<size_t>(t.size()));
    for (int32_t i = 0; i < t.size(); ++i) pos[size_t(i)] = n_past + t.depth(i);
    std::vector<float> tree_logits(static_cast<size_t>(t.size()) * size_t(hp.n_vocab));
    REQUIRE(r.eval_tree(t.tokens().data(), t.size(), n_past, 0, pos.data(), mask.data(), tree_logits.data()));
    for (int32_t node = 0; node < t.size(); ++node) {
        std::vector<int32_t> node_path;
        for (int32_t j = node; j >= 0; j = t.parent(j)) node_path.insert(node_path.begin(), t.token(j));
        for (size_t i = 0; i < node_path.size(); ++i) REQUIRE(r.eval(&node_path[i], 1, n_past + int32_t(i), logits.data(), false));
        INFO("node " << node);
        REQUIRE(std::memcmp(logits.data(), tree_logits.data() + size_t(node) * size_t(hp.n_vocab), logits.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("block attention: many rows (side by side in lanes) give each row's bits alone", "[cpu][attention]") {
    // A tree of 3+ nodes over a KV group reads each prefix block with kLaneMinRows or more rows, folded in lanes
    // (two whole chunks and a last one of 9 rows, below kLaneMinRows: one by one; or more rows than kMaxLaneChunks
    // chunks hold, the rest one by one); decoding the same row alone takes the per-row kernels. Same bits, every KV type.
    const KvType type = GENERATE(KvType::F32, KvType::F16, KvType::Q8_0);
    const int32_t kRows = GENERATE(2 * kLaneRows + 9, kMaxLaneChunks * kLaneRows + 13);
    CAPTURE(kv_type_name(type), kRows);
    const KvCache kv = random_cache(type, 400, 3);
    std::mt19937 rng(6);
    std::normal_distribution<float> g(0.0f, 0.5f);
    std::vector<float> qs(size_t(kRows) * kHd), batched(qs.size()), alone(kHd);
    for (float &x : qs) x = g(rng);
    std::vector<std::vector<int32_t>> lists(static_cast<size_t>(kRows));
    std::vector<AttentionQuery> rows;
    for (int32_t r = 0; r < kRows; ++r) {
        const int32_t run = 256 + (r * 37) % 100;  // the blocks before 256 are read by every row
        for (int32_t s = run; s < std::min(400, run + r % 5); ++s) lists[size_t(r)].push_back(s);
        rows.push_back(AttentionQuery{qs.data() + r * kHd, batched.data() + r * kHd, run, lists[size_t(r)].data(), int32_t(lists[size_t(r)].size())});
    }
    BlockAttention att(kHd);
    att.run(kv.keys(0), kv.values(0), kHd, 0.125f, rows);
    for (int32_t r = 0; r < kRows; ++r) {
        AttentionQuery solo = rows[size_t(r)];
        solo.out = alone.data();
        att.run(kv.keys(0), kv.values(0), kHd, 0.125f, {&solo, 1});
        INFO("row " << r);
        CHECK(std::memcmp(alone.data(), batched.data() + r * kHd, kHd * sizeof(float)) == 0);
    }
}
