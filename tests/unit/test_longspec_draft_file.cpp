// LongSpec draft files: random drafts written for a target load against it with the target's configuration, and
// every way a file can be wrong (another target, another tokenizer, bad metadata, missing or misshapen tensors,
// truncation) gives the documented status with a message naming the culprit. Also the vocabulary checks that
// decide whether two models can draft for each other.
#include <catch2/catch.hpp>

#include "common/fixture_files.h"
#include "core/error.h"
#include "formats/half.h"
#include "gguf/file_bytes.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/vocab_compat.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <unistd.h>

using namespace specula::internal;
using test_fixtures::fixtures_dir;
using test_fixtures::have_fixture;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

// A private temp folder, removed with everything in it when the test case ends.
struct TempDir {
    fs::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = fs::temp_directory_path() /
               ("specula-longspec-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(std::random_device{}()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string file(const std::string &name) const { return (path / name).string(); }
};

fs::path model_path(const std::string &name) { return fixtures_dir() / "models" / name; }

// A fixture model (nullptr, with a visible warning, when the fixture is absent).
std::shared_ptr<const Model> load_model(const std::string &name, bool vocab_only = false) {
    const fs::path path = model_path(name);
    if (!have_fixture(path)) return nullptr;
    LoadOptions options;
    options.vocab_only = vocab_only;
    return Model::load(path.string(), options);
}

Bytes read_bytes(const std::string &path) {
    const std::string s = test_fixtures::read_file(path);
    return Bytes(s.begin(), s.end());
}

void write_bytes(const std::string &path, const uint8_t *data, size_t n) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data), std::streamsize(n));
    REQUIRE(out.good());
}

// Rebuilds a GGUF with edits: metadata replaced or dropped, tensors dropped or replaced (by name).
struct Edits {
    std::map<std::string, Value> set;
    std::set<std::string> drop_keys;
    std::set<std::string> drop_tensors;
    struct Replacement {
        uint32_t type;
        std::vector<int64_t> dims;
        Bytes data;
    };
    std::map<std::string, Replacement> replace_tensors;
};

void rewrite(const std::string &from, const std::string &to, const Edits &edits) {
    const GgufFile file = GgufFile::parse(FileBytes::open(from, false));
    GgufWriter w;
    for (const auto &[key, value] : file.metadata()) {
        if (edits.drop_keys.count(key)) continue;
        const auto it = edits.set.find(key);
        w.set(key, it != edits.set.end() ? it->second : value);
    }
    for (const auto &[key, value] : edits.set)
        if (!file.find(key)) w.set(key, value);
    for (const TensorInfo &t : file.tensors()) {
        if (edits.drop_tensors.count(t.name)) continue;
        if (const auto it = edits.replace_tensors.find(t.name); it != edits.replace_tensors.end()) {
            w.add_tensor(t.name, it->second.type, it->second.dims, it->second.data);
            continue;
        }
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.n_dims), Bytes(t.data, t.data + t.n_bytes));
    }
    w.write_file(to);
}

Bytes f32_bytes(size_t n, float value) {
    Bytes b(n * 4);
    for (size_t i = 0; i < n; ++i) std::memcpy(b.data() + 4 * i, &value, 4);
    return b;
}

// Runs f, which must throw Error(status) with a message containing `needle`.
void require_error(const std::function<void()> &f, specula_status status, const std::string &needle) {
    try {
        f();
    } catch (const Error &e) {
        INFO("message: " << e.what());
        CHECK(e.status() == status);
        CHECK_THAT(std::string(e.what()), Contains(needle));
        return;
    }
    FAIL("expected Error(" << int(status) << ") containing '" << needle << "', nothing was thrown");
}

// stories260K: D 64, 8 heads / 4 KV heads of 8, F 172.
constexpr int64_t kD = 64, kQ = 64, kKV = 32, kF = 172;
// Matrices: q, k, v, o, cross q, cross o, gate, up, down; vectors: 3 norms, 4 biases.
constexpr uint64_t kStoriesDraftParams =
    uint64_t(kD * kQ + 2 * kD * kKV + kQ * kD + kD * kQ + kQ * kD + 3 * kD * kF) + uint64_t(3 * kD + kQ + 2 * kKV + kQ);

