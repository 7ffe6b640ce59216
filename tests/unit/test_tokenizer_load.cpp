// Loading vocabularies from hand-built GGUF metadata: llama.cpp's defaults, leniency about integer types, and
// clear errors (never a crash) for broken or unsupported tokenizer metadata.
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

using namespace specula::internal;

namespace {

// A minimal GGUF v3 writer for metadata-only files.
class GgufBuilder {
public:
    GgufBuilder &str(const std::string &key, const std::string &value) {
        begin(key, 8);
        put_string(value);
        return *this;
    }
    GgufBuilder &u32(const std::string &key, uint32_t value) {
        begin(key, 4);
        put(value);
        return *this;
    }
    GgufBuilder &i32(const std::string &key, int32_t value) {
        begin(key, 5);
        put(value);
        return *this;
    }
    GgufBuilder &boolean(const std::string &key, bool value) {
        begin(key, 7);
        put(uint8_t(value));
        return *this;
    }
    GgufBuilder &strings(const std::string &key, const std::vector<std::string> &values) {
        begin(key, 9);
        put(uint32_t(8));
        put(uint64_t(values.size()));
        for (const auto &v : values) put_string(v);
        return *this;
    }
    GgufBuilder &floats(const std::string &key, const std::vector<float> &values) { return array(key, 6, values); }
    GgufBuilder &ints(const std::string &key, const std::vector<int32_t> &values) { return array(key, 5, values); }
    GgufBuilder &bytes(const std::string &key, const std::vector<uint8_t> &values) { return array(key, 0, values); }
    GgufBuilder &shorts(const std::string &key, const std::vector<int16_t> &values) { return array(key, 3, values); }

    Vocab load() const {
        std::vector<uint8_t> file;
        auto append = [&](const void *p, size_t n) { file.insert(file.end(), (const uint8_t *)p, (const uint8_t *)p + n); };
        const uint32_t magic = GgufFile::kMagic, version = 3;
        const uint64_t n_tensors = 0, n_kv = count_;
        append(&magic, 4);
        append(&version, 4);
        append(&n_tensors, 8);
        append(&n_kv, 8);
        append(body_.data(), body_.size());
        return Vocab::load(GgufFile::parse(FileBytes::from_vector(std::move(file))));
    }

private:
    template <typename T> void put(T v) {
        const auto *p = reinterpret_cast<const uint8_t *>(&v);
        body_.insert(body_.end(), p, p + sizeof v);
    }
    void put_string(const std::string &s) {
        put(uint64_t(s.size()));
        body_.insert(body_.end(), s.begin(), s.end());
    }
    void begin(const std::string &key, uint32_t type) {
        put_string(key);
        put(type);
        ++count_;
    }
    template <typename T> GgufBuilder &array(const std::string &key, uint32_t element_type, const std::vector<T> &values) {
        begin(key, 9);
        put(element_type);
        put(uint64_t(values.size()));
        for (const T v : values) put(v);
        return *this;
    }

    std::vector<uint8_t> body_;
    uint64_t count_ = 0;
};

// A tiny SentencePiece vocabulary: specials, the 256 byte tokens, a few pieces.
GgufBuilder tiny_spm() {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.push_back(name);
        types.push_back(6);
    }
    for (const char *piece : {"\xE2\x96\x81", "h", "i", "hi", "\xE2\x96\x81hi"}) {
        tokens.push_back(piece);
        types.push_back(1);
    }
    std::vector<float> scores(tokens.size(), 0.0f);
    scores[tokens.size() - 2] = -1.0f;  // "hi"
    scores[tokens.size() - 1] = -0.5f;  // "▁hi"
    GgufBuilder b;
    b.str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", tokens).floats("tokenizer.ggml.scores", scores).ints("tokenizer.ggml.token_type", types);
    return b;
}

// A tiny byte-level BPE vocabulary: the 256 byte characters and one merge.
GgufBuilder tiny_bpe(const std::string &pre) {
    std::vector<std::string> tokens;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        // bytes_to_unicode: printable Latin-1 maps to itself, the rest to U+0100 onwards
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        const uint32_t cp = printable ? uint32_t(b) : next++;
        std::string utf8;
        if (cp < 0x80) utf8 += char(cp);
        else {
            utf8 += char(0xC0 | (cp >> 6));
            utf8 += char(0x80 | (cp & 0x3F));
        }
        tokens.push_back(utf8);
    }
    tokens.push_back("hi");
    tokens.push_back("<|endoftext|>");
    GgufBuilder b;
    b.str("tokenizer.ggml.model", "gpt2").strings("tokenizer.ggml.tokens", tokens).strings("tokenizer.ggml.merges", {"h i"});
    if (!pre.empty()) b.str("tokenizer.ggml.pre", pre);
    return b;
}

