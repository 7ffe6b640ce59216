// The pieces of session snapshots: the container (header, sections, hashes, format versions, KV chunks with
// byte shuffling, their order and the partial restore), model fingerprints, the sampler's generator state, and the
// drafters' state: the LongSpec ring saved and loaded verbatim, the n-gram tables rebuilt to the same drafts, a
// draft model's cache position.
#include <catch2/catch.hpp>

#include "backends/cpu/cpu_runner.h"
#include "core/thread_pool.h"
#include "formats/half.h"
#include "common/error_status.h"
#include "core/error.h"
#include "model/fingerprint.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "snapshot/snapshot_file.h"
#include "speculative/longspec_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"

#include <cstring>
#include <random>
#include <vector>

using namespace specula::internal;
using test_fixtures::error_status;

namespace {

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";
const std::string kDraftPath = SPECULA_SOURCE_DIR "/models/drafts/stories260K.longspec.gguf";

std::shared_ptr<const Model> stories() {
    static const std::shared_ptr<const Model> model = Model::load(kModelPath, {});
    return model;
}

// A KV cache of n_layer layers held in plain vectors, as KvRows sees a backend's.
struct FakeCache {
    KvType type;
    int32_t n_layer, n_slots, width;
    std::vector<uint8_t> k, v;
    FakeCache(KvType t, int32_t layers, int32_t slots, int32_t w) : type(t), n_layer(layers), n_slots(slots), width(w) {
        k.assign(size_t(layers) * size_t(slots) * size_t(w) * kv_type_size(t), 0);
        v.assign(k.size(), 0);
    }
    size_t row_bytes() const { return size_t(width) * kv_type_size(type); }
    uint8_t *at(uint32_t layer, uint32_t kind, int32_t slot) {
        return (kind == 0 ? k : v).data() + (size_t(layer) * size_t(n_slots) + size_t(slot)) * row_bytes();
    }
    KvRows rows() {
        KvRows r;
        r.type = type;
        r.row_width = width;
        r.read = [this](const KvChunkId &c, void *dst) { std::memcpy(dst, at(c.layer, c.kind, c.first), size_t(c.count) * row_bytes()); };
        r.write = [this](const KvChunkId &c, const void *src) { std::memcpy(at(c.layer, c.kind, c.first), src, size_t(c.count) * row_bytes()); };
        return r;
    }
};

// Values shaped like keys and values (small floats, or their F16 bits).
void fill(FakeCache &c, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.5f);
    const size_t n = c.k.size() / kv_type_size(c.type);
    for (std::vector<uint8_t> *buf : {&c.k, &c.v})
        for (size_t i = 0; i < n; ++i) {
            const float x = dist(rng);
            if (c.type == KvType::F32) {
                std::memcpy(buf->data() + 4 * i, &x, 4);
            } else {
                const uint16_t h = float_to_half(x);
                std::memcpy(buf->data() + 2 * i, &h, 2);
            }
        }
}

struct Written {
    std::vector<uint8_t> bytes;
    uint64_t kv_raw = 0;
};

Written write_snapshot(const SnapshotHeader &h, FakeCache &cache, int level, ThreadPool &pool) {
    Written w;
    SnapshotWriter out([&](const void *p, size_t n) { w.bytes.insert(w.bytes.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n); },
                       level, pool);
    out.write_header(h);
    const std::vector<uint8_t> small = {1, 2, 3, 4, 5};
    out.write_section(kTagTokens, small);
    out.write_kv(kv_chunk_plan(0, h.n_layer, h.n_kv, h.chunk_slots), cache.rows());
    out.write_end();
    CHECK(out.bytes_written() == w.bytes.size());
    w.kv_raw = out.kv_raw_bytes();
    return w;
}

SnapshotHeader header_for(const FakeCache &c, int32_t chunk_slots) {
    SnapshotHeader h;
    h.kv_type = c.type;
    h.n_ctx = 4096;
    h.n_tokens = c.n_slots;
    h.n_kv = c.n_slots;
    h.n_layer = c.n_layer;
    h.n_embd_kv = c.width;
    h.n_vocab = 100;
    h.chunk_slots = chunk_slots;
    h.backend = "test";
    return h;
}