float f32_at(const WeightView &w, size_t i) {
    float v;
    std::memcpy(&v, w.data + 4 * i, 4);
    return v;
}

}  // namespace

TEST_CASE("LongSpec random draft for stories260K loads with the target's configuration", "[speculative]") {
    const auto target = load_model("stories260K.gguf");
    if (!target) return;
    TempDir tmp;
    const std::string path = tmp.file("draft.gguf");
    write_random_longspec_draft(*target, path, RandomDraftOptions{});

    for (const bool mmap : {true, false}) {
        const auto draft = LongSpecDraft::load(path, target, mmap);
        const LongSpecDraftConfig &c = draft->config();
        CHECK(c.n_embd == 64);
        CHECK(c.n_ff == 172);
        CHECK(c.n_head == 8);
        CHECK(c.n_head_kv == 4);
        CHECK(c.head_dim == 8);
        CHECK(c.n_vocab == 512);
        CHECK(c.norm_eps == target->hparams().norm_eps);
        CHECK(c.window == 512);
        CHECK(c.cross_layer == 4);
        CHECK(draft->n_params() == kStoriesDraftParams);
        CHECK(&draft->target() == target.get());
        CHECK(draft->file().mapped() == mmap);

        const LongSpecWeights &w = draft->weights();
        CHECK(w.wq.cols == kD);
        CHECK(w.wq.rows == kQ);
        CHECK(w.wk.rows == kKV);
        CHECK(w.wo.cols == kQ);
        CHECK(w.wo.rows == kD);
        CHECK(w.ffn_down.cols == kF);
        CHECK(w.ffn_down.rows == kD);
        CHECK(w.ffn_gate.row_bytes == size_t(kD * 4));
        CHECK(w.wq.type == 0);
        CHECK(w.bk.cols == kKV);
        CHECK(f32_at(w.attn_norm, 0) == 1.0f);
        CHECK(f32_at(w.cross_norm, kD - 1) == 1.0f);
        CHECK(f32_at(w.ffn_norm, 7) == 1.0f);
        CHECK(f32_at(w.bq, 3) == 0.0f);
        CHECK(f32_at(w.cross_bq, kQ - 1) == 0.0f);

        // The matrices look like N(0, 0.02).
        double sum = 0, sum2 = 0;
        const size_t n = size_t(kD * kF);
        for (size_t i = 0; i < n; ++i) {
            const double v = f32_at(w.ffn_up, i);
            sum += v;
            sum2 += v * v;
        }
        const double mean = sum / double(n), sd = std::sqrt(sum2 / double(n) - mean * mean);
        CHECK(std::fabs(mean) < 0.002);
        CHECK(sd == Approx(0.02).epsilon(0.05));
    }
}

TEST_CASE("LongSpec random drafts are reproducible from their seed and honour the options", "[speculative]") {
    const auto target = load_model("stories260K.gguf");
    if (!target) return;
    TempDir tmp;
    RandomDraftOptions options;
    options.seed = 42;
    write_random_longspec_draft(*target, tmp.file("a.gguf"), options);
    write_random_longspec_draft(*target, tmp.file("b.gguf"), options);
    CHECK(read_bytes(tmp.file("a.gguf")) == read_bytes(tmp.file("b.gguf")));
    options.seed = 43;
    write_random_longspec_draft(*target, tmp.file("c.gguf"), options);
    CHECK(read_bytes(tmp.file("a.gguf")) != read_bytes(tmp.file("c.gguf")));

    options.n_ff = 96;
    options.window = 64;
    write_random_longspec_draft(*target, tmp.file("d.gguf"), options);
    const auto draft = LongSpecDraft::load(tmp.file("d.gguf"), target);
    CHECK(draft->config().n_ff == 96);
    CHECK(draft->config().window == 64);
    CHECK(draft->weights().ffn_gate.rows == 96);
    CHECK(draft->weights().ffn_down.cols == 96);

    RandomDraftOptions bad;
    bad.weight_type = 8;
    require_error([&] { write_random_longspec_draft(*target, tmp.file("e.gguf"), bad); }, SPECULA_ERR_INVALID_ARGUMENT, "F16");
    bad = RandomDraftOptions{};
    bad.window = 0;
    require_error([&] { write_random_longspec_draft(*target, tmp.file("e.gguf"), bad); }, SPECULA_ERR_INVALID_ARGUMENT, "window");
    require_error([&] { write_random_longspec_draft(*target, (tmp.path / "no-such-dir" / "x.gguf").string(), RandomDraftOptions{}); },
                  SPECULA_ERR_IO, "");
}