void require_error(const GgufBuilder &b, specula_status status, const std::string &fragment) {
    try {
        b.load();
        FAIL("loaded a vocabulary that should have been refused (" << fragment << ")");
    } catch (const Error &e) {
        INFO(e.what());
        CHECK(e.status() == status);
        CHECK(std::string(e.what()).find(fragment) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("tokenizer load: SentencePiece defaults for absent keys", "[tokenizer]") {
    const Vocab v = tiny_spm().load();
    CHECK(v.model_name() == "llama");
    CHECK(v.bos() == 1);
    CHECK(v.eos() == 2);
    CHECK(v.unk() == 0);
    CHECK(v.add_bos());
    CHECK_FALSE(v.add_eos());
    CHECK(v.is_eog(2));  // "</s>" and the EOS
    CHECK(v.nl() == 3 + '\n');
    // "▁hi" (score -0.5) beats "hi" (score -1); BOS added; the leading space comes from add_space_prefix.
    CHECK(v.tokenize("hi", true, false) == std::vector<int32_t>{1, 263});
    CHECK(v.detokenize({1, 263}, false) == " hi");
    CHECK(v.detokenize({263}, false) == "hi");
    // Without add_space_prefix the text is taken as is; "x" is spelled with its byte token.
    const Vocab no_prefix = tiny_spm().boolean("tokenizer.ggml.add_space_prefix", false).load();
    CHECK(no_prefix.tokenize("hix", false, false) == std::vector<int32_t>{262, 3 + 'x'});
}

TEST_CASE("tokenizer load: explicit flags and ids, any integer type", "[tokenizer]") {
    const Vocab v = tiny_spm()
                        .boolean("tokenizer.ggml.add_bos_token", false)
                        .boolean("tokenizer.ggml.add_eos_token", true)
                        .i32("tokenizer.ggml.bos_token_id", 2)
                        .u32("tokenizer.ggml.eos_token_id", 1)
                        .u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu)  // out of range: ignored
                        .load();
    CHECK(v.bos() == 2);
    CHECK(v.eos() == 1);
    CHECK(v.pad() == -1);
    CHECK(v.tokenize("hi", true, false) == std::vector<int32_t>{263, 1});

    // Token types stored as u8 or i16 instead of i32.
    std::vector<uint8_t> types8(264, 1);
    std::vector<int16_t> types16(264, 1);
    types8[1] = types16[1] = 3;
    std::vector<std::string> tokens(264);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::to_string(i) + "t";
    GgufBuilder b8, b16;
    b8.str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", tokens).bytes("tokenizer.ggml.token_type", types8);
    b16.str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", tokens).shorts("tokenizer.ggml.token_type", types16);
    CHECK(b8.load().is_control(1));
    CHECK(b16.load().is_control(1));
    CHECK_FALSE(b16.load().is_control(2));
}

TEST_CASE("tokenizer load: byte-level BPE", "[tokenizer]") {
    const Vocab v = tiny_bpe("gpt-2").load();
    CHECK(v.model_name() == "gpt2");
    CHECK_FALSE(v.add_bos());
    CHECK(v.tokenize("hi hi", false, false) == std::vector<int32_t>{256, int32_t(v.tokenize(" ", false, false).at(0)), 256});
    // "<|endoftext|>" is found by name: an end-of-generation control token.
    CHECK(v.is_eog(257));
    CHECK(v.is_control(257));
    CHECK(v.tokenize("<|endoftext|>", false, true) == std::vector<int32_t>{257});
    CHECK(v.tokenize("<|endoftext|>", false, false).size() > 1);
    CHECK(v.token_to_piece(257, false).empty());
    CHECK(v.token_to_piece(257, true) == "<|endoftext|>");
    // A file without tokenizer.ggml.pre gets llama.cpp's "default" pre-tokenizer.
    CHECK(tiny_bpe("").load().tokenize("hi", false, false) == std::vector<int32_t>{256});
    // The llama3 pre-tokenizer turns on add_bos, which then needs a BOS id that fits (the default, 11, does).
    CHECK(tiny_bpe("llama-bpe").load().add_bos());
}

TEST_CASE("tokenizer load: broken or unsupported metadata is an Error, not a crash", "[tokenizer]") {
    require_error(GgufBuilder().str("general.architecture", "llama"), SPECULA_ERR_FORMAT, "tokenizer.ggml.model");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "t5").strings("tokenizer.ggml.tokens", {"a"}), SPECULA_ERR_UNSUPPORTED, "'t5'");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama"), SPECULA_ERR_FORMAT, "tokenizer.ggml.tokens");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {}), SPECULA_ERR_FORMAT, "no tokens");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").u32("tokenizer.ggml.tokens", 3), SPECULA_ERR_FORMAT, "tokenizer.ggml.tokens");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a", "b"}).floats("tokenizer.ggml.scores", {0.0f}),
                  SPECULA_ERR_FORMAT, "scores");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a", "b"}).ints("tokenizer.ggml.token_type", {1}),
                  SPECULA_ERR_FORMAT, "token_type");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a", "b"}).floats("tokenizer.ggml.token_type", {1, 1}),
                  SPECULA_ERR_FORMAT, "token_type");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a", "b", "a"}), SPECULA_ERR_FORMAT, "duplicate");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a"}).str("tokenizer.ggml.bos_token_id", "x"),
                  SPECULA_ERR_FORMAT, "bos_token_id");
    // add_bos_token set, but the default BOS (1) does not fit a one-token vocabulary.
    require_error(GgufBuilder().str("tokenizer.ggml.model", "llama").strings("tokenizer.ggml.tokens", {"a"}), SPECULA_ERR_FORMAT, "bos_token_id");
    require_error(GgufBuilder().str("tokenizer.ggml.model", "gpt2").strings("tokenizer.ggml.tokens", {"a"}), SPECULA_ERR_FORMAT, "merges");
    require_error(tiny_bpe("no-such-pre-tokenizer"), SPECULA_ERR_UNSUPPORTED, "no-such-pre-tokenizer");
    require_error(tiny_spm().str("tokenizer.ggml.scores", "x"), SPECULA_ERR_FORMAT, "duplicate metadata key");
}

TEST_CASE("tokenizer: an empty Vocab refuses to work", "[tokenizer]") {
    const Vocab v;
    CHECK(v.n_tokens() == 0);
    CHECK(v.bos() == -1);
    CHECK(v.model_name().empty());
    CHECK_FALSE(v.is_eog(0));
    CHECK_THROWS_AS(v.tokenize("x", true, false), Error);
    CHECK_THROWS_AS(v.token_to_piece(0, true), Error);
}