DraftTree draft_with(Drafter &d, const std::vector<int32_t> &tokens, int32_t budget, TreeShape shape) {
    DraftTree tree;
    tree.reset(tokens.back());
    DraftRequest request;
    request.tokens = tokens;
    request.n_target_kv = int32_t(tokens.size()) - 1;
    request.node_budget = budget;
    request.shape = shape;
    d.draft(request, tree);
    return tree;
}

std::vector<std::pair<int32_t, int32_t>> layout(const DraftTree &tree) {
    std::vector<std::pair<int32_t, int32_t>> out;
    for (int32_t i = 0; i < tree.size(); ++i) out.emplace_back(tree.parent(i), tree.token(i));
    return out;
}

}  // namespace

TEST_CASE("snapshot container: KV rows round-trip through shuffled zstd chunks, F32 and F16", "[snapshot][unit]") {
    ThreadPool pool(2);
    const KvType type = GENERATE(KvType::F32, KvType::F16);
    const int level = GENERATE(0, 1, 5);
    CAPTURE(kv_type_name(type), level);
    FakeCache src(type, 3, 70, 48);
    fill(src, 7);
    const SnapshotHeader h = header_for(src, 16);  // 70 slots: chunks of 16, 16, 16, 16 and 6
    const Written w = write_snapshot(h, src, level, pool);
    CHECK(w.kv_raw == src.k.size() + src.v.size());
    if (level > 0 && type == KvType::F32) CHECK(w.bytes.size() < w.kv_raw);  // the exponent bytes compress once shuffled

    const ParsedSnapshot p = parse_snapshot(w.bytes);
    CHECK(p.header.n_kv == 70);
    CHECK(p.header.backend == "test");
    REQUIRE(p.sections.size() == 1 + 3 * 2 * 5);
    CHECK(decode_section(p.sections[0], 5, "TOKS") == std::vector<uint8_t>{1, 2, 3, 4, 5});
    const std::vector<KvChunkId> plan = kv_chunk_plan(0, 3, 70, 16);
    const std::span<const SectionView> chunks = std::span<const SectionView>(p.sections).subspan(1);

    for (size_t budget : {size_t(0), size_t(1) << 30}) {  // decoded twice, or kept from the check
        FakeCache dst(type, 3, 70, 48);
        const KvRows rows = dst.rows();
        StagedKv staged;
        read_kv_chunks(chunks, plan, type, 48, pool, nullptr, 70, budget, staged);
        CHECK(staged.complete == (budget > 0));
        CHECK(dst.k == std::vector<uint8_t>(dst.k.size(), 0));  // checking writes nothing
        read_kv_chunks(chunks, plan, type, 48, pool, &rows, 70, 0, staged);
        CHECK(dst.k == src.k);
        CHECK(dst.v == src.v);
    }
    // A partial restore writes only the slots below its limit (a chunk crossing it is cut).
    FakeCache part(type, 3, 70, 48);
    const KvRows rows = part.rows();
    StagedKv staged;
    read_kv_chunks(chunks, plan, type, 48, pool, &rows, 21, 0, staged);
    for (uint32_t layer = 0; layer < 3; ++layer) {
        CHECK(std::memcmp(part.at(layer, 0, 0), src.at(layer, 0, 0), 21 * part.row_bytes()) == 0);
        CHECK(std::memcmp(part.at(layer, 1, 0), src.at(layer, 1, 0), 21 * part.row_bytes()) == 0);
        const std::vector<uint8_t> zero(part.row_bytes(), 0);
        CHECK(std::memcmp(part.at(layer, 0, 21), zero.data(), zero.size()) == 0);
    }
}