TEST_CASE("LongSpec F16 draft loads and holds the F32 draft's weights rounded to half", "[speculative]") {
    const auto target = load_model("stories260K.gguf");
    if (!target) return;
    TempDir tmp;
    RandomDraftOptions options;
    options.seed = 7;
    write_random_longspec_draft(*target, tmp.file("f32.gguf"), options);
    options.weight_type = 1;
    write_random_longspec_draft(*target, tmp.file("f16.gguf"), options);
    const auto d32 = LongSpecDraft::load(tmp.file("f32.gguf"), target);
    const auto d16 = LongSpecDraft::load(tmp.file("f16.gguf"), target);
    CHECK(d16->n_params() == kStoriesDraftParams);
    const LongSpecWeights &w = d16->weights();
    for (const WeightView *m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.cross_wq, &w.cross_wo, &w.ffn_gate, &w.ffn_up, &w.ffn_down})
        CHECK(m->type == 1);
    CHECK(w.attn_norm.type == 0);
    CHECK(w.bq.type == 0);
    CHECK(w.ffn_up.row_bytes == size_t(kD * 2));
    for (size_t i : {size_t(0), size_t(1), size_t(100), size_t(kD * kF - 1)}) {
        uint16_t h;
        std::memcpy(&h, d16->weights().ffn_up.data + 2 * i, 2);
        CHECK(h == float_to_half(f32_at(d32->weights().ffn_up, i)));
    }
}

TEST_CASE("LongSpec draft made for another target is INCOMPATIBLE", "[speculative]") {
    const auto stories = load_model("stories260K.gguf");
    const auto qwen = load_model("synth-qwen2-bias-f32.gguf");
    const auto gqa = load_model("synth-llama-gqa-f16.gguf");
    if (!stories || !qwen || !gqa) return;
    TempDir tmp;
    const std::string path = tmp.file("stories-draft.gguf");
    write_random_longspec_draft(*stories, path, RandomDraftOptions{});
    require_error([&] { LongSpecDraft::load(path, qwen); }, SPECULA_ERR_INCOMPATIBLE, "'llama' target, this target is 'qwen2'");
    require_error([&] { LongSpecDraft::load(path, gqa); }, SPECULA_ERR_INCOMPATIBLE, "n_layer 5, this target has 4");

    // Drafts for the other targets load against their own target (qwen2: its rope theta, F16 vocab of 50257).
    for (const auto &t : {qwen, gqa}) {
        const std::string own = tmp.file(t->hparams().arch_name + std::to_string(t->hparams().n_layer) + ".gguf");
        write_random_longspec_draft(*t, own, RandomDraftOptions{});
        const auto draft = LongSpecDraft::load(own, t);
        CHECK(draft->config().n_embd == t->hparams().n_embd);
        CHECK(draft->config().cross_layer == t->hparams().n_layer - 1);
        require_error([&] { LongSpecDraft::load(own, stories); }, SPECULA_ERR_INCOMPATIBLE, "this target");
    }

    // Same layer count as stories260K, other sizes: the first differing field is named.
    Edits edits;
    edits.set["longspec.embedding_length"] = value_u32(4096);
    rewrite(path, tmp.file("wide.gguf"), edits);
    require_error([&] { LongSpecDraft::load(tmp.file("wide.gguf"), stories); }, SPECULA_ERR_INCOMPATIBLE,
                  "draft was made for a target with n_embd 4096, this target has 64");
}

