// The malformed-input catalogue (issue 21, "Reliability"; the table is docs/reliability.md): bad files, misuse of the
// C ABI and of the C++ wrapper, and cancellation at every phase of generation, each entry with the status and the
// message fragment the library documents. Every entry is a Catch2 SECTION named by its id, so a failure names it;
// SPECULA_CATALOGUE_MD=FILE specula_catalogue_tests writes the table (the CLI's entries: tests/cli/bad_arguments.sh).
//
// After an entry that misuses an object (a session, a model), the object must still work: the library reports the
// problem and loses nothing. Built with the C shims compiled in beside specula_engine (tests/CMakeLists.txt), so the
// cancellation entries can reach the session's phase hook (sdk/src/session/phase_hook.h).
#include <specula/specula.h>
#include <specula/specula.hpp>
#include <specula/specula_experimental.h>

#include <catch2/catch.hpp>

#include "common/gguf_bytes.h"
#include "common/skip.h"
#include "common/temp_dir.h"
#include "session/phase_hook.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace test_gguf;
using specula::internal::Phase;

namespace {

const std::string kSource = SPECULA_SOURCE_DIR;
const std::string kModel = kSource + "/models/stories260K.gguf";
const std::string kDraft = kSource + "/models/drafts/stories260K.longspec.gguf";
const std::string kOtherModel = kSource + "/models/code-7m-f16.gguf";                 // vocab 4096, n_embd 256
const std::string kOtherDraft = kSource + "/models/drafts/code-7m.longspec.gguf";     // a draft for code-7m
std::string fixtures_dir() {
    const char *env = std::getenv("SPECULA_FIXTURES_DIR");
    return env != nullptr && *env != '\0' ? std::string(env) : std::string(SPECULA_FIXTURES_DIR);
}
std::string draft_model_path() { return fixtures_dir() + "/models/stories260K-L3.gguf"; }  // same vocabulary, 3 layers

// ---- outcomes ----------------------------------------------------------------------------------------------

struct Outcome {
    specula_status status = SPECULA_OK;
    std::string message;
};

// The status of a C call and its error's message, the error freed; checks that *err is set exactly on failure.
Outcome outcome(specula_status status, specula_error *&err) {
    Outcome o{status, specula_error_message(err)};
    CHECK((status == SPECULA_OK) == (err == nullptr));
    if (err != nullptr) CHECK(specula_error_status(err) == status);
    specula_error_destroy(err);
    err = nullptr;
    return o;
}

// The status and message of a specula::Error the wrapper throws (OK when it throws none).
template <class F> Outcome thrown(F &&fn) {
    try {
        fn();
    } catch (const specula::Error &e) {
        return {e.status(), e.what()};
    }
    return {};
}

struct Entry {
    std::string id;
    std::string input;       // what is wrong
    specula_status status;   // the documented status
    std::string message;     // a fragment the message must contain ("" for OK)
    std::function<Outcome()> run;
};

void check_entry(const Entry &e, const Outcome &o) {
    INFO("entry " << e.id << ": " << e.input);
    INFO("got " << specula_status_string(o.status) << ": \"" << o.message << "\"");
    CHECK(o.status == e.status);
    if (e.status != SPECULA_OK) {
        CHECK(!o.message.empty());
        CHECK_THAT(o.message, Catch::Matchers::Contains(e.message, Catch::CaseSensitive::No));
    }
}

// With SPECULA_CATALOGUE_MD=FILE in the environment, every entry run appends its row (id, input, status, the
// fragment checked, the message this run got) to FILE once: the table of docs/reliability.md.
void record_markdown(const Entry &e, const Outcome &o) {
    static std::set<std::string> written;
    const char *path = std::getenv("SPECULA_CATALOGUE_MD");
    if (path == nullptr || *path == '\0' || !written.insert(e.id).second) return;
    std::ofstream out(path, std::ios::app);
    std::string got = o.message;
    for (char &c : got)
        if (c == '|' || c == '\n') c = ' ';
    out << "| `" << e.id << "` | " << e.input << " | " << specula_status_string(e.status) << " | "
        << (e.message.empty() ? std::string() : "\"" + e.message + "\"") << " | " << got << " |\n";
}

// Runs every entry of a table, each in its own SECTION named by its id.
void run_table(const std::vector<Entry> &table) {
    for (const Entry &e : table) {
        SECTION(e.id) {
            INFO("entry " << e.id << ": " << e.input);
            const Outcome o = e.run();
            check_entry(e, o);
            record_markdown(e, o);
        }
    }
}

// ---- shared objects -----------------------------------------------------------------------------------------

struct ModelPtr {
    specula_model *m = nullptr;
    ~ModelPtr() { specula_model_destroy(m); }
};

specula_model *load_model(const std::string &path) {
    specula_model *m = nullptr;
    specula_error *err = nullptr;
    const specula_status st = specula_model_load(path.c_str(), nullptr, &m, &err);
    INFO("loading " << path << ": " << specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(st == SPECULA_OK);
    return m;
}

specula_session *new_session(specula_model *model, int32_t n_ctx = 256, int32_t n_batch = 64) {
    specula_session_options so;
    specula_session_options_init(&so);
    so.n_ctx = n_ctx;
    so.n_threads = 2;
    so.n_batch = n_batch;
    so.backend = SPECULA_BACKEND_CPU;
    specula_sampler_options sa;
    specula_sampler_options_init(&sa);
    sa.temperature = 0.0f;
    specula_session *s = nullptr;
    specula_error *err = nullptr;
    const specula_status st = specula_session_create(model, &so, &sa, &s, &err);
    INFO(specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(st == SPECULA_OK);
    return s;
}

std::vector<int32_t> session_tokens(specula_session *s) {
    std::vector<int32_t> out(size_t(std::max(0, specula_session_n_tokens(s))));
    size_t n = 0;
    specula_error *err = nullptr;
    REQUIRE(specula_session_tokens(s, out.data(), out.size(), &n, &err) == SPECULA_OK);
    out.resize(n);
    return out;
}

// Greedy generation of n tokens (end-of-generation tokens do not stop it); returns the status.
specula_status generate(specula_session *s, int32_t n, std::vector<int32_t> *emitted = nullptr, std::string *message = nullptr) {
    specula_generate_options g;
    specula_generate_options_init(&g);
    g.max_tokens = n;
    g.stop_at_eog = 0;
    specula_error *err = nullptr;
    auto on_token = [](const specula_token_event *ev, void *user) -> int32_t {
        if (user != nullptr && ev->token >= 0) static_cast<std::vector<int32_t> *>(user)->push_back(ev->token);
        return 1;
    };
    const specula_status st = specula_session_generate(s, &g, on_token, emitted, nullptr, &err);
    if (message != nullptr) *message = specula_error_message(err);
    specula_error_destroy(err);
    return st;
}

// The session still works: a token appended and one generated.
void still_usable(specula_session *s) {
    INFO("the session must still work after the entry");
    const int32_t before = specula_session_n_tokens(s);
    specula_error *err = nullptr;
    const int32_t bos = 1;
    REQUIRE(specula_session_append_tokens(s, &bos, 1, &err) == SPECULA_OK);
    REQUIRE(generate(s, 1) == SPECULA_OK);
    CHECK(specula_session_n_tokens(s) == before + 2);
    REQUIRE(specula_session_rewind(s, before, &err) == SPECULA_OK);
}

std::vector<uint8_t> save_buffer(specula_session *s, int32_t scope = SPECULA_SNAPSHOT_FULL) {
    specula_snapshot_options o;
    specula_snapshot_options_init(&o);
    o.scope = scope;
    size_t size = 0;
    specula_error *err = nullptr;
    REQUIRE(specula_session_save_buffer(s, &o, nullptr, 0, &size, &err) == SPECULA_ERR_BUFFER_TOO_SMALL);
    specula_error_destroy(err);
    err = nullptr;
    std::vector<uint8_t> buf(size);
    REQUIRE(specula_session_save_buffer(s, &o, buf.data(), buf.size(), &size, &err) == SPECULA_OK);
    buf.resize(size);
    return buf;
}

// ---- files: GGUF models -------------------------------------------------------------------------------------

// Loads the bytes as a model file through the C API: the outcome, with *out checked to stay NULL on failure.
Outcome load_bytes(const test_fixtures::TempDir &dir, const std::string &name, const Bytes &bytes) {
    const std::string path = dir.file(name);
    write_bytes(path, bytes);
    specula_model *m = reinterpret_cast<specula_model *>(uintptr_t(1));  // must be overwritten
    specula_error *err = nullptr;
    const specula_status st = specula_model_load(path.c_str(), nullptr, &m, &err);
    if (st != SPECULA_OK) CHECK(m == nullptr);
    specula_model_destroy(st == SPECULA_OK ? m : nullptr);
    return outcome(st, err);
}

// Offset of the first tensor info (the first tensor's name) and the end of the tensor infos, from the model's names.
std::vector<Entry> gguf_entries(const test_fixtures::TempDir &dir) {
    const auto base = std::make_shared<const Bytes>(read_bytes(kModel));
    auto mutated = [&dir, base](const std::string &id, const std::function<void(Bytes &)> &mutate) {
        return [&dir, base, id, mutate] {
            Bytes b = *base;
            mutate(b);
            return load_bytes(dir, id + ".gguf", b);
        };
    };
    auto cut = [mutated](const std::string &id, const std::function<size_t(const Bytes &)> &where) {
        return mutated(id, [where](Bytes &b) { b.resize(where(b)); });
    };
    return {
        {"gguf-empty", "an empty model file", SPECULA_ERR_FORMAT, "truncated", cut("gguf-empty", [](const Bytes &) { return 0; })},
        {"gguf-trunc-magic", "truncated inside the magic (2 bytes)", SPECULA_ERR_FORMAT, "truncated",
         cut("gguf-trunc-magic", [](const Bytes &) { return 2; })},
        {"gguf-trunc-header", "truncated inside the tensor count (12 bytes)", SPECULA_ERR_FORMAT, "truncated",
         cut("gguf-trunc-header", [](const Bytes &) { return 12; })},
        {"gguf-trunc-metadata-key", "truncated inside a metadata key", SPECULA_ERR_FORMAT, "runs past the end",
         cut("gguf-trunc-metadata-key", [](const Bytes &b) { return after_string(b, "llama.block_count") - 3; })},
        {"gguf-trunc-metadata-array", "truncated inside the tokenizer.ggml.tokens array", SPECULA_ERR_FORMAT, "truncated or corrupt",
         cut("gguf-trunc-metadata-array", [](const Bytes &b) { return after_string(b, "tokenizer.ggml.tokens") + 100; })},
        {"gguf-trunc-tensor-info", "truncated inside a tensor info (after its name)", SPECULA_ERR_FORMAT, "truncated",
         cut("gguf-trunc-tensor-info", [](const Bytes &b) { return after_string(b, "output_norm.weight") + 2; })},
        {"gguf-trunc-data", "truncated inside the tensor data (last byte missing)", SPECULA_ERR_FORMAT, "past the end",
         cut("gguf-trunc-data", [](const Bytes &b) { return b.size() - 1; })},
        {"gguf-bad-magic", "magic 'GGJT' (an old pre-GGUF llama.cpp file)", SPECULA_ERR_FORMAT, "bad magic",
         mutated("gguf-bad-magic", [](Bytes &b) { std::memcpy(b.data(), "GGJT", 4); })},
        {"gguf-version-1", "GGUF version 1", SPECULA_ERR_UNSUPPORTED, "version 1", mutated("gguf-version-1", [](Bytes &b) { put_u32(b, 4, 1); })},
        {"gguf-version-4", "GGUF version 4 (newer than any reader)", SPECULA_ERR_UNSUPPORTED, "unknown version 4",
         mutated("gguf-version-4", [](Bytes &b) { put_u32(b, 4, 4); })},
        {"gguf-tensor-count", "tensor count 2^63", SPECULA_ERR_FORMAT, "tensor count",
         mutated("gguf-tensor-count", [](Bytes &b) { put_u64(b, 8, uint64_t(1) << 63); })},
        {"gguf-metadata-count", "metadata count 2^62", SPECULA_ERR_FORMAT, "metadata count",
         mutated("gguf-metadata-count", [](Bytes &b) { put_u64(b, 16, uint64_t(1) << 62); })},
        {"gguf-array-length", "tokenizer.ggml.tokens with 2^60 elements", SPECULA_ERR_FORMAT, "array of 1152921504606846976 elements",
         mutated("gguf-array-length", [](Bytes &b) { put_u64(b, after_string(b, "tokenizer.ggml.tokens") + 8, uint64_t(1) << 60); })},
        {"gguf-string-length", "general.architecture of length 2^62", SPECULA_ERR_FORMAT, "is absurd",
         mutated("gguf-string-length", [](Bytes &b) { put_u64(b, after_string(b, "general.architecture") + 4, uint64_t(1) << 62); })},
        {"gguf-value-type", "metadata value type 13 (llama.block_count)", SPECULA_ERR_FORMAT, "unknown value type 13",
         mutated("gguf-value-type", [](Bytes &b) { put_u32(b, after_string(b, "llama.block_count"), 13); })},
        {"gguf-duplicate-key", "two metadata keys 'tokenizer.ggml.eos_token_id'", SPECULA_ERR_FORMAT, "duplicate metadata key 'tokenizer.ggml.eos_token_id'",
         mutated("gguf-duplicate-key", [](Bytes &b) { rename_string(b, "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"); })},
        {"gguf-duplicate-tensor", "two tensors named 'blk.0.attn_q.weight'", SPECULA_ERR_FORMAT, "duplicate tensor name",
         mutated("gguf-duplicate-tensor", [](Bytes &b) { rename_string(b, "blk.0.attn_k.weight", "blk.0.attn_q.weight"); })},
        {"gguf-tensor-past-end", "token_embd.weight's offset 2^40 past the end of the file", SPECULA_ERR_FORMAT, "runs past the end",
         mutated("gguf-tensor-past-end", [](Bytes &b) { put_u64(b, tensor_offset_at(b, "token_embd.weight", 2), uint64_t(1) << 40); })},
        {"gguf-tensor-offset-overflow", "an offset of 2^64 - 32 (offset + size wraps)", SPECULA_ERR_FORMAT, "token_embd.weight",
         mutated("gguf-tensor-offset-overflow", [](Bytes &b) { put_u64(b, tensor_offset_at(b, "token_embd.weight", 2), ~uint64_t(31)); })},
        {"gguf-tensor-shape-overflow", "token_embd.weight of 2^40 x 2^40 elements", SPECULA_ERR_FORMAT, "too many elements",
         mutated("gguf-tensor-shape-overflow", [](Bytes &b) {
             put_u64(b, tensor_dim_at(b, "token_embd.weight", 0), uint64_t(1) << 40);
             put_u64(b, tensor_dim_at(b, "token_embd.weight", 1), uint64_t(1) << 40);
         })},
        {"gguf-tensor-dims", "a tensor with 5 dimensions", SPECULA_ERR_FORMAT, "5 dimensions",
         mutated("gguf-tensor-dims", [](Bytes &b) { put_u32(b, tensor_n_dims_at(b, "output_norm.weight"), 5); })},
        {"gguf-tensor-type-unknown", "tensor type id 99", SPECULA_ERR_UNSUPPORTED, "unknown type id 99",
         mutated("gguf-tensor-type-unknown", [](Bytes &b) { put_u32(b, tensor_type_at(b, "output_norm.weight", 1), 99); })},
        {"gguf-tensor-wrong-type", "output_norm.weight stored as F16 (norms must be F32)", SPECULA_ERR_UNSUPPORTED, "'output_norm.weight' must be F32",
         mutated("gguf-tensor-wrong-type", [](Bytes &b) { put_u32(b, tensor_type_at(b, "output_norm.weight", 1), 1); })},
        {"gguf-tensor-wrong-shape", "token_embd.weight with its two dimensions swapped", SPECULA_ERR_FORMAT, "token_embd.weight",
         mutated("gguf-tensor-wrong-shape", [](Bytes &b) {
             const uint64_t d0 = get_u64(b, tensor_dim_at(b, "token_embd.weight", 0));
             const uint64_t d1 = get_u64(b, tensor_dim_at(b, "token_embd.weight", 1));
             put_u64(b, tensor_dim_at(b, "token_embd.weight", 0), d1);
             put_u64(b, tensor_dim_at(b, "token_embd.weight", 1), d0);
         })},
        {"gguf-tensor-missing", "output_norm.weight missing (renamed)", SPECULA_ERR_FORMAT, "is missing",
         mutated("gguf-tensor-missing", [](Bytes &b) { rename_string(b, "output_norm.weight", "output_norm.weighX"); })},
        {"gguf-hparam-missing", "llama.block_count missing (renamed)", SPECULA_ERR_FORMAT, "llama.block_count",
         mutated("gguf-hparam-missing", [](Bytes &b) { rename_string(b, "llama.block_count", "llama.block_counX"); })},
        {"gguf-hparam-zero", "llama.attention.head_count 0", SPECULA_ERR_FORMAT, "head_count",
         mutated("gguf-hparam-zero", [](Bytes &b) { put_u32(b, after_string(b, "llama.attention.head_count") + 4, 0); })},
        {"gguf-arch-unknown", "general.architecture 'llamb'", SPECULA_ERR_UNSUPPORTED, "llamb",
         mutated("gguf-arch-unknown", [](Bytes &b) { b.at(after_string(b, "general.architecture") + 4 + 8 + 4) = 'b'; })},
        {"gguf-vocab-bos-id", "tokenizer.ggml.bos_token_id 100000 in a vocabulary of 512: ignored as llama.cpp does (the default BOS 1 stays)",
         SPECULA_OK, "",
         [&dir, base] {
             Bytes b = *base;
             put_u32(b, after_string(b, "tokenizer.ggml.bos_token_id") + 4, 100000);
             write_bytes(dir.file("bos.gguf"), b);
             ModelPtr m;
             specula_error *err = nullptr;
             const Outcome o = outcome(specula_model_load(dir.file("bos.gguf").c_str(), nullptr, &m.m, &err), err);
             if (o.status == SPECULA_OK) CHECK(specula_model_token_bos(m.m) == 1);
             return o;
         }},
        {"gguf-vocab-token-type-value", "tokenizer.ggml.token_type 99 (no such type) for token 5: an undefined type, as llama.cpp reads it",
         SPECULA_OK, "",
         [&dir, base] {
             Bytes b = *base;
             put_u32(b, after_string(b, "tokenizer.ggml.token_type") + 4 + 4 + 8 + 5 * 4, 99);
             write_bytes(dir.file("type.gguf"), b);
             ModelPtr m;
             specula_error *err = nullptr;
             const Outcome o = outcome(specula_model_load(dir.file("type.gguf").c_str(), nullptr, &m.m, &err), err);
             if (o.status == SPECULA_OK) {
                 size_t n = 0;
                 CHECK(specula_model_tokenize(m.m, "Once upon", 9, SPECULA_TOKENIZE_ADD_SPECIAL, nullptr, 0, &n, &err) == SPECULA_ERR_BUFFER_TOO_SMALL);
                 specula_error_destroy(err);
                 CHECK(n > 1);
             }
             return o;
         }},
        {"gguf-vocab-token-type", "tokenizer.ggml.token_type of the wrong element type (f32 ids)", SPECULA_ERR_FORMAT, "tokenizer.ggml.token_type",
         mutated("gguf-vocab-token-type", [](Bytes &b) { put_u32(b, after_string(b, "tokenizer.ggml.token_type") + 4, 6); })},
        {"gguf-not-gguf", "a text file", SPECULA_ERR_FORMAT, "bad magic",
         [&dir] { return load_bytes(dir, "text.gguf", Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '\n'}); }},
        {"gguf-missing-file", "a path that does not exist", SPECULA_ERR_IO, "nothing-here.gguf",
         [&dir] {
             specula_model *m = nullptr;
             specula_error *err = nullptr;
             return outcome(specula_model_load(dir.file("nothing-here.gguf").c_str(), nullptr, &m, &err), err);
         }},
        {"gguf-directory", "a directory as the model path", SPECULA_ERR_IO, "not a regular file",
         [&dir] {
             specula_model *m = nullptr;
             specula_error *err = nullptr;
             return outcome(specula_model_load(dir.path.string().c_str(), nullptr, &m, &err), err);
         }},
    };
}

}  // namespace

TEST_CASE("GGUF model files", "[catalogue][files]") {
    test_fixtures::TempDir dir("specula-catalogue-gguf");
    run_table(gguf_entries(dir));
}

namespace {

// The architectures' own metadata and tensors, damaged in synthetic models of their shapes (phi3: fused Q/K/V,
// LongRoPE factors, its attention factor; starcoder2: LayerNorm biases and epsilon; mixtures of experts: counts,
// stacked expert tensors, the shared expert): each a clear error at load.
std::vector<Entry> arch_entries(const test_fixtures::TempDir &dir) {
    specula_synthetic_options so;
    specula_synthetic_options_init(&so);
    so.weight_type = "f32";
    const std::string vocab = std::string(SPECULA_SOURCE_DIR) + "/models/stories260K.gguf";
    std::map<std::string, std::shared_ptr<const Bytes>> bases;
    for (const char *shape : {"tiny-phi3", "tiny-starcoder2", "tiny-mixtral", "tiny-qwen2moe"}) {
        const std::string path = dir.file(std::string(shape) + ".gguf");
        REQUIRE(specula_synthetic_model_write(shape, vocab.c_str(), path.c_str(), &so, nullptr) == SPECULA_OK);
        bases[shape] = std::make_shared<const Bytes>(read_bytes(path));
        REQUIRE(load_bytes(dir, std::string(shape) + "-copy.gguf", *bases[shape]).status == SPECULA_OK);
    }
    auto of = [&dir, &bases](const std::string &shape) {
        return [&dir, base = bases.at(shape)](const std::string &id, const std::function<void(Bytes &)> &mutate) {
            return [&dir, base, id, mutate] {
                Bytes b = *base;
                mutate(b);
                return load_bytes(dir, id + ".gguf", b);
            };
        };
    };
    const auto mutated = of("tiny-phi3"), starcoder2 = of("tiny-starcoder2"), mixtral = of("tiny-mixtral"), qwen2moe = of("tiny-qwen2moe");
    return {
        {"gguf-phi3-one-rope-factor", "a phi3 file with rope_factors_long but not rope_factors_short (renamed)", SPECULA_ERR_FORMAT,
         "both rope_factors_long and rope_factors_short",
         mutated("gguf-phi3-one-rope-factor", [](Bytes &b) { rename_string(b, "rope_factors_short.weight", "rope_factors_shorX.weight"); })},
        {"gguf-phi3-qkv-rows", "a phi3 fused Q/K/V matrix with 64 rows fewer than Q, K and V need", SPECULA_ERR_FORMAT,
         "blk.0.attn_qkv.weight' has shape",
         mutated("gguf-phi3-qkv-rows", [](Bytes &b) {
             const size_t at = tensor_dim_at(b, "blk.0.attn_qkv.weight", 1);
             put_u64(b, at, get_u64(b, at) - 64);
         })},
        {"gguf-phi3-attn-factor", "phi3.rope.scaling.attn_factor NaN", SPECULA_ERR_FORMAT, "attn_factor",
         mutated("gguf-phi3-attn-factor", [](Bytes &b) { put_u32(b, after_string(b, "phi3.rope.scaling.attn_factor") + 4, 0x7FC00000u); })},
        {"gguf-phi3-window-missing", "a phi3 file without attention.sliding_window (renamed), of no shape llama.cpp has a default for",
         SPECULA_ERR_FORMAT, "sliding_window",
         mutated("gguf-phi3-window-missing", [](Bytes &b) { rename_string(b, "phi3.attention.sliding_window", "phi3.attention.sliding_windoX"); })},
        {"gguf-starcoder2-norm-bias", "a starcoder2 file without blk.1.ffn_norm.bias (renamed)", SPECULA_ERR_FORMAT,
         "'blk.1.ffn_norm.bias' is missing",
         starcoder2("gguf-starcoder2-norm-bias", [](Bytes &b) { rename_string(b, "blk.1.ffn_norm.bias", "blk.1.ffn_norm.biaX"); })},
        {"gguf-starcoder2-eps", "a starcoder2 file without attention.layer_norm_epsilon (renamed)", SPECULA_ERR_FORMAT,
         "layer_norm_epsilon",
         starcoder2("gguf-starcoder2-eps", [](Bytes &b) {
             rename_string(b, "starcoder2.attention.layer_norm_epsilon", "starcoder2.attention.layer_norm_epsiloX");
         })},
        {"gguf-moe-used-above-count", "a Mixtral file whose expert_used_count (9) exceeds expert_count (8)", SPECULA_ERR_FORMAT,
         "expert_used_count 9 is outside [1, expert_count = 8]",
         mixtral("gguf-moe-used-above-count", [](Bytes &b) { put_u32(b, after_string(b, "llama.expert_used_count") + 4, 9); })},
        {"gguf-moe-count-huge", "a Mixtral file with expert_count 100000 (llama.cpp's limit is 256)", SPECULA_ERR_FORMAT, "expert_count",
         mixtral("gguf-moe-count-huge", [](Bytes &b) { put_u32(b, after_string(b, "llama.expert_count") + 4, 100000); })},
        {"gguf-moe-experts-shape", "a stack of expert matrices with one expert fewer than expert_count", SPECULA_ERR_FORMAT,
         "'blk.0.ffn_up_exps.weight' has shape",
         mixtral("gguf-moe-experts-shape", [](Bytes &b) {
             const size_t at = tensor_dim_at(b, "blk.0.ffn_up_exps.weight", 2);
             put_u64(b, at, get_u64(b, at) - 1);
         })},
        {"gguf-moe-experts-missing", "a Mixtral file without blk.1.ffn_down_exps.weight (renamed)", SPECULA_ERR_FORMAT,
         "'blk.1.ffn_down_exps.weight' is missing",
         mixtral("gguf-moe-experts-missing", [](Bytes &b) { rename_string(b, "blk.1.ffn_down_exps.weight", "blk.1.ffn_down_exps.weighX"); })},
        {"gguf-qwen2moe-no-experts", "a qwen2moe file without expert_count (renamed)", SPECULA_ERR_FORMAT, "needs expert_count",
         qwen2moe("gguf-qwen2moe-no-experts", [](Bytes &b) { rename_string(b, "qwen2moe.expert_count", "qwen2moe.expert_counX"); })},
        {"gguf-qwen2moe-shared-gate", "a qwen2moe file without its shared expert's gate (renamed)", SPECULA_ERR_FORMAT,
         "'blk.0.ffn_gate_inp_shexp.weight' is missing",
         qwen2moe("gguf-qwen2moe-shared-gate", [](Bytes &b) { rename_string(b, "blk.0.ffn_gate_inp_shexp.weight", "blk.0.ffn_gate_inp_shexp.weighX"); })},
    };
}

}  // namespace

TEST_CASE("GGUF model files of the phi3, starcoder2 and mixture-of-experts architectures", "[catalogue][files][phi3][starcoder2][moe]") {
    test_fixtures::TempDir dir("specula-catalogue-arch");
    run_table(arch_entries(dir));
}

// ---- files: LongSpec drafts, draft models ------------------------------------------------------------------

namespace {

std::vector<Entry> draft_entries(const test_fixtures::TempDir &dir, specula_model *target, specula_session *session) {
    auto load_draft = [target](const std::string &path) {
        specula_draft *d = reinterpret_cast<specula_draft *>(uintptr_t(1));
        specula_error *err = nullptr;
        const specula_status st = specula_draft_load(path.c_str(), target, &d, &err);
        if (st != SPECULA_OK) CHECK(d == nullptr);
        specula_draft_destroy(st == SPECULA_OK ? d : nullptr);
        return outcome(st, err);
    };
    auto mutated = [&dir, load_draft](const std::string &id, const std::function<void(Bytes &)> &mutate) {
        return [&dir, load_draft, id, mutate] {
            Bytes b = read_bytes(kDraft);
            mutate(b);
            const std::string path = dir.file(id + ".gguf");
            write_bytes(path, b);
            return load_draft(path);
        };
    };
    return {
        {"draft-other-model", "code-7m's LongSpec draft loaded for stories260K", SPECULA_ERR_INCOMPATIBLE, "made for a target with n_layer 8",
         [load_draft] { return load_draft(kOtherDraft); }},
        {"draft-truncated", "the stories260K draft cut in half", SPECULA_ERR_FORMAT, "runs past the end", mutated("draft-truncated", [](Bytes &b) { b.resize(b.size() / 2); })},
        {"draft-wrong-arch", "a draft whose general.architecture is 'longspex'", SPECULA_ERR_FORMAT, "longspex",
         mutated("draft-wrong-arch", [](Bytes &b) { rename_string(b, "longspec", "longspex"); })},
        {"draft-is-a-model", "the target model file given as its draft", SPECULA_ERR_FORMAT, "is this a draft file",
         [load_draft] { return load_draft(kModel); }},
        {"draft-missing-file", "a draft path that does not exist", SPECULA_ERR_IO, "no-draft.gguf",
         [&dir, load_draft] { return load_draft(dir.file("no-draft.gguf")); }},
        {"draft-model-other-vocab", "set_speculative with code-7m (vocabulary 4096) as the draft model of stories260K (512)",
         SPECULA_ERR_INCOMPATIBLE, "vocab",
         [session] {
             ModelPtr other{load_model(kOtherModel)};
             specula_speculative_options o;
             specula_speculative_options_init(&o);
             o.draft_model = other.m;
             specula_error *err = nullptr;
             const Outcome out = outcome(specula_session_set_speculative(session, &o, &err), err);
             CHECK(std::string(specula_session_drafter_name(session)).empty());  // nothing attached
             return out;
         }},
    };
}

}  // namespace

TEST_CASE("LongSpec drafts and draft models", "[catalogue][files]") {
    test_fixtures::TempDir dir("specula-catalogue-draft");
    ModelPtr model{load_model(kModel)};
    specula_session *session = new_session(model.m);
    run_table(draft_entries(dir, model.m, session));
    still_usable(session);
    specula_session_destroy(session);
}

// ---- files: snapshots, prompt caches, chat templates -------------------------------------------------------

namespace {

// Loads snapshot bytes into a session holding another context; the session must be left exactly as it was and
// continue exactly as it would have.
Outcome load_into_unchanged(specula_session *s, const std::vector<uint8_t> &bytes, const void *data_override = nullptr) {
    const std::vector<int32_t> before = session_tokens(s);
    specula_error *err = nullptr;
    const Outcome o = outcome(specula_session_load_buffer(s, data_override ? data_override : bytes.data(), bytes.size(), &err), err);
    if (o.status != SPECULA_OK) CHECK(session_tokens(s) == before);
    return o;
}

}  // namespace

TEST_CASE("snapshots", "[catalogue][files]") {
    test_fixtures::TempDir dir("specula-catalogue-snap");
    ModelPtr model{load_model(kModel)};
    specula_session *src = new_session(model.m);
    specula_error *err = nullptr;
    REQUIRE(specula_session_append_text(src, "Once upon a time", 16, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
    REQUIRE(generate(src, 8) == SPECULA_OK);
    const std::vector<uint8_t> good = save_buffer(src);

    // The victim: another context, whose continuation is known before any bad load.
    specula_session *victim = new_session(model.m);
    REQUIRE(specula_session_append_text(victim, "The dog", 7, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
    REQUIRE(generate(victim, 4) == SPECULA_OK);
    std::vector<int32_t> expected_next;
    {
        specula_session *twin = new_session(model.m);
        REQUIRE(specula_session_load_buffer(twin, save_buffer(victim).data(), save_buffer(victim).size(), &err) == SPECULA_OK);
        REQUIRE(generate(twin, 6, &expected_next) == SPECULA_OK);
        specula_session_destroy(twin);
    }

    ModelPtr other{load_model(kOtherModel)};
    specula_session *other_session = new_session(other.m);
    REQUIRE(specula_session_append_text(other_session, "def f", 5, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
    REQUIRE(generate(other_session, 2) == SPECULA_OK);
    const std::vector<uint8_t> other_snap = save_buffer(other_session);

    std::vector<uint8_t> big_snap;  // 300 tokens: more than a 256-token context
    {
        specula_model *m = model.m;
        specula_session *big = new_session(m, 512);
        std::vector<int32_t> ids(300, 1);
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(3 + i % 200);
        REQUIRE(specula_session_append_tokens(big, ids.data(), ids.size(), &err) == SPECULA_OK);
        REQUIRE(specula_session_evaluate(big, &err) == SPECULA_OK);
        big_snap = save_buffer(big, SPECULA_SNAPSHOT_CONTEXT);
        specula_session_destroy(big);
    }
    std::vector<uint8_t> ngram_snap;  // carries n-gram drafter state
    {
        specula_session *s = new_session(model.m);
        specula_speculative_options o;
        specula_speculative_options_init(&o);
        o.ngram = 1;
        REQUIRE(specula_session_set_speculative(s, &o, &err) == SPECULA_OK);
        REQUIRE(specula_session_append_text(s, "Once upon a time", 16, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
        REQUIRE(generate(s, 8) == SPECULA_OK);
        ngram_snap = save_buffer(s);
        specula_session_destroy(s);
    }

    auto patched = [&good](const std::function<void(std::vector<uint8_t> &)> &f) {
        std::vector<uint8_t> b = good;
        f(b);
        return b;
    };
    const std::vector<Entry> table = {
        {"snap-empty", "an empty buffer (size 0)", SPECULA_ERR_FORMAT, "not a Specula snapshot", [&] { return load_into_unchanged(victim, {}, ""); }},
        {"snap-null-buffer", "buf NULL with size 100", SPECULA_ERR_INVALID_ARGUMENT, "buf",
         [&] {
             return outcome(specula_session_load_buffer(victim, nullptr, 100, &err), err);
         }},
        {"snap-truncated", "a snapshot cut in half", SPECULA_ERR_FORMAT, "truncated",
         [&] { return load_into_unchanged(victim, patched([](auto &b) { b.resize(b.size() / 2); })); }},
        {"snap-truncated-header", "only the first 40 bytes (inside the header)", SPECULA_ERR_FORMAT, "truncated (40 bytes)",
         [&] { return load_into_unchanged(victim, patched([](auto &b) { b.resize(40); })); }},
        {"snap-flipped-byte", "one byte flipped in the last section (checksum)", SPECULA_ERR_FORMAT, "checksum mismatch",
         [&] { return load_into_unchanged(victim, patched([](auto &b) { b[b.size() - 20] ^= 0x40; })); }},
        {"snap-flipped-header", "one byte flipped in the header", SPECULA_ERR_FORMAT, "header is damaged",
         [&] { return load_into_unchanged(victim, patched([](auto &b) { b[60] ^= 0x01; })); }},
        {"snap-bad-magic", "magic 'SPECSNAQ'", SPECULA_ERR_FORMAT, "no SPECSNAP magic", [&] { return load_into_unchanged(victim, patched([](auto &b) { b[7] ^= 0x02; })); }},
        {"snap-newer-version", "format version 2 (newer than this library)", SPECULA_ERR_UNSUPPORTED, "version",
         [&] {
             // A newer library's snapshot: another version with a valid header checksum (XXH3 over the header
             // but its last 8 bytes; the header's size is at byte 12).
             return load_into_unchanged(victim, patched([](auto &b) {
                 put_u32(b, 8, 2);
                 const uint32_t header_size = get_u32(b, 12);
                 put_u64(b, header_size - 8, XXH3_64bits(b.data(), header_size - 8));
             }));
         }},
        {"snap-other-model", "a snapshot of code-7m loaded into a stories260K session", SPECULA_ERR_INCOMPATIBLE, "model",
         [&] { return load_into_unchanged(victim, other_snap); }},
        {"snap-context-full", "a 300-token snapshot into a 256-token context", SPECULA_ERR_CONTEXT_FULL, "300 tokens does not fit",
         [&] { return load_into_unchanged(victim, big_snap); }},
        {"snap-drafter-mismatch", "a snapshot with n-gram drafter state into a session without drafters", SPECULA_ERR_INCOMPATIBLE, "saved with the 'ngram' drafter",
         [&] { return load_into_unchanged(victim, ngram_snap); }},
        {"snap-file-missing", "specula_session_load_file on a missing path", SPECULA_ERR_IO, "missing.snap",
         [&] { return outcome(specula_session_load_file(victim, dir.file("missing.snap").c_str(), &err), err); }},
        {"snap-save-unwritable", "save_file into a folder that does not exist", SPECULA_ERR_IO, "no/such/dir",
         [&] { return outcome(specula_session_save_file(victim, dir.file("no/such/dir/x.snap").c_str(), nullptr, &err), err); }},
        {"snap-fork-other-model", "specula_session_fork from a code-7m session into a stories260K one", SPECULA_ERR_INCOMPATIBLE, "another model",
         [&] { return outcome(specula_session_fork(other_session, victim, nullptr, &err), err); }},
    };
    run_table(table);
    // Every refused load left the victim as it was: it continues exactly as its twin did.
    std::vector<int32_t> next;
    REQUIRE(generate(victim, 6, &next) == SPECULA_OK);
    CHECK(next == expected_next);
    specula_session_destroy(other_session);
    specula_session_destroy(victim);
    specula_session_destroy(src);
}

TEST_CASE("prompt caches", "[catalogue][files]") {
    test_fixtures::TempDir dir("specula-catalogue-pcache");
    ModelPtr model{load_model(kModel)};
    specula_session *s = new_session(model.m);
    specula_error *err = nullptr;
    write_bytes(dir.file("a-file"), Bytes{'x'});
    const std::vector<Entry> table = {
        {"pcache-null-dir", "specula_prompt_cache_open(NULL)", SPECULA_ERR_INVALID_ARGUMENT, "dir",
         [&] {
             specula_prompt_cache *c = nullptr;
             return outcome(specula_prompt_cache_open(nullptr, nullptr, &c, &err), err);
         }},
        {"pcache-dir-is-file", "a regular file as the cache directory", SPECULA_ERR_IO, "a-file",
         [&] {
             specula_prompt_cache *c = nullptr;
             const Outcome o = outcome(specula_prompt_cache_open(dir.file("a-file").c_str(), nullptr, &c, &err), err);
             specula_prompt_cache_destroy(c);
             return o;
         }},
        {"pcache-under-file", "a cache directory below a regular file", SPECULA_ERR_IO, "a-file",
         [&] {
             specula_prompt_cache *c = nullptr;
             const Outcome o = outcome(specula_prompt_cache_open(dir.file("a-file/cache").c_str(), nullptr, &c, &err), err);
             specula_prompt_cache_destroy(c);
             return o;
         }},
        {"pcache-damaged-entry", "every entry file of the cache overwritten with garbage: a miss, the entry deleted", SPECULA_OK, "",
         [&] {
             specula_prompt_cache *c = nullptr;
             const std::string cdir = dir.file("cache");
             REQUIRE(specula_prompt_cache_open(cdir.c_str(), nullptr, &c, &err) == SPECULA_OK);
             std::vector<int32_t> ids = {1, 403, 407, 261, 378, 129};
             REQUIRE(specula_session_append_tokens(s, ids.data(), ids.size(), &err) == SPECULA_OK);
             REQUIRE(specula_session_evaluate(s, &err) == SPECULA_OK);
             REQUIRE(specula_prompt_cache_store(c, s, &err) == SPECULA_OK);
             REQUIRE(specula_session_rewind(s, 0, &err) == SPECULA_OK);
             int files = 0;
             for (const auto &f : fs::recursive_directory_iterator(cdir))
                 if (f.is_regular_file() && f.path().extension() != ".lock") {
                     write_bytes(f.path(), Bytes(64, 0xAB));
                     ++files;
                 }
             CHECK(files > 0);
             size_t restored = 99;
             const Outcome o = outcome(specula_prompt_cache_restore(c, s, ids.data(), ids.size(), &restored, &err), err);
             CHECK(restored == 0);
             CHECK(specula_session_n_tokens(s) == 0);
             specula_prompt_cache_destroy(c);
             return o;
         }},
        {"pcache-restore-null-out", "specula_prompt_cache_restore with n_restored NULL", SPECULA_ERR_INVALID_ARGUMENT, "n_restored",
         [&] {
             specula_prompt_cache *c = nullptr;
             REQUIRE(specula_prompt_cache_open(dir.file("cache2").c_str(), nullptr, &c, &err) == SPECULA_OK);
             const int32_t id = 1;
             const Outcome o = outcome(specula_prompt_cache_restore(c, s, &id, 1, nullptr, &err), err);
             specula_prompt_cache_destroy(c);
             return o;
         }},
        {"pcache-stats-struct-size", "specula_prompt_cache_get_stats with struct_size 0", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] {
             specula_prompt_cache *c = nullptr;
             REQUIRE(specula_prompt_cache_open(dir.file("cache3").c_str(), nullptr, &c, &err) == SPECULA_OK);
             specula_prompt_cache_stats st{};
             const Outcome o = outcome(specula_prompt_cache_get_stats(c, &st, &err), err);
             specula_prompt_cache_destroy(c);
             return o;
         }},
        {"pcache-null-cache", "specula_prompt_cache_store(NULL cache)", SPECULA_ERR_INVALID_ARGUMENT, "cache",
         [&] { return outcome(specula_prompt_cache_store(nullptr, s, &err), err); }},
    };
    run_table(table);
    still_usable(s);
    specula_session_destroy(s);
}

TEST_CASE("chat templates", "[catalogue][files]") {
    ModelPtr model{load_model(kModel)};
    specula_error *err = nullptr;
    const specula_chat_message good[] = {{"user", "hi"}};
    const specula_chat_message null_role[] = {{nullptr, "hi"}};
    const specula_chat_message null_content[] = {{"user", nullptr}};
    char buf[256];
    size_t len = 0;
    auto apply = [&](const specula_model *m, const char *tmpl, const specula_chat_message *msgs, size_t n) {
        return outcome(specula_chat_apply_template(m, tmpl, msgs, n, 1, buf, sizeof buf, &len, &err), err);
    };
    auto jinja = [&](const std::string &tmpl) {  // the template's own Jinja (since 0.18), on the model (its BOS and EOS)
        specula_chat_options o;
        specula_chat_options_init(&o);
        o.jinja = 1;
        return outcome(specula_chat_format(model.m, tmpl.c_str(), good, 1, &o, buf, sizeof buf, &len, &err), err);
    };
    const std::vector<Entry> table = {
        {"chat-unknown-template", "a Jinja template of no known family", SPECULA_ERR_UNSUPPORTED, "not recognised",
         [&] { return apply(nullptr, "{% for m in messages %}<<{{ m.content }}>>{% endfor %}", good, 1); }},
        {"chat-model-without-template", "tmpl NULL on a model without tokenizer.chat_template", SPECULA_ERR_UNSUPPORTED, "template",
         [&] { return apply(model.m, nullptr, good, 1); }},
        {"chat-null-model-and-tmpl", "model and tmpl both NULL", SPECULA_ERR_INVALID_ARGUMENT, "both NULL", [&] { return apply(nullptr, nullptr, good, 1); }},
        {"chat-null-messages", "messages NULL with n_messages 1", SPECULA_ERR_INVALID_ARGUMENT, "messages",
         [&] { return apply(nullptr, "chatml", nullptr, 1); }},
        {"chat-null-role", "a message with a NULL role", SPECULA_ERR_INVALID_ARGUMENT, "role", [&] { return apply(nullptr, "chatml", null_role, 1); }},
        {"chat-null-content", "a message with NULL content", SPECULA_ERR_INVALID_ARGUMENT, "content",
         [&] { return apply(nullptr, "chatml", null_content, 1); }},
        {"chat-small-buffer", "a 4-byte buffer (two-call pattern)", SPECULA_ERR_BUFFER_TOO_SMALL, "too small",
         [&] {
             const Outcome o = outcome(specula_chat_apply_template(nullptr, "chatml", good, 1, 1, buf, 4, &len, &err), err);
             CHECK(len > 4);  // the length needed
             return o;
         }},
        {"chat-thinking-out-of-range", "specula_chat_format with enable_thinking 2", SPECULA_ERR_INVALID_ARGUMENT, "enable_thinking",
         [&] {
             specula_chat_options o;
             specula_chat_options_init(&o);
             o.enable_thinking = 2;
             return outcome(specula_chat_format(nullptr, "qwen3", good, 1, &o, buf, sizeof buf, &len, &err), err);
         }},
        {"chat-jinja-unparsable", "Jinja mode, a template that does not parse ({% for %})", SPECULA_ERR_UNSUPPORTED, "does not parse",
         [&] { return jinja("{% for %}"); }},
        {"chat-jinja-deep-nesting", "Jinja mode, 10,000 nested parentheses", SPECULA_ERR_UNSUPPORTED, "nested deeper",
         [&] { return jinja("{{ " + std::string(10000, '(') + " }}"); }},
        {"chat-jinja-too-long", "Jinja mode, a 64 KiB comment (libstdc++'s regex recursion)", SPECULA_ERR_UNSUPPORTED, "bytes",
         [&] { return jinja("{#" + std::string(65536, 'x') + "#}"); }},
        {"chat-jinja-recursive-macro", "Jinja mode, a macro that calls itself without end", SPECULA_ERR_INVALID_ARGUMENT, "nesting too deep",
         [&] { return jinja("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"); }},
        {"chat-jinja-endless-loops", "Jinja mode, three nested loops of 1000 iterations", SPECULA_ERR_INVALID_ARGUMENT, "iterations",
         [&] { return jinja("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}"); }},
        {"chat-jinja-division-by-zero", "Jinja mode, {{ 1 // 0 }}", SPECULA_ERR_INVALID_ARGUMENT, "by zero", [&] { return jinja("{{ 1 // 0 }}"); }},
        {"chat-jinja-out-of-range", "specula_chat_format with jinja 2", SPECULA_ERR_INVALID_ARGUMENT, "jinja",
         [&] {
             specula_chat_options o;
             specula_chat_options_init(&o);
             o.jinja = 2;
             return outcome(specula_chat_format(nullptr, "chatml", good, 1, &o, buf, sizeof buf, &len, &err), err);
         }},
        {"chat-options-struct-size", "specula_chat_format with struct_size 0", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] {
             specula_chat_options o;
             specula_chat_options_init(&o);
             o.struct_size = 0;
             return outcome(specula_chat_format(nullptr, "chatml", good, 1, &o, buf, sizeof buf, &len, &err), err);
         }},
    };
    run_table(table);
}

// ---- grammars ---------------------------------------------------------------------------------------------

TEST_CASE("grammars", "[catalogue][grammar]") {
    ModelPtr model{load_model(kModel)};
    specula_session *s = new_session(model.m);
    specula_error *err = nullptr;
    // A session whose sampler is set to `gbnf`; after a refusal the session keeps its sampler and still generates.
    auto with_grammar = [&](const std::string &gbnf, const char *root = nullptr) {
        specula_sampler_options sa;
        specula_sampler_options_init(&sa);
        sa.grammar = gbnf.c_str();
        sa.grammar_root = root;
        const Outcome o = outcome(specula_session_set_sampler(s, &sa, &err), err);
        if (o.status != SPECULA_OK) {
            REQUIRE(specula_session_rewind(s, 0, &err) == SPECULA_OK);
            REQUIRE(specula_session_append_text(s, "Once", 4, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
            specula_generate_options g;
            specula_generate_options_init(&g);
            g.max_tokens = 4;
            specula_stop_reason stop;
            CHECK(specula_session_generate(s, &g, nullptr, nullptr, &stop, &err) == SPECULA_OK);
        }
        return o;
    };
    std::string nested = "root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')');
    std::string huge((size_t(1) << 20) + 1, ' ');  // specula.h: at most 1 MiB
    huge.replace(0, 14, "root ::= \"a\"  ");
    const std::vector<Entry> table = {
        {"grammar-undefined-rule", "root ::= value, no rule value", SPECULA_ERR_INVALID_ARGUMENT, "undefined rule 'value' at line 1, column 10",
         [&] { return with_grammar("root ::= value"); }},
        {"grammar-no-root", "a grammar without the start rule", SPECULA_ERR_INVALID_ARGUMENT, "no rule named 'root'",
         [&] { return with_grammar("start ::= \"a\""); }},
        {"grammar-other-root", "grammar_root \"start\" names the start rule", SPECULA_OK, "",
         [&] { return with_grammar("start ::= [a-z]+", "start"); }},
        {"grammar-left-recursion", "expr ::= expr \"+\" term | term (a matcher would loop)", SPECULA_ERR_INVALID_ARGUMENT, "left-recursive",
         [&] { return with_grammar("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]+"); }},
        {"grammar-unclosed-literal", "a literal without its closing quote", SPECULA_ERR_INVALID_ARGUMENT, "never closed",
         [&] { return with_grammar("root ::= \"abc"); }},
        {"grammar-unclosed-group", "a group without its closing parenthesis", SPECULA_ERR_INVALID_ARGUMENT, "group that is never closed",
         [&] { return with_grammar("root ::= (\"a\" | \"b\""); }},
        {"grammar-bad-escape", "the escape \\q", SPECULA_ERR_INVALID_ARGUMENT, "unknown escape", [&] { return with_grammar("root ::= \"\\q\""); }},
        {"grammar-invalid-utf8", "a lone continuation byte in a literal", SPECULA_ERR_INVALID_ARGUMENT, "invalid UTF-8",
         [&] { return with_grammar("root ::= \"\x80\""); }},
        {"grammar-huge-repetition", "\"a\"{1000000}", SPECULA_ERR_INVALID_ARGUMENT, "repetition count above", [&] { return with_grammar("root ::= \"a\"{1000000}"); }},
        {"grammar-deep-nesting", "groups nested 300 deep", SPECULA_ERR_INVALID_ARGUMENT, "nested deeper", [&] { return with_grammar(nested); }},
        {"grammar-too-long", "a grammar of 1 MiB + 1 byte", SPECULA_ERR_INVALID_ARGUMENT, "longer than 1 MiB", [&] { return with_grammar(huge); }},
        {"grammar-duplicate-rule", "root defined twice", SPECULA_ERR_INVALID_ARGUMENT, "defined twice",
         [&] { return with_grammar("root ::= \"a\"\nroot ::= \"b\""); }},
        {"grammar-session-create", "specula_session_create with a grammar that does not parse", SPECULA_ERR_INVALID_ARGUMENT, "undefined rule",
         [&] {
             specula_sampler_options sa;
             specula_sampler_options_init(&sa);
             sa.grammar = "root ::= x";
             specula_session *out = nullptr;
             const Outcome o = outcome(specula_session_create(model.m, nullptr, &sa, &out, &err), err);
             CHECK(out == nullptr);
             return o;
         }},
        {"grammar-schema-not-json", "specula_json_schema_to_grammar on text that is not JSON", SPECULA_ERR_INVALID_ARGUMENT, "not JSON",
         [&] {
             const std::string schema = R"({"type": )";
             char buf[64];
             size_t len = 0;
             return outcome(specula_json_schema_to_grammar(schema.data(), schema.size(), buf, sizeof buf, &len, &err), err);
         }},
        {"grammar-schema-pattern-backreference", "a JSON schema whose \"pattern\" has a backreference", SPECULA_ERR_UNSUPPORTED,
         "backreferences",
         [&] {
             const std::string schema = R"({"type": "string", "pattern": "^(a+)b\\1$"})";
             size_t len = 0;
             return outcome(specula_json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &len, &err), err);
         }},
        {"grammar-schema-pattern-unclosed", "a JSON schema whose \"pattern\" has an unclosed group", SPECULA_ERR_INVALID_ARGUMENT,
         "unclosed '('",
         [&] {
             const std::string schema = R"({"type": "string", "pattern": "^(a|b$"})";
             size_t len = 0;
             return outcome(specula_json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &len, &err), err);
         }},
        {"grammar-schema-small-buffer", "a 4-byte buffer for a schema's grammar (two-call pattern)", SPECULA_ERR_BUFFER_TOO_SMALL, "too small",
         [&] {
             const std::string schema = R"({"type": "integer"})";
             char buf[4];
             size_t len = 0;
             const Outcome o = outcome(specula_json_schema_to_grammar(schema.data(), schema.size(), buf, sizeof buf, &len, &err), err);
             CHECK(len > 4);
             return o;
         }},
        {"grammar-schema-null", "specula_json_schema_to_grammar with a NULL schema of length 5", SPECULA_ERR_INVALID_ARGUMENT, "schema is NULL",
         [&] {
             size_t len = 0;
             return outcome(specula_json_schema_to_grammar(nullptr, 5, nullptr, 0, &len, &err), err);
         }},
        {"grammar-impossible", "a code point no UTF-8 sequence encodes: generation fails, no token is made up", SPECULA_ERR_INVALID_ARGUMENT,
         "no token of the vocabulary can continue",
         [&] {
             specula_sampler_options sa;
             specula_sampler_options_init(&sa);
             sa.grammar = "root ::= \"\\UFFFFFFFF\"";
             REQUIRE(specula_session_set_sampler(s, &sa, &err) == SPECULA_OK);
             REQUIRE(specula_session_rewind(s, 0, &err) == SPECULA_OK);
             REQUIRE(specula_session_append_text(s, "Once", 4, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
             specula_generate_options g;
             specula_generate_options_init(&g);
             g.max_tokens = 4;
             specula_stop_reason stop;
             const int32_t before = specula_session_n_tokens(s);
             const Outcome o = outcome(specula_session_generate(s, &g, nullptr, nullptr, &stop, &err), err);
             CHECK(specula_session_n_tokens(s) == before);  // nothing was added
             return o;
         }},
    };
    run_table(table);
    specula_session_destroy(s);
}

// ---- C ABI misuse -------------------------------------------------------------------------------------------

TEST_CASE("C ABI misuse", "[catalogue][abi]") {
    ModelPtr model{load_model(kModel)};
    specula_session *s = new_session(model.m);
    specula_error *err = nullptr;
    specula_model *out_model = nullptr;
    specula_session *out_session = nullptr;
    const int32_t n_vocab = specula_model_n_vocab(model.m);
    auto session_opts = [] {
        specula_session_options o;
        specula_session_options_init(&o);
        o.n_ctx = 64;
        o.n_threads = 1;
        o.backend = SPECULA_BACKEND_CPU;
        return o;
    };
    auto create = [&](const specula_session_options &o, const specula_sampler_options *sa = nullptr) {
        const Outcome r = outcome(specula_session_create(model.m, &o, sa, &out_session, &err), err);
        if (r.status != SPECULA_OK) CHECK(out_session == nullptr);
        specula_session_destroy(out_session);
        out_session = nullptr;
        return r;
    };
    auto spec = [&](const std::function<void(specula_speculative_options &)> &f) {
        specula_speculative_options o;
        specula_speculative_options_init(&o);
        f(o);
        const Outcome r = outcome(specula_session_set_speculative(s, &o, &err), err);
        CHECK(std::string(specula_session_drafter_name(s)).empty());  // the previous (no) drafters stay
        return r;
    };
    const std::vector<Entry> table = {
        // Error objects and status names.
        {"abi-error-null", "specula_error_message / _status / _destroy on NULL", SPECULA_OK, "",
         [] {
             CHECK(std::string(specula_error_message(nullptr)).empty());
             CHECK(specula_error_status(nullptr) == SPECULA_OK);
             specula_error_destroy(nullptr);
             CHECK(std::string(specula_status_string(specula_status(99))) == "SPECULA_ERR_UNKNOWN");
             return Outcome{};
         }},
        {"abi-err-null-out", "a failing call with err = NULL (allowed: only the status)", SPECULA_ERR_INVALID_ARGUMENT, "(no message: err NULL)",
         [&] { return Outcome{specula_session_rewind(nullptr, 0, nullptr), "(no message: err NULL)"}; }},
        // Models.
        {"abi-model-load-null-path", "specula_model_load(NULL path)", SPECULA_ERR_INVALID_ARGUMENT, "path",
         [&] { return outcome(specula_model_load(nullptr, nullptr, &out_model, &err), err); }},
        {"abi-model-load-null-out", "specula_model_load(out NULL)", SPECULA_ERR_INVALID_ARGUMENT, "out",
         [&] { return outcome(specula_model_load(kModel.c_str(), nullptr, nullptr, &err), err); }},
        {"abi-model-options-struct-size", "specula_model_options with struct_size 0", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] {
             specula_model_options o;
             specula_model_options_init(&o);
             o.struct_size = 0;
             return outcome(specula_model_load(kModel.c_str(), &o, &out_model, &err), err);
         }},
        {"abi-model-getters-null", "every model getter on a NULL model", SPECULA_OK, "",
         [] {
             CHECK(specula_model_n_vocab(nullptr) == 0);
             CHECK(std::string(specula_model_arch(nullptr)).empty());
             CHECK(specula_model_tensor_count(nullptr) == 0);
             CHECK(specula_model_meta_key(nullptr, 0) == nullptr);
             CHECK(specula_model_token_bos(nullptr) == SPECULA_TOKEN_NULL);
             CHECK(specula_model_token_text(nullptr, 0) == nullptr);
             CHECK(specula_model_retain(nullptr) == nullptr);
             specula_model_destroy(nullptr);
             return Outcome{};
         }},
        {"abi-model-tensor-index", "specula_model_tensor_info index -1", SPECULA_ERR_INVALID_ARGUMENT, "index",
         [&] {
             specula_tensor_info info{};
             info.struct_size = sizeof info;
             return outcome(specula_model_tensor_info(model.m, -1, &info, &err), err);
         }},
        {"abi-model-meta-index", "specula_model_meta_value index past the end", SPECULA_ERR_INVALID_ARGUMENT, "index",
         [&] {
             char buf[64];
             size_t len = 0;
             return outcome(specula_model_meta_value(model.m, 1000, 4, buf, sizeof buf, &len, &err), err);
         }},
        {"abi-tokenize-null-count", "specula_model_tokenize with n_tokens NULL", SPECULA_ERR_INVALID_ARGUMENT, "n_tokens",
         [&] { return outcome(specula_model_tokenize(model.m, "hi", 2, 0, nullptr, 0, nullptr, &err), err); }},
        {"abi-tokenize-null-text", "specula_model_tokenize with text NULL and len 5", SPECULA_ERR_INVALID_ARGUMENT, "text",
         [&] {
             size_t n = 0;
             return outcome(specula_model_tokenize(model.m, nullptr, 5, 0, nullptr, 0, &n, &err), err);
         }},
        {"abi-detokenize-bad-token", "specula_model_detokenize of token id n_vocab", SPECULA_ERR_INVALID_TOKEN, "token id 512 is outside",
         [&] {
             char buf[64];
             size_t len = 0;
             return outcome(specula_model_detokenize(model.m, &n_vocab, 1, 0, buf, sizeof buf, &len, &err), err);
         }},
        {"abi-piece-bad-token", "specula_model_token_to_piece of token id -5", SPECULA_ERR_INVALID_TOKEN, "-5",
         [&] {
             char buf[16];
             size_t len = 0;
             return outcome(specula_model_token_to_piece(model.m, -5, 0, buf, sizeof buf, &len, &err), err);
         }},
        {"abi-token-kind-bad", "specula_model_token_kind / _text / _is_eog of id n_vocab (no error channel)", SPECULA_OK, "",
         [&] {
             CHECK(specula_model_token_kind(model.m, n_vocab) == SPECULA_TOKEN_KIND_INVALID);
             CHECK(specula_model_token_text(model.m, n_vocab) == nullptr);
             CHECK(specula_model_token_is_eog(model.m, n_vocab) == 0);
             CHECK(specula_model_token_fim(model.m, specula_fim_token(77)) == SPECULA_TOKEN_NULL);
             return Outcome{};
         }},
        {"abi-fingerprint-null-buf", "specula_model_fingerprint with buf NULL and buf_size 64", SPECULA_ERR_INVALID_ARGUMENT, "buf is NULL",
         [&] {
             size_t len = 0;
             return outcome(specula_model_fingerprint(model.m, nullptr, 64, &len, &err), err);
         }},
        // Devices.
        {"abi-device-bad-backend", "specula_device_get_info for backend 99", SPECULA_ERR_INVALID_ARGUMENT, "backend",
         [&] {
             specula_device_info info{};
             info.struct_size = sizeof info;
             CHECK(specula_device_count(99) == 0);
             return outcome(specula_device_get_info(99, 0, &info, &err), err);
         }},
        {"abi-backend-check-bad", "specula_backend_check(-1)", SPECULA_ERR_INVALID_ARGUMENT, "backend",
         [&] { return outcome(specula_backend_check(-1, &err), err); }},
        // Sessions: creation.
        {"abi-session-null-model", "specula_session_create(NULL model)", SPECULA_ERR_INVALID_ARGUMENT, "model is NULL",
         [&] { return outcome(specula_session_create(nullptr, nullptr, nullptr, &out_session, &err), err); }},
        {"abi-session-null-out", "specula_session_create(out NULL)", SPECULA_ERR_INVALID_ARGUMENT, "out is NULL",
         [&] { return outcome(specula_session_create(model.m, nullptr, nullptr, nullptr, &err), err); }},
        {"abi-session-struct-size", "specula_session_options with struct_size 2", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] {
             specula_session_options o = session_opts();
             o.struct_size = 2;
             return create(o);
         }},
        {"abi-session-backend-enum", "session backend 99 (int32_t outside specula_backend)", SPECULA_ERR_INVALID_ARGUMENT, "backend",
         [&] {
             specula_session_options o = session_opts();
             o.backend = 99;
             return create(o);
         }},
        {"abi-session-kv-enum", "session kv_type -1", SPECULA_ERR_INVALID_ARGUMENT, "kv_type",
         [&] {
             specula_session_options o = session_opts();
             o.kv_type = -1;
             return create(o);
         }},
        {"abi-session-policy-enum", "session context_policy 7", SPECULA_ERR_INVALID_ARGUMENT, "context_policy",
         [&] {
             specula_session_options o = session_opts();
             o.context_policy = 7;
             return create(o);
         }},
        {"abi-session-n-ctx", "session n_ctx -1", SPECULA_ERR_INVALID_ARGUMENT, "n_ctx",
         [&] {
             specula_session_options o = session_opts();
             o.n_ctx = -1;
             return create(o);
         }},
        {"abi-session-n-batch", "session n_batch 5000", SPECULA_ERR_INVALID_ARGUMENT, "n_batch",
         [&] {
             specula_session_options o = session_opts();
             o.n_batch = 5000;
             return create(o);
         }},
        {"abi-session-shift", "context shift keeping 60 and dropping 10 of n_ctx 64", SPECULA_ERR_INVALID_ARGUMENT, "keep",
         [&] {
             specula_session_options o = session_opts();
             o.context_policy = SPECULA_CONTEXT_SHIFT;
             o.n_keep = 60;
             o.n_discard = 10;
             return create(o);
         }},
        {"abi-session-vocab-only", "a session on a vocab-only model", SPECULA_ERR_INVALID_ARGUMENT, "vocab-only",
         [&] {
             specula_model_options mo;
             specula_model_options_init(&mo);
             mo.vocab_only = 1;
             ModelPtr v;
             REQUIRE(specula_model_load(kModel.c_str(), &mo, &v.m, &err) == SPECULA_OK);
             return outcome(specula_session_create(v.m, nullptr, nullptr, &out_session, &err), err);
         }},
        {"abi-sampler-nan-temperature", "sampler temperature NaN", SPECULA_ERR_INVALID_ARGUMENT, "temperature",
         [&] {
             specula_sampler_options sa;
             specula_sampler_options_init(&sa);
             sa.temperature = std::numeric_limits<float>::quiet_NaN();
             return outcome(specula_session_set_sampler(s, &sa, &err), err);
         }},
        {"abi-sampler-top-p", "sampler top_p -1 and min_p 2", SPECULA_ERR_INVALID_ARGUMENT, "top_p",
         [&] {
             specula_sampler_options sa;
             specula_sampler_options_init(&sa);
             sa.top_p = -1;
             sa.min_p = 2;
             return outcome(specula_session_set_sampler(s, &sa, &err), err);
         }},
        {"abi-sampler-draw", "sampler draw rule 7 (neither race nor llama.cpp)", SPECULA_ERR_INVALID_ARGUMENT, "draw",
         [&] {
             specula_sampler_options sa;
             specula_sampler_options_init(&sa);
             sa.draw = 7;
             return outcome(specula_session_set_sampler(s, &sa, &err), err);
         }},
        {"abi-sampler-struct-size", "sampler options with struct_size 0", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] {
             specula_sampler_options sa;
             specula_sampler_options_init(&sa);
             sa.struct_size = 0;
             return outcome(specula_session_set_sampler(s, &sa, &err), err);
         }},
        // Sessions: context and generation.
        {"abi-session-getters-null", "every session getter, cancel and destroy on NULL", SPECULA_OK, "",
         [] {
             CHECK(specula_session_n_ctx(nullptr) == 0);
             CHECK(specula_session_n_tokens(nullptr) == 0);
             CHECK(std::string(specula_session_backend(nullptr)).empty());
             CHECK(specula_session_logits(nullptr) == nullptr);
             CHECK(specula_session_tree_shape(nullptr) == nullptr);
             CHECK(specula_session_accepted_at_depth(nullptr, nullptr, 0) == 0);
             specula_session_cancel(nullptr);
             specula_session_destroy(nullptr);
             return Outcome{};
         }},
        {"abi-append-null-session", "specula_session_append_text(NULL session)", SPECULA_ERR_INVALID_ARGUMENT, "session is NULL",
         [&] { return outcome(specula_session_append_text(nullptr, "x", 1, 0, &err), err); }},
        {"abi-append-null-text", "append_text with text NULL and len 3", SPECULA_ERR_INVALID_ARGUMENT, "text is NULL",
         [&] { return outcome(specula_session_append_text(s, nullptr, 3, 0, &err), err); }},
        {"abi-append-null-tokens", "append_tokens with tokens NULL and n 2", SPECULA_ERR_INVALID_ARGUMENT, "tokens is NULL",
         [&] { return outcome(specula_session_append_tokens(s, nullptr, 2, &err), err); }},
        {"abi-append-token-n-vocab", "append_tokens [1, n_vocab]: nothing appended", SPECULA_ERR_INVALID_TOKEN, "token id 512 at index 1",
         [&] {
             const int32_t ids[] = {1, n_vocab};
             const Outcome o = outcome(specula_session_append_tokens(s, ids, 2, &err), err);
             CHECK(specula_session_n_tokens(s) == 0);
             return o;
         }},
        {"abi-append-token-negative", "append_tokens [-1]", SPECULA_ERR_INVALID_TOKEN, "-1",
         [&] {
             const int32_t id = -1;
             return outcome(specula_session_append_tokens(s, &id, 1, &err), err);
         }},
        {"abi-append-context-full", "append 300 tokens to a 256-token context: nothing appended", SPECULA_ERR_CONTEXT_FULL, "n_ctx 256",
         [&] {
             const std::vector<int32_t> ids(300, 5);
             const Outcome o = outcome(specula_session_append_tokens(s, ids.data(), ids.size(), &err), err);
             CHECK(specula_session_n_tokens(s) == 0);
             return o;
         }},
        {"abi-generate-empty", "generate before anything was appended", SPECULA_ERR_INVALID_ARGUMENT, "context is empty",
         [&] {
             std::string message;
             const specula_status st = generate(s, 4, nullptr, &message);
             return Outcome{st, message};
         }},
        {"abi-next-empty", "specula_session_next before anything was appended", SPECULA_ERR_INVALID_ARGUMENT, "context is empty",
         [&] {
             specula_token_event ev{};
             ev.struct_size = sizeof ev;
             return outcome(specula_session_next(s, nullptr, &ev, &err), err);
         }},
        {"abi-next-null-event", "specula_session_next with event NULL", SPECULA_ERR_INVALID_ARGUMENT, "event",
         [&] { return outcome(specula_session_next(s, nullptr, nullptr, &err), err); }},
        {"abi-rewind-past-end", "rewind to 5 of an empty context", SPECULA_ERR_INVALID_ARGUMENT, "rewind to 5",
         [&] { return outcome(specula_session_rewind(s, 5, &err), err); }},
        {"abi-rewind-negative", "rewind to -1", SPECULA_ERR_INVALID_ARGUMENT, "rewind to -1", [&] { return outcome(specula_session_rewind(s, -1, &err), err); }},
        {"abi-generate-top-logits", "generate options top_logits 65", SPECULA_ERR_INVALID_ARGUMENT, "top_logits",
         [&] {
             specula_generate_options g;
             specula_generate_options_init(&g);
             g.top_logits = 65;
             return outcome(specula_session_generate(s, &g, nullptr, nullptr, nullptr, &err), err);
         }},
        {"abi-generate-top-probs", "generate options top_probs 65", SPECULA_ERR_INVALID_ARGUMENT, "top_probs",
         [&] {
             specula_generate_options g;
             specula_generate_options_init(&g);
             g.top_probs = 65;
             return outcome(specula_session_generate(s, &g, nullptr, nullptr, nullptr, &err), err);
         }},
        {"abi-generate-null-stop-strings", "generate options n_stop_strings 2 with stop_strings NULL", SPECULA_ERR_INVALID_ARGUMENT, "stop_strings",
         [&] {
             specula_generate_options g;
             specula_generate_options_init(&g);
             g.n_stop_strings = 2;
             return outcome(specula_session_generate(s, &g, nullptr, nullptr, nullptr, &err), err);
         }},
        {"abi-generate-null-stop-string", "a stop string that is NULL", SPECULA_ERR_INVALID_ARGUMENT, "stop string is NULL",
         [&] {
             const char *stops[] = {"x", nullptr};
             specula_generate_options g;
             specula_generate_options_init(&g);
             g.stop_strings = stops;
             g.n_stop_strings = 2;
             return outcome(specula_session_generate(s, &g, nullptr, nullptr, nullptr, &err), err);
         }},
        {"abi-stats-struct-size", "specula_session_stats with struct_size 0", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] {
             specula_stats st{};
             return outcome(specula_session_stats(s, &st, &err), err);
         }},
        {"abi-tokens-null-count", "specula_session_tokens with n_tokens NULL", SPECULA_ERR_INVALID_ARGUMENT, "n_tokens",
         [&] { return outcome(specula_session_tokens(s, nullptr, 0, nullptr, &err), err); }},
        // Speculative options.
        {"abi-spec-null-session", "set_speculative(NULL session)", SPECULA_ERR_INVALID_ARGUMENT, "session is NULL",
         [&] { return outcome(specula_session_set_speculative(nullptr, nullptr, &err), err); }},
        {"abi-spec-struct-size", "speculative options with struct_size 1", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] { return spec([](auto &o) { o.struct_size = 1; }); }},
        {"abi-spec-ngram-2", "ngram = 2", SPECULA_ERR_INVALID_ARGUMENT, "ngram", [&] { return spec([](auto &o) { o.ngram = 2; }); }},
        {"abi-spec-grammar-2", "grammar = 2", SPECULA_ERR_INVALID_ARGUMENT, "grammar", [&] { return spec([](auto &o) { o.grammar = 2; }); }},
        {"abi-spec-tree-mode", "tree_mode 9", SPECULA_ERR_INVALID_ARGUMENT, "tree_mode",
         [&] { return spec([](auto &o) { o.ngram = 1; o.tree_mode = 9; }); }},
        {"abi-spec-sampled-drafts", "sampled_drafts 2", SPECULA_ERR_INVALID_ARGUMENT, "sampled_drafts",
         [&] { return spec([](auto &o) { o.ngram = 1; o.sampled_drafts = 2; }); }},
        {"abi-spec-tree-width", "tree_widths [4, 0]", SPECULA_ERR_INVALID_ARGUMENT, "tree_widths[1] = 0",
         [&] {
             static const int32_t widths[] = {4, 0};
             return spec([](auto &o) { o.ngram = 1; o.tree_widths = widths; o.n_tree_levels = 2; });
         }},
        {"abi-spec-tree-levels", "n_tree_levels 3 with tree_widths NULL", SPECULA_ERR_INVALID_ARGUMENT, "tree_widths is NULL",
         [&] { return spec([](auto &o) { o.ngram = 1; o.n_tree_levels = 3; }); }},
        {"abi-spec-ngram-lookup", "ngram_lookup_min 5 > ngram_lookup_max 2", SPECULA_ERR_INVALID_ARGUMENT, "ngram_lookup_min",
         [&] { return spec([](auto &o) { o.ngram = 1; o.ngram_lookup_min = 5; o.ngram_lookup_max = 2; }); }},
        {"abi-spec-both-drafters", "a LongSpec draft and a draft model together", SPECULA_ERR_INVALID_ARGUMENT, "not both",
         [&] {
             specula_draft *d = nullptr;
             REQUIRE(specula_draft_load(kDraft.c_str(), model.m, &d, &err) == SPECULA_OK);
             const Outcome o = spec([&](auto &opt) { opt.draft = d; opt.draft_model = model.m; });
             specula_draft_destroy(d);
             return o;
         }},
        {"abi-spec-draft-other-handle", "a draft loaded for another handle of the same model file", SPECULA_ERR_INCOMPATIBLE, "another model",
         [&] {
             ModelPtr twin{load_model(kModel)};
             specula_draft *d = nullptr;
             REQUIRE(specula_draft_load(kDraft.c_str(), twin.m, &d, &err) == SPECULA_OK);
             const Outcome o = spec([&](auto &opt) { opt.draft = d; });
             specula_draft_destroy(d);
             return o;
         }},
        {"abi-draft-load-null-target", "specula_draft_load(target NULL)", SPECULA_ERR_INVALID_ARGUMENT, "target",
         [&] {
             specula_draft *d = nullptr;
             return outcome(specula_draft_load(kDraft.c_str(), nullptr, &d, &err), err);
         }},
        {"abi-draft-load-null-path", "specula_draft_load(path NULL)", SPECULA_ERR_INVALID_ARGUMENT, "path",
         [&] {
             specula_draft *d = nullptr;
             return outcome(specula_draft_load(nullptr, model.m, &d, &err), err);
         }},
        {"abi-draft-getters-null", "specula_draft_window / _n_params / _retain / _destroy on NULL", SPECULA_OK, "",
         [] {
             CHECK(specula_draft_window(nullptr) == 0);
             CHECK(specula_draft_n_params(nullptr) == 0);
             CHECK(specula_draft_retain(nullptr) == nullptr);
             specula_draft_destroy(nullptr);
             return Outcome{};
         }},
        // Snapshots.
        {"abi-snap-save-null-size", "specula_session_save_buffer with size NULL", SPECULA_ERR_INVALID_ARGUMENT, "size",
         [&] { return outcome(specula_session_save_buffer(s, nullptr, nullptr, 0, nullptr, &err), err); }},
        {"abi-snap-scope-enum", "snapshot scope 5", SPECULA_ERR_INVALID_ARGUMENT, "scope",
         [&] {
             specula_snapshot_options o;
             specula_snapshot_options_init(&o);
             o.scope = 5;
             size_t size = 0;
             return outcome(specula_session_save_buffer(s, &o, nullptr, 0, &size, &err), err);
         }},
        {"abi-snap-level", "snapshot compression_level 99", SPECULA_ERR_INVALID_ARGUMENT, "compression_level",
         [&] {
             specula_snapshot_options o;
             specula_snapshot_options_init(&o);
             o.compression_level = 99;
             size_t size = 0;
             return outcome(specula_session_save_buffer(s, &o, nullptr, 0, &size, &err), err);
         }},
        {"abi-snap-save-null-path", "specula_session_save_file(path NULL)", SPECULA_ERR_INVALID_ARGUMENT, "path",
         [&] { return outcome(specula_session_save_file(s, nullptr, nullptr, &err), err); }},
        {"abi-snap-load-null-session", "specula_session_load_file(NULL session)", SPECULA_ERR_INVALID_ARGUMENT, "session is NULL",
         [&] { return outcome(specula_session_load_file(nullptr, "x.snap", &err), err); }},
        {"abi-fork-null", "specula_session_fork(src NULL)", SPECULA_ERR_INVALID_ARGUMENT, "NULL",
         [&] { return outcome(specula_session_fork(nullptr, s, nullptr, &err), err); }},
        {"abi-fork-self", "specula_session_fork(s, s)", SPECULA_ERR_INVALID_ARGUMENT, "the same session",
         [&] { return outcome(specula_session_fork(s, s, nullptr, &err), err); }},
        {"abi-batch-null-model", "specula_batch_create(NULL model)", SPECULA_ERR_INVALID_ARGUMENT, "model is NULL",
         [&] {
             specula_batch *b = nullptr;
             return outcome(specula_batch_create(nullptr, nullptr, &b, &err), err);
         }},
        {"abi-batch-threads", "specula_batch_create with n_threads -1", SPECULA_ERR_INVALID_ARGUMENT, "n_threads",
         [&] {
             specula_batch_options o;
             specula_batch_options_init(&o);
             o.n_threads = -1;
             specula_batch *b = nullptr;
             return outcome(specula_batch_create(model.m, &o, &b, &err), err);
         }},
        {"abi-batch-join-null-session", "specula_session_join_batch(NULL session)", SPECULA_ERR_INVALID_ARGUMENT, "session is NULL",
         [&] { return outcome(specula_session_join_batch(nullptr, nullptr, &err), err); }},
        {"abi-batch-other-model", "specula_session_join_batch of a session on another model than the batch's (it stays alone)",
         SPECULA_ERR_INCOMPATIBLE, "not the batch's model",
         [&] {
             ModelPtr other{load_model(kModel)};
             specula_batch *b = nullptr;
             REQUIRE(specula_batch_create(other.m, nullptr, &b, &err) == SPECULA_OK);
             const Outcome o = outcome(specula_session_join_batch(s, b, &err), err);
             specula_batch_free(b);
             return o;
         }},
        {"abi-batch-stats-struct-size", "specula_batch_get_stats with struct_size 0", SPECULA_ERR_INVALID_ARGUMENT, "struct_size",
         [&] {
             specula_batch *b = nullptr;
             REQUIRE(specula_batch_create(model.m, nullptr, &b, &err) == SPECULA_OK);
             specula_batch_stats st{};
             const Outcome o = outcome(specula_batch_get_stats(b, &st, &err), err);
             specula_batch_free(b);
             return o;
         }},
    };
    run_table(table);
    REQUIRE(specula_session_n_tokens(s) == 0);
    still_usable(s);
    specula_session_destroy(s);
}

// ---- C ABI: wrong order and lifetimes ------------------------------------------------------------------------

TEST_CASE("lifetimes and wrong order", "[catalogue][abi]") {
    specula_error *err = nullptr;
    const std::vector<Entry> table = {
        {"order-model-destroyed-first", "the model handle destroyed while a session (and a draft) still use it", SPECULA_OK, "",
         [&] {
             specula_model *m = load_model(kModel);
             specula_draft *d = nullptr;
             REQUIRE(specula_draft_load(kDraft.c_str(), m, &d, &err) == SPECULA_OK);
             specula_session *s = new_session(m);
             specula_model_destroy(m);  // documented: sessions and drafts hold their own references
             specula_speculative_options o;
             specula_speculative_options_init(&o);
             o.draft = d;
             REQUIRE(specula_session_set_speculative(s, &o, &err) == SPECULA_OK);
             specula_draft_destroy(d);  // documented: the session keeps its own reference
             REQUIRE(specula_session_append_text(s, "Once upon", 9, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
             std::vector<int32_t> out;
             const specula_status st = generate(s, 8, &out);
             CHECK(out.size() == 8);
             specula_session_destroy(s);
             return Outcome{st, ""};
         }},
        {"order-retain-release", "a model retained twice and destroyed three times (balanced)", SPECULA_OK, "",
         [&] {
             specula_model *m = load_model(kModel);
             CHECK(specula_model_retain(m) == m);
             CHECK(specula_model_retain(m) == m);
             specula_model_destroy(m);
             specula_model_destroy(m);
             CHECK(specula_model_n_vocab(m) == 512);  // one reference left
             specula_model_destroy(m);
             return Outcome{};
         }},
        {"order-cancel-before-generate", "cancel before generate: CANCELLED once, then generation works", SPECULA_ERR_CANCELLED, "cancelled",
         [&] {
             ModelPtr m{load_model(kModel)};
             specula_session *s = new_session(m.m);
             REQUIRE(specula_session_append_text(s, "Once", 4, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
             specula_session_cancel(s);
             std::string message;
             const specula_status st = generate(s, 4, nullptr, &message);
             CHECK(generate(s, 4) == SPECULA_OK);  // the request was consumed
             specula_session_destroy(s);
             return Outcome{st, message};
         }},
        {"order-cancel-before-evaluate", "cancel before specula_session_evaluate", SPECULA_ERR_CANCELLED, "cancelled",
         [&] {
             ModelPtr m{load_model(kModel)};
             specula_session *s = new_session(m.m);
             REQUIRE(specula_session_append_text(s, "Once", 4, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
             specula_session_cancel(s);
             const Outcome o = outcome(specula_session_evaluate(s, &err), err);
             CHECK(specula_session_evaluate(s, &err) == SPECULA_OK);
             specula_session_destroy(s);
             return o;
         }},
        {"order-context-full-generate", "generate with the context already full", SPECULA_ERR_CONTEXT_FULL, "context is full",
         [&] {
             ModelPtr m{load_model(kModel)};
             specula_session *s = new_session(m.m, 16);
             const std::vector<int32_t> ids(16, 5);
             REQUIRE(specula_session_append_tokens(s, ids.data(), ids.size(), &err) == SPECULA_OK);
             std::string message;
             const specula_status st = generate(s, 4, nullptr, &message);
             CHECK(specula_session_n_tokens(s) == 16);
             specula_session_destroy(s);
             return Outcome{st, message};
         }},
        {"order-draft-logits-no-drafter", "specula_session_draft_logits without a drafter", SPECULA_ERR_INVALID_ARGUMENT, "no drafter",
         [&] {
             ModelPtr m{load_model(kModel)};
             specula_session *s = new_session(m.m);
             REQUIRE(specula_session_append_text(s, "Once", 4, SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
             std::vector<float> logits(512);
             const Outcome o = outcome(specula_session_draft_logits(s, logits.data(), logits.size(), &err), err);
             specula_session_destroy(s);
             return o;
         }},
    };
    run_table(table);
}

// ---- the C++ wrapper: moved-from handles, double destruction ---------------------------------------------------
// (C#: SafeHandle.Dispose is idempotent by contract; Rust: a moved value cannot be dropped twice, the compiler
// refuses it. Both are covered by the languages themselves.)

TEST_CASE("C++ wrapper", "[catalogue][wrapper]") {
    const std::vector<Entry> table = {
        {"cpp-moved-from-session", "a method called on a moved-from specula::Session", SPECULA_ERR_INVALID_ARGUMENT, "session is NULL",
         [] {
             specula::Model m = specula::Model::load(kModel);
             specula::Session a(m, specula::SessionOptions(), specula::SamplerOptions::greedy());
             specula::Session b = std::move(a);
             CHECK(!a);
             const Outcome o = thrown([&] { a.append_text("Once"); });
             b.append_text("Once");  // the moved-to one works
             CHECK(b.generate(specula::GenerateOptions(2)) == SPECULA_STOP_MAX_TOKENS);
             return o;  // both destructors run: a holds NULL, b the session (ASan: no double free)
         }},
        {"cpp-reset-twice", "Session::reset() twice, then destruction", SPECULA_OK, "",
         [] {
             specula::Model m = specula::Model::load(kModel);
             specula::Session s(m, specula::SessionOptions(), specula::SamplerOptions::greedy());
             s.reset();
             s.reset();
             CHECK(!s);
             CHECK(s.n_tokens() == 0);
             return Outcome{};
         }},
        {"cpp-model-reset-under-session", "Model::reset() while a Session uses it, then the session generates", SPECULA_OK, "",
         [] {
             specula::Model m = specula::Model::load(kModel);
             specula::Session s(m, specula::SessionOptions(), specula::SamplerOptions::greedy());
             m.reset();
             m.reset();
             s.append_text("Once upon a time");
             CHECK(s.generate(specula::GenerateOptions(4)) == SPECULA_STOP_MAX_TOKENS);
             return Outcome{};
         }},
        {"cpp-model-self-move", "Model moved into itself, copies destroyed in any order", SPECULA_OK, "",
         [] {
             specula::Model m = specula::Model::load(kModel);
             specula::Model &alias = m;
             m = std::move(alias);
             CHECK(m);
             {
                 specula::Model copy = m;
                 specula::Model copy2 = copy;
                 m.reset();
                 CHECK(copy2.n_vocab() == 512);
             }
             return Outcome{};
         }},
        {"cpp-load-bad-file", "specula::Model::load of a missing file throws specula::Error", SPECULA_ERR_IO, "no-such-model.gguf",
         [] { return thrown([] { specula::Model::load("/nonexistent/no-such-model.gguf"); }); }},
        {"cpp-moved-from-draft", "Draft moved from, then both destroyed; the moved-to draft still attaches", SPECULA_OK, "",
         [] {
             specula::Model m = specula::Model::load(kModel);
             specula::Draft a = specula::Draft::load(kDraft, m);
             specula::Draft b = std::move(a);
             CHECK(!a);
             a.reset();
             specula::Session s(m, specula::SessionOptions(), specula::SamplerOptions::greedy());
             s.set_speculative(b);
             s.append_text("Once upon a time");
             CHECK(s.generate(specula::GenerateOptions(4)) == SPECULA_STOP_MAX_TOKENS);
             return Outcome{};
         }},
        {"cpp-progress-throws", "a Model::load progress callback that throws: the exception comes back, nothing leaks", SPECULA_OK, "",
         [] {
             specula::ModelOptions o;
             o.progress = [](float) -> bool { throw std::runtime_error("from the callback"); };
             bool caught = false;
             try {
                 specula::Model::load(kModel, o);
             } catch (const std::runtime_error &e) {
                 caught = std::string(e.what()) == "from the callback";
             }
             CHECK(caught);
             return Outcome{};
         }},
    };
    run_table(table);
}

// ---- cancellation ----------------------------------------------------------------------------------------------

namespace {

// Cancels the session when the chosen phase is entered for the (skip + 1)-th time, through the session's phase
// hook (set for the lifetime of this object).
struct CancelAtPhase {
    Phase phase;
    int skip;
    specula_session *session = nullptr;
    int fired = 0;
    CancelAtPhase(Phase p, int k) : phase(p), skip(k) { specula::internal::set_phase_hook(&CancelAtPhase::hook, this); }
    ~CancelAtPhase() { specula::internal::set_phase_hook(nullptr, nullptr); }
    static void hook(Phase p, void *user) {
        auto *self = static_cast<CancelAtPhase *>(user);
        if (p != self->phase || self->fired > 0 || self->session == nullptr) return;
        if (self->skip-- > 0) return;
        self->fired = 1;
        specula_session_cancel(self->session);
    }
};

const char *phase_name(Phase p) {
    switch (p) {
    case Phase::Prefill: return "prefill";
    case Phase::Decode: return "decode";
    case Phase::Draft: return "draft";
    case Phase::Verify: return "verify";
    case Phase::Accept: return "accept";
    case Phase::Commit: return "commit";
    }
    return "?";
}

enum class Drafter { None, Ngram, LongSpec, DraftModel };
const char *drafter_name(Drafter d) {
    switch (d) {
    case Drafter::None: return "plain";
    case Drafter::Ngram: return "ngram";
    case Drafter::LongSpec: return "longspec";
    case Drafter::DraftModel: return "draft-model";
    }
    return "?";
}

const std::string kCancelPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog.";
constexpr int32_t kCancelTokens = 48;

// A greedy session with the drafter attached (FIXED trees, so that every step is a round), prefill in batches of 4.
specula_session *drafted_session(specula_model *model, Drafter d, specula_draft *draft, specula_model *draft_model) {
    specula_session *s = new_session(model, 256, 4);
    if (d == Drafter::None) return s;
    specula_speculative_options o;
    specula_speculative_options_init(&o);
    static const int32_t widths[] = {2, 2, 2};
    o.tree_mode = SPECULA_TREE_FIXED;
    if (d == Drafter::Ngram) o.ngram = 1;
    if (d == Drafter::LongSpec) o.draft = draft;
    if (d == Drafter::DraftModel) o.draft_model = draft_model;
    if (d != Drafter::Ngram) {
        o.tree_widths = widths;
        o.n_tree_levels = 3;
    }
    specula_error *err = nullptr;
    const specula_status st = specula_session_set_speculative(s, &o, &err);
    INFO(specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(st == SPECULA_OK);
    return s;
}

// One cancellation entry: generation is cancelled at `phase` (its (skip + 1)-th occurrence); the call returns
// CANCELLED, the context is a prefix of the uncancelled run's with n_tokens = the prompt + the emitted tokens, and
// going on gives exactly the uncancelled run's tokens.
Outcome cancel_entry(specula_model *model, Drafter d, specula_draft *draft, specula_model *draft_model, Phase phase, int skip,
                     const std::vector<int32_t> &reference) {
    specula_session *s = drafted_session(model, d, draft, draft_model);
    specula_error *err = nullptr;
    REQUIRE(specula_session_append_text(s, kCancelPrompt.data(), kCancelPrompt.size(), SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
    const int32_t n_prompt = specula_session_n_tokens(s);
    std::vector<int32_t> emitted;
    std::string message;
    specula_status st;
    int fired;
    {
        CancelAtPhase cancel(phase, skip);
        cancel.session = s;
        st = generate(s, kCancelTokens, &emitted, &message);
        fired = cancel.fired;
    }
    INFO(drafter_name(d) << " cancelled at " << phase_name(phase) << " #" << skip + 1 << "; emitted " << emitted.size());
    CHECK(fired == 1);
    const std::vector<int32_t> after = session_tokens(s);
    CHECK(int32_t(after.size()) == n_prompt + int32_t(emitted.size()));  // n_tokens = what was committed
    REQUIRE(after.size() <= reference.size());
    CHECK(std::equal(after.begin(), after.end(), reference.begin()));  // a prefix of the uncancelled run
    specula_stats stats{};
    stats.struct_size = sizeof stats;
    REQUIRE(specula_session_stats(s, &stats, &err) == SPECULA_OK);
    CHECK(stats.n_ctx_used == int32_t(after.size()));
    // Lossless across the cancel: the rest of the run is the uncancelled run's.
    CHECK(generate(s, kCancelTokens - int32_t(emitted.size())) == SPECULA_OK);
    CHECK(session_tokens(s) == reference);
    specula_session_destroy(s);
    return {st, message};
}

}  // namespace

TEST_CASE("cancel during model load", "[catalogue][cancel]") {
    struct Counter {
        int calls = 0, cancel_at = 0;
        static int32_t fn(float, void *u) {
            auto *c = static_cast<Counter *>(u);
            return c->calls++ == c->cancel_at ? 0 : 1;
        }
    };
    Counter probe{0, -1};  // how many progress calls a load makes
    specula_model_options o;
    specula_model_options_init(&o);
    o.progress = &Counter::fn;
    o.progress_user_data = &probe;
    specula_model *m = nullptr;
    specula_error *err = nullptr;
    REQUIRE(specula_model_load(kModel.c_str(), &o, &m, &err) == SPECULA_OK);
    specula_model_destroy(m);
    REQUIRE(probe.calls >= 2);
    const int calls = probe.calls;
    const std::vector<std::pair<std::string, int>> where = {{"cancel-load-first", 0}, {"cancel-load-middle", calls / 2}, {"cancel-load-last", calls - 1}};
    std::vector<Entry> table;
    for (const auto &[id, at] : where)
        table.push_back({id, "the progress callback returns 0 at its call " + std::to_string(at + 1) + " of " + std::to_string(calls),
                         SPECULA_ERR_CANCELLED, "cancelled", [&o, at = at] {
                             Counter c{0, at};
                             specula_model_options oc = o;
                             oc.progress_user_data = &c;
                             specula_model *out = nullptr;
                             specula_error *e = nullptr;
                             const Outcome r = outcome(specula_model_load(kModel.c_str(), &oc, &out, &e), e);
                             CHECK(out == nullptr);
                             CHECK(c.calls == at + 1);  // no progress call after the cancel
                             // A later load works.
                             specula_model *again = load_model(kModel);
                             specula_model_destroy(again);
                             return r;
                         }});
    run_table(table);
}

TEST_CASE("cancel at every phase of generation", "[catalogue][cancel]") {
    ModelPtr model{load_model(kModel)};
    specula_error *err = nullptr;
    specula_draft *draft = nullptr;
    REQUIRE(specula_draft_load(kDraft.c_str(), model.m, &draft, &err) == SPECULA_OK);
    const bool have_draft_model = fs::exists(draft_model_path());
    ModelPtr draft_model;
    if (have_draft_model) draft_model.m = load_model(draft_model_path());

    // The uncancelled run (plain greedy decoding; every drafter must give the same tokens).
    std::vector<int32_t> reference;
    {
        specula_session *s = new_session(model.m, 256, 4);
        REQUIRE(specula_session_append_text(s, kCancelPrompt.data(), kCancelPrompt.size(), SPECULA_TOKENIZE_ADD_SPECIAL, &err) == SPECULA_OK);
        REQUIRE(generate(s, kCancelTokens) == SPECULA_OK);
        reference = session_tokens(s);
        specula_session_destroy(s);
    }

    struct Case {
        Drafter drafter;
        Phase phase;
        int skip;
    };
    std::vector<Case> cases = {{Drafter::None, Phase::Prefill, 0}, {Drafter::None, Phase::Prefill, 3}, {Drafter::None, Phase::Decode, 0},
                               {Drafter::None, Phase::Decode, 5}};
    for (Drafter d : {Drafter::Ngram, Drafter::LongSpec, Drafter::DraftModel})
        for (Phase p : {Phase::Prefill, Phase::Draft, Phase::Verify, Phase::Accept, Phase::Commit}) cases.push_back({d, p, p == Phase::Prefill ? 3 : 2});
    std::vector<Entry> table;
    for (const Case &c : cases) {
        const std::string id = std::string("cancel-") + drafter_name(c.drafter) + "-" + phase_name(c.phase) + (c.skip == 0 && c.drafter == Drafter::None ? "-first" : "");
        const std::string input = std::string("specula_session_cancel during ") + phase_name(c.phase) + " #" + std::to_string(c.skip + 1) +
                                  " (" + drafter_name(c.drafter) + "); then generation goes on losslessly";
        table.push_back({id, input, SPECULA_ERR_CANCELLED, "cancelled", [&, c] {
                             if (c.drafter == Drafter::DraftModel && !have_draft_model) {
                                 SPECULA_SKIP("fixture " << draft_model_path() << " is missing");
                                 return Outcome{SPECULA_ERR_CANCELLED, "cancelled (skipped)"};
                             }
                             return cancel_entry(model.m, c.drafter, draft, draft_model.m, c.phase, c.skip, reference);
                         }});
    }
    run_table(table);
    specula_draft_destroy(draft);
}