TEST_CASE("snapshot container: damage, truncation, reordered chunks and other format versions", "[snapshot][unit]") {
    ThreadPool pool(1);
    FakeCache src(KvType::F32, 2, 10, 8);
    fill(src, 3);
    SnapshotHeader h = header_for(src, 4);
    const Written w = write_snapshot(h, src, 1, pool);

    // Every byte flipped and every cut is FORMAT.
    for (size_t i = 0; i < w.bytes.size(); ++i) {
        std::vector<uint8_t> bad = w.bytes;
        bad[i] ^= 0x20;
        if (error_status([&] { parse_snapshot(bad); }) != SPECULA_ERR_FORMAT) FAIL("byte " << i << " flipped was not refused");
        const std::vector<uint8_t> cut(w.bytes.begin(), w.bytes.begin() + ptrdiff_t(i));
        if (error_status([&] { parse_snapshot(cut); }) != SPECULA_ERR_FORMAT) FAIL("cut at " << i << " was not refused");
    }

    // Another format version, with an intact header, is UNSUPPORTED with both versions named.
    SnapshotHeader future = h;
    future.version = 2;
    const Written v2 = write_snapshot(future, src, 1, pool);
    try {
        parse_snapshot(v2.bytes);
        FAIL("version 2 was accepted");
    } catch (const Error &e) {
        CHECK(e.status() == SPECULA_ERR_UNSUPPORTED);
        CHECK_THAT(e.what(), Catch::Matchers::Contains("format version 2") && Catch::Matchers::Contains("reads version 1"));
    }

    // Chunks in another order, or a plan that expects other slots, are refused when checked.
    const ParsedSnapshot p = parse_snapshot(w.bytes);
    std::vector<SectionView> chunks(p.sections.begin() + 1, p.sections.end());
    std::swap(chunks[0], chunks[1]);
    StagedKv staged;
    CHECK(error_status([&] { read_kv_chunks(chunks, kv_chunk_plan(0, 2, 10, 4), KvType::F32, 8, pool, nullptr, 10, 0, staged); }) ==
          SPECULA_ERR_FORMAT);
    std::swap(chunks[0], chunks[1]);
    CHECK(error_status([&] { read_kv_chunks(chunks, kv_chunk_plan(0, 2, 10, 5), KvType::F32, 8, pool, nullptr, 10, 0, staged); }) ==
          SPECULA_ERR_FORMAT);
    CHECK(error_status([&] { read_kv_chunks(chunks, kv_chunk_plan(0, 2, 10, 4), KvType::F16, 8, pool, nullptr, 10, 0, staged); }) ==
          SPECULA_ERR_FORMAT);
    CHECK(error_status([&] { read_kv_chunks(chunks, kv_chunk_plan(0, 2, 10, 4), KvType::F32, 8, pool, nullptr, 10, 0, staged); }) == SPECULA_OK);
    // A section may not claim more than its bound (no allocation from a hostile size).
    CHECK(error_status([&] { decode_section(p.sections[1], 10, "KV"); }) == SPECULA_ERR_FORMAT);
}

TEST_CASE("fingerprints: every byte counts, thread count does not", "[snapshot][unit]") {
    std::vector<uint8_t> data(size_t(150) << 20);  // three 64 MiB blocks
    std::mt19937_64 rng(5);
    for (size_t i = 0; i < data.size(); i += 8) {
        const uint64_t x = rng();
        std::memcpy(data.data() + i, &x, 8);
    }
    ThreadPool pool(3);
    const Fingerprint one = fingerprint_bytes(data.data(), data.size(), nullptr);
    CHECK(fingerprint_bytes(data.data(), data.size(), &pool) == one);
    CHECK(one.hex().size() == 32);
    data[size_t(100) << 20] ^= 1;
    CHECK(fingerprint_bytes(data.data(), data.size(), &pool) != one);
    CHECK(fingerprint_bytes(data.data(), data.size() - 1, &pool) != one);
    CHECK(stories()->fingerprint() == fingerprint_bytes(stories()->file().bytes().data(), stories()->file().bytes().size(), nullptr));
}