TEST_CASE("LongSpec draft with altered target metadata is INCOMPATIBLE", "[speculative]") {
    const auto target = load_model("stories260K.gguf");
    if (!target) return;
    TempDir tmp;
    const std::string path = tmp.file("draft.gguf");
    write_random_longspec_draft(*target, path, RandomDraftOptions{});
    const std::string edited = tmp.file("edited.gguf");

    const struct {
        const char *key;
        Value value;
        const char *needle;
    } cases[] = {
        {"longspec.target.tokenizer_fingerprint", value_string("0123456789abcdef"), "fingerprint 0123456789abcdef"},
        {"longspec.vocab_size", value_u32(513), "n_vocab 513"},
        {"longspec.attention.head_count_kv", value_u32(8), "n_head_kv 8"},
        {"longspec.rope.freq_base", value_f32(500000.0f), "freq_base 500000"},
        {"longspec.rope.dimension_count", value_u32(4), "rope dimension_count 4"},
        {"longspec.rope.scaling.type", value_string("linear"), "rope scaling 'linear'"},
        {"longspec.rope.scaling.factor", value_f32(2.0f), "rope scaling factor 2"},
        {"longspec.target.architecture", value_string("qwen2"), "'qwen2' target"},
    };
    for (const auto &c : cases) {
        INFO(c.key);
        Edits edits;
        edits.set[c.key] = c.value;
        rewrite(path, edited, edits);
        require_error([&] { LongSpecDraft::load(edited, target); }, SPECULA_ERR_INCOMPATIBLE, c.needle);
    }
}

TEST_CASE("LongSpec malformed drafts are FORMAT errors naming the culprit", "[speculative]") {
    const auto target = load_model("stories260K.gguf");
    if (!target) return;
    TempDir tmp;
    const std::string path = tmp.file("draft.gguf");
    write_random_longspec_draft(*target, path, RandomDraftOptions{});
    const std::string edited = tmp.file("edited.gguf");
    auto load_edited = [&](const Edits &edits) {
        rewrite(path, edited, edits);
        LongSpecDraft::load(edited, target);
    };

    SECTION("the untouched rewrite loads") { load_edited(Edits{}); }
    SECTION("wrong general.architecture") {
        Edits e;
        e.set["general.architecture"] = value_string("llama");
        require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, "general.architecture is 'llama'");
    }
    SECTION("a target model is not a draft") {
        require_error([&] { LongSpecDraft::load(model_path("stories260K.gguf").string(), target); }, SPECULA_ERR_FORMAT, "longspec");
    }
    SECTION("missing metadata") {
        for (const char *key : {"general.architecture", "longspec.attention.sliding_window", "longspec.target.tokenizer_fingerprint",
                                "longspec.rope.scaling.factor", "longspec.cross_attention.target_layer"}) {
            INFO(key);
            Edits e;
            e.drop_keys.insert(key);
            require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, key);
        }
    }
    SECTION("metadata of the wrong type") {
        Edits e;
        e.set["longspec.embedding_length"] = value_string("64");
        require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, "embedding_length");
    }
    SECTION("cross-attention layer beyond the target's layers") {
        Edits e;
        e.set["longspec.cross_attention.target_layer"] = value_u32(5);
        require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, "cross_attention.target_layer");
    }
    SECTION("window out of range") {
        for (const uint32_t window : {0u, (1u << 20) + 1u}) {
            Edits e;
            e.set["longspec.attention.sliding_window"] = value_u32(window);
            require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, "sliding_window");
        }
    }
    SECTION("non-finite epsilon") {
        Edits e;
        e.set["longspec.attention.layer_norm_rms_epsilon"] = value_f32(std::nanf(""));
        require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, "layer_norm_rms_epsilon");
    }
    SECTION("unknown rope scaling type") {
        Edits e;
        e.set["longspec.rope.scaling.type"] = value_string("yarn");
        require_error([&] { load_edited(e); }, SPECULA_ERR_UNSUPPORTED, "yarn");
    }
    SECTION("missing tensors") {
        for (const char *name : {"blk.0.attn_norm.weight", "blk.0.attn_v.bias", "blk.0.cross_attn_q.bias", "blk.0.ffn_up.weight"}) {
            INFO(name);
            Edits e;
            e.drop_tensors.insert(name);
            require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, std::string("tensor '") + name + "' is missing");
        }
    }
    SECTION("misshapen tensors") {
        Edits e;
        e.replace_tensors["blk.0.attn_k.bias"] = {0, {kKV + 1}, f32_bytes(size_t(kKV + 1), 0.0f)};
        require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, "'blk.0.attn_k.bias' has shape [33], expected [32]");
        Edits t;  // ffn_down stored transposed
        t.replace_tensors["blk.0.ffn_down.weight"] = {0, {kD, kF}, f32_bytes(size_t(kD * kF), 0.0f)};
        require_error([&] { load_edited(t); }, SPECULA_ERR_FORMAT, "'blk.0.ffn_down.weight' has shape [64, 172], expected [172, 64]");
        Edits m;  // a norm as a matrix
        m.replace_tensors["blk.0.ffn_norm.weight"] = {0, {kD, 1}, f32_bytes(size_t(kD), 1.0f)};
        require_error([&] { load_edited(m); }, SPECULA_ERR_FORMAT, "'blk.0.ffn_norm.weight' has shape [64, 1]");
    }
    SECTION("a norm that is not F32") {
        Edits e;
        e.replace_tensors["blk.0.cross_attn_norm.weight"] = {1, {kD}, Bytes(size_t(kD * 2), 0)};
        require_error([&] { load_edited(e); }, SPECULA_ERR_FORMAT, "'blk.0.cross_attn_norm.weight' must be F32");
    }
    SECTION("a matrix type the CPU backend cannot compute with") {
        Edits e;  // Q4_1: blocks of 32 elements in 20 bytes
        e.replace_tensors["blk.0.attn_q.weight"] = {3, {kD, kQ}, Bytes(size_t(kD * kQ / 32 * 20), 0)};
        require_error([&] { load_edited(e); }, SPECULA_ERR_UNSUPPORTED, "blk.0.attn_q.weight");
    }
    SECTION("a missing file") {
        require_error([&] { LongSpecDraft::load(tmp.file("absent.gguf"), target); }, SPECULA_ERR_IO, "");
    }
}

TEST_CASE("LongSpec draft truncated anywhere gives IO or FORMAT and never crashes", "[speculative]") {
    const auto target = load_model("stories260K.gguf");
    if (!target) return;
    TempDir tmp;
    const std::string path = tmp.file("draft.gguf");
    RandomDraftOptions options;
    options.weight_type = 1;
    write_random_longspec_draft(*target, path, options);
    const Bytes bytes = read_bytes(path);
    const size_t data_offset = GgufFile::parse(FileBytes::open(path, false)).data_offset();
    REQUIRE(data_offset < bytes.size());

    // Every offset through the header, metadata and tensor directory; then a stride through the data.
    std::vector<size_t> cuts;
    for (size_t n = 0; n <= data_offset + 8; ++n) cuts.push_back(n);
    for (size_t n = data_offset + 9; n < bytes.size(); n += 1021) cuts.push_back(n);
    cuts.push_back(bytes.size() - 1);

    // Longest first, so each cut is a resize of one file rather than a fresh write.
    std::sort(cuts.rbegin(), cuts.rend());
    const std::string cut_path = tmp.file("cut.gguf");
    write_bytes(cut_path, bytes.data(), bytes.size());
    int failures = 0;
    for (const size_t n : cuts) {
        fs::resize_file(cut_path, n);
        try {
            LongSpecDraft::load(cut_path, target, n % 2 == 0);
            FAIL("a file truncated to " << n << " of " << bytes.size() << " bytes loaded");
        } catch (const Error &e) {
            if (e.status() != SPECULA_ERR_FORMAT && e.status() != SPECULA_ERR_IO) {
                ++failures;
                INFO("truncated to " << n << ": " << e.what());
                CHECK(false);
            }
        }
    }
    CHECK(failures == 0);
    // The whole file still loads (the loop did not just fail on everything).
    write_bytes(cut_path, bytes.data(), bytes.size());
    CHECK(LongSpecDraft::load(cut_path, target)->n_params() == kStoriesDraftParams);
}