TEST_CASE("sampler: the generator's position round-trips as text, and junk is FORMAT", "[snapshot][unit]") {
    SamplerConfig c;
    c.temperature = 1.0f;
    c.seed = 77;
    Sampler a(c);
    for (int i = 0; i < 1000; ++i) a.uniform();
    Sampler b(c);
    b.set_rng_state(a.rng_state());
    for (int i = 0; i < 100; ++i) CHECK(a.uniform() == b.uniform());
    CHECK(error_status([&] { b.set_rng_state("1 2 3"); }) == SPECULA_ERR_FORMAT);
    CHECK(error_status([&] { b.set_rng_state("abc"); }) == SPECULA_ERR_FORMAT);
    CHECK(error_status([&] { b.set_rng_state(a.rng_state() + " 5"); }) == SPECULA_ERR_FORMAT);
}

TEST_CASE("drafter state: the LongSpec ring is saved and loaded verbatim and drafts the same trees", "[snapshot][unit]") {
    const auto model = stories();
    const auto draft = LongSpecDraft::load(kDraftPath, model);
    CpuRunner runner(model, 256, 2);
    std::vector<int32_t> tokens = model->vocab().tokenize("Once upon a time, there was a little girl named Lily. She loved to play", true, false);
    std::vector<float> logits(size_t(model->hparams().n_vocab));
    REQUIRE(runner.eval(tokens.data(), int32_t(tokens.size()) - 1, 0, logits.data(), false));
    const TreeShape shape = TreeShape{{4, 8, 8}};

    auto a = make_longspec_drafter(draft, 64, runner);
    draft_with(*a, tokens, 21, shape);
    const std::vector<uint8_t> state = a->save_state();
    auto b = make_longspec_drafter(draft, 64, runner);
    CHECK(b->save_state() != state);  // a fresh ring
    CHECK(b->check_state(state, int32_t(tokens.size())) == 0);
    b->load_state(state);
    CHECK(b->save_state() == state);
    // Both continue identically as the context grows.
    for (int step = 0; step < 6; ++step) {
        const int32_t next = tokens[size_t(step) % tokens.size()];
        REQUIRE(runner.eval(&tokens.back(), 1, int32_t(tokens.size()) - 1, logits.data(), false));
        tokens.push_back(next);
        CHECK(layout(draft_with(*a, tokens, 21, shape)) == layout(draft_with(*b, tokens, 21, shape)));
    }
    // Refused: a state for a longer context, a truncated state, another draft's ring.
    CHECK(error_status([&] { b->check_state(state, 3); }) == SPECULA_ERR_FORMAT);
    CHECK(error_status([&] { b->check_state(std::span<const uint8_t>(state.data(), state.size() - 1), 100); }) == SPECULA_ERR_FORMAT);
    CHECK(error_status([&] { b->check_state({}, 100); }) == SPECULA_ERR_FORMAT);
}

TEST_CASE("drafter state: n-gram tables rebuilt from the context draft exactly as the saved ones", "[snapshot][unit]") {
    std::mt19937 rng(11);
    std::vector<int32_t> text;
    for (int i = 0; i < 3000; ++i) text.push_back(int32_t(rng() % 40));  // a small alphabet: many repeats
    NgramConfig config;
    config.lag = 3;
    auto a = make_ngram_drafter(config);
    std::vector<int32_t> tokens(text.begin(), text.begin() + 10);
    std::unique_ptr<Drafter> b;
    bool rewound = false;
    for (size_t n = 10; n < text.size(); n += 1 + rng() % 7) {
        tokens.assign(text.begin(), text.begin() + ptrdiff_t(n));
        const auto expected = layout(draft_with(*a, tokens, 40, TreeShape::chain(1)));
        if (b) CHECK(layout(draft_with(*b, tokens, 40, TreeShape::chain(1))) == expected);
        if (n > 500 && n < 520) {  // snapshot here; later also across a rewind
            b = make_ngram_drafter(config);
            const std::vector<uint8_t> state = a->save_state();
            CHECK(b->check_state(state, int32_t(n)) == 0);
            CHECK(error_status([&] { b->check_state(state, 2); }) == SPECULA_ERR_FORMAT);
            b->load_state(state);
        }
        if (n > 2000 && !rewound) {
            rewound = true;
            a->rewind(int32_t(n) - 50);
            b->rewind(int32_t(n) - 50);
            n -= 50;
        }
    }
    REQUIRE(b);
    CHECK(rewound);
    CHECK(a->allocated_bytes() == b->allocated_bytes());
}