TEST_CASE("tokenizer_fingerprint is equal for equal vocabularies only", "[speculative]") {
    const auto stories = load_model("stories260K.gguf", true);
    const auto l3 = load_model("stories260K-L3.gguf", true);
    const auto code = load_model("code-7m/model.gguf", true);
    const auto qwen = load_model("synth-qwen2-bias-f32.gguf", true);
    if (!stories || !l3 || !code || !qwen) return;
    const std::string fp = tokenizer_fingerprint(stories->vocab());
    REQUIRE(fp.size() == 16);
    CHECK(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(tokenizer_fingerprint(stories->vocab()) == fp);
    CHECK(tokenizer_fingerprint(l3->vocab()) == fp);
    CHECK(tokenizer_fingerprint(code->vocab()) != fp);
    CHECK(tokenizer_fingerprint(qwen->vocab()) != fp);
    CHECK(tokenizer_fingerprint(qwen->vocab()) != tokenizer_fingerprint(code->vocab()));
    CHECK(tokenizer_fingerprint(Vocab()) != fp);
}

TEST_CASE("check_draft_vocab accepts the same vocabulary and names the first difference otherwise", "[speculative]") {
    const auto stories = load_model("stories260K.gguf", true);
    const auto l3 = load_model("stories260K-L3.gguf", true);
    const auto code = load_model("code-7m/model.gguf", true);
    const auto qwen = load_model("synth-qwen2-bias-f32.gguf", true);
    if (!stories || !l3 || !code || !qwen) return;
    CHECK_NOTHROW(check_draft_vocab(*stories, *l3));
    CHECK_NOTHROW(check_draft_vocab(*l3, *stories));
    CHECK_NOTHROW(check_draft_vocab(*code, *code));
    require_error([&] { check_draft_vocab(*stories, *code); }, SPECULA_ERR_INCOMPATIBLE, "the target has 512 tokens but the draft has 4096");
    require_error([&] { check_draft_vocab(*stories, *qwen); }, SPECULA_ERR_INCOMPATIBLE, "'llama' but the draft's is 'gpt2'");
    require_error([&] { check_draft_vocab(*qwen, *stories); }, SPECULA_ERR_INCOMPATIBLE, "'gpt2' but the draft's is 'llama'");
}

TEST_CASE("check_draft_vocab names the first token whose text differs", "[speculative]") {
    // stories260K with one token renamed: a vocabulary of the same size and kind but another meaning for an id.
    const fs::path source = model_path("stories260K.gguf");
    if (!have_fixture(source)) return;
    const auto stories = load_model("stories260K.gguf", true);
    const GgufFile file = GgufFile::parse(FileBytes::open(source.string(), false));
    const auto *tokens = file.get_array("tokenizer.ggml.tokens", ValueType::STRING);
    REQUIRE(tokens != nullptr);
    std::vector<std::string> texts;
    for (const Value &v : *tokens) texts.push_back(v.s);
    REQUIRE(texts.size() > 300);
    const std::string original = texts[300];
    texts[300] = original + "x";

    TempDir tmp;
    Edits edits;
    edits.set["tokenizer.ggml.tokens"] = value_array(ValueType::STRING, [&] {
        std::vector<Value> items;
        for (const std::string &t : texts) items.push_back(value_string(t));
        return items;
    }());
    rewrite(source.string(), tmp.file("renamed.gguf"), edits);
    LoadOptions options;
    options.vocab_only = true;
    const auto renamed = Model::load(tmp.file("renamed.gguf"), options);
    CHECK(tokenizer_fingerprint(renamed->vocab()) != tokenizer_fingerprint(stories->vocab()));
    require_error([&] { check_draft_vocab(*stories, *renamed); }, SPECULA_ERR_INCOMPATIBLE,
                  "token 300 is '" + original + "' in the target but '" + original + "x' in the draft");
}