TEST_CASE("a draft model evaluates the prompt when the session does (prefill), other drafters wait", "[speculative][unit]") {
    const auto model = stories();
    ThreadPool pool(1);
    std::vector<int32_t> tokens = model->vocab().tokenize("Once upon a time, there was", true, false);
    const std::span<const int32_t> committed(tokens.data(), tokens.size() - 1);
    auto d = make_model_drafter(model, *model, std::make_unique<CpuRunner>(model, 128, pool));
    CHECK(d->prefill(committed) == int32_t(committed.size()));
    CHECK(d->own_cache_slots() == int32_t(committed.size()));
    CHECK(d->prefill(committed) == 0);  // nothing new
    d->rewind(3);
    CHECK(d->prefill(committed) == int32_t(committed.size()) - 3);
    // The round after a prefill drafts from the cache it filled: the same tree as a drafter that caught up itself.
    DraftTree a, b;
    auto fresh = make_model_drafter(model, *model, std::make_unique<CpuRunner>(model, 128, pool));
    DraftRequest request;
    request.tokens = tokens;
    request.n_target_kv = int32_t(committed.size());
    request.shape = TreeShape::chain(3);
    request.node_budget = 4;
    a.reset(tokens.back());
    b.reset(tokens.back());
    d->draft(request, a);
    fresh->draft(request, b);
    CHECK(a.tokens() == b.tokens());
    auto m = make_merged_drafter(make_model_drafter(model, *model, std::make_unique<CpuRunner>(model, 128, pool)), make_ngram_drafter({}), 4);
    CHECK(m->prefill(committed) == int32_t(committed.size()));
    CHECK(make_ngram_drafter({})->prefill(committed) == -1);
}

TEST_CASE("drafter state: a draft model's cache position, its rows travel as KV chunks", "[snapshot][unit]") {
    const auto model = stories();
    ThreadPool pool(1);
    auto d = make_model_drafter(model, *model, std::make_unique<CpuRunner>(model, 128, pool));
    std::vector<int32_t> tokens = model->vocab().tokenize("Once upon a time, there was", true, false);
    draft_with(*d, tokens, 4, TreeShape::chain(3));
    REQUIRE(d->own_cache() != nullptr);
    CHECK(d->own_cache_slots() == int32_t(tokens.size()) - 1);
    const std::vector<uint8_t> state = d->save_state();
    auto e = make_model_drafter(model, *model, std::make_unique<CpuRunner>(model, 128, pool));
    CHECK(e->check_state(state, int32_t(tokens.size())) == int32_t(tokens.size()) - 1);
    CHECK(error_status([&] { e->check_state(state, 2); }) == SPECULA_ERR_FORMAT);
    e->load_state(state);
    CHECK(e->own_cache_slots() == d->own_cache_slots());
    // Merged with n-grams: both states, and the draft model's cache.
    auto m = make_merged_drafter(make_model_drafter(model, *model, std::make_unique<CpuRunner>(model, 128, pool)), make_ngram_drafter({}), 4);
    draft_with(*m, tokens, 8, TreeShape::chain(3));
    auto m2 = make_merged_drafter(make_model_drafter(model, *model, std::make_unique<CpuRunner>(model, 128, pool)), make_ngram_drafter({}), 4);
    CHECK(m2->check_state(m->save_state(), int32_t(tokens.size())) == int32_t(tokens.size()) - 1);
    CHECK(m2->own_cache() != nullptr);
}
