// The tokenizer against what llama.cpp produces: its own test vectors for six vocabularies, and the prompts of
// the reference runs on stories260K and code-7m. Also detokenize round trips and special-token behaviour.
#include "test_tokenizer_support.h"

#include "common/temp_dir.h"
#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/vocab_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <thread>

using namespace specula::internal;
using namespace tokenizer_test;

namespace {

void check_vectors(const std::string &name) {
    const auto path = fixtures_dir() / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    const std::vector<VectorCase> cases = read_vectors(path);
    REQUIRE(cases.size() >= 40);

    size_t passed = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::vector<int32_t> got = vocab.tokenize(cases[i].text, /*add_special=*/false, /*parse_special=*/false);
        INFO(name << " case " << i << ": '" << escaped(cases[i].text) << "'\n  expected " << ids_to_string(cases[i].expected)
                  << "\n  got      " << ids_to_string(got));
        CHECK(got == cases[i].expected);
        if (got == cases[i].expected) ++passed;
    }
    CHECK(passed == cases.size());
}

// detokenize(tokenize(text)) == text, where it should hold: SentencePiece strips the space it prefixed, byte-level
// BPE is lossless. Vocabularies that tidy spaces on output (gpt-2, llama-bpe) change " ," and friends on purpose.
void check_round_trip(const std::string &name) {
    const auto path = fixtures_dir() / "tokenizer" / ("ggml-vocab-" + name + ".gguf");
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    const bool tidies = name == "gpt-2" || name == "llama-bpe";
    size_t checked = 0;
    for (const VectorCase &c : read_vectors(path)) {
        if (tidies) {
            bool tidied = false;
            for (const char *pattern : {" ?", " !", " .", " ,", " '"}) tidied |= c.text.find(pattern) != std::string::npos;
            if (tidied) continue;
        }
        INFO(name << ": '" << escaped(c.text) << "'");
        CHECK(vocab.detokenize(vocab.tokenize(c.text, false, false), false) == c.text);
        ++checked;
    }
    CHECK(checked >= 30);
}

}  // namespace

TEST_CASE("tokenizer: llama.cpp test vectors, llama-spm (SentencePiece)", "[tokenizer]") { check_vectors("llama-spm"); }
TEST_CASE("tokenizer: llama.cpp test vectors, phi-3 (SentencePiece)", "[tokenizer]") { check_vectors("phi-3"); }
TEST_CASE("tokenizer: llama.cpp test vectors, llama-bpe (Llama 3 BPE)", "[tokenizer]") { check_vectors("llama-bpe"); }
TEST_CASE("tokenizer: llama.cpp test vectors, qwen2 (BPE)", "[tokenizer]") { check_vectors("qwen2"); }
TEST_CASE("tokenizer: llama.cpp test vectors, gpt-2 (BPE)", "[tokenizer]") { check_vectors("gpt-2"); }
TEST_CASE("tokenizer: llama.cpp test vectors, deepseek-coder (BPE)", "[tokenizer]") { check_vectors("deepseek-coder"); }

TEST_CASE("tokenizer: detokenize(tokenize(text)) gives the text back", "[tokenizer]") {
    for (const char *name : {"llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2", "deepseek-coder"}) {
        SECTION(name) { check_round_trip(name); }
    }
}

TEST_CASE("tokenizer: reference prompts of stories260K and code-7m", "[tokenizer]") {
    const auto reference = fixtures_dir() / "reference";
    if (!have_fixture(reference)) return;
    const auto stories_path = fixtures_dir() / "models" / "stories260K.gguf";
    const auto code_path = fixtures_dir() / "models" / "code-7m" / "model.gguf";
    if (!have_fixture(stories_path) || !have_fixture(code_path)) return;
    const Vocab stories = load_vocab(stories_path);
    const Vocab code = load_vocab(code_path);

    size_t checked = 0;
    for (const auto &entry : std::filesystem::directory_iterator(reference)) {
        const std::string file = entry.path().filename().string();
        if (entry.path().extension() != ".json") continue;
        const bool is_stories = file.rfind("stories260K_", 0) == 0, is_code = file.rfind("code7m_", 0) == 0;
        if (!is_stories && !is_code) continue;
        const auto json = nlohmann::json::parse(read_file(entry.path()));
        const std::string text = json.at("prompt_text");
        const std::vector<int32_t> expected = json.at("prompt_ids");
        const Vocab &vocab = is_stories ? stories : code;
        INFO(file << ": '" << escaped(text) << "'");
        CHECK(vocab.tokenize(text, /*add_special=*/true, /*parse_special=*/false) == expected);
        ++checked;
    }
    CHECK(checked >= 8);

    // The one spelled out in llama2.c's own test.
    CHECK(stories.tokenize("Once upon a time, there was a dog", true, false) ==
          std::vector<int32_t>{1, 403, 407, 261, 378, 432, 383, 286, 261, 400, 428});
}

TEST_CASE("tokenizer: stories260K uses llama.cpp's SentencePiece defaults", "[tokenizer]") {
    const auto path = fixtures_dir() / "models" / "stories260K.gguf";
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);  // no tokenizer.ggml.pre, add_bos_token or add_eos_token in this file
    CHECK(vocab.model_name() == "llama");
    CHECK(vocab.n_tokens() == 512);
    CHECK(vocab.bos() == 1);
    CHECK(vocab.eos() == 2);
    CHECK(vocab.unk() == 0);
    CHECK(vocab.add_bos());
    CHECK_FALSE(vocab.add_eos());
    CHECK(vocab.is_eog(2));
    CHECK_FALSE(vocab.is_eog(1));
    CHECK(vocab.is_control(1));
    CHECK(vocab.token_attr(1) == TokenAttr::Control);
    CHECK(vocab.token_attr(0) == TokenAttr::Unknown);
    CHECK(vocab.token_attr(3) == TokenAttr::Byte);
    CHECK(vocab.nl() == vocab.tokenize("\n", false, false).back());

    CHECK(vocab.tokenize("", true, false) == std::vector<int32_t>{1});
    CHECK(vocab.tokenize("", false, false).empty());

    // Pieces: '▁' is a space, <0x0A> the raw byte, control tokens render only when asked.
    const std::vector<int32_t> ids = vocab.tokenize("Hi\n", false, false);
    std::string joined;
    for (const int32_t id : ids) joined += vocab.token_to_piece(id, false);
    CHECK(joined == " Hi\n");
    CHECK(vocab.token_to_piece(3 + '\n', false) == "\n");
    CHECK(vocab.token_to_piece(1, false).empty());
    CHECK(vocab.token_to_piece(1, true) == "<s>");
    // Only the first token loses SentencePiece's space, even when it is a BOS that renders as nothing
    // (llama_detokenize with remove_special = false).
    CHECK(vocab.detokenize({403, 407}, false) == "Once upon");
    CHECK(vocab.detokenize({1, 403, 407}, false) == " Once upon");
    CHECK(vocab.detokenize({1, 403, 407}, true) == "<s> Once upon");

    // Bytes that are not UTF-8 go through byte fallback unchanged.
    const std::string broken = "a\xFF\xC3";
    CHECK(vocab.detokenize(vocab.tokenize(broken, false, false), false) == broken);
}

TEST_CASE("tokenizer: bad token ids are refused", "[tokenizer]") {
    const auto path = fixtures_dir() / "models" / "stories260K.gguf";
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    for (const int32_t bad : {-1, 512, 1 << 30}) {
        try {
            vocab.token_to_piece(bad, true);
            FAIL("token_to_piece accepted " << bad);
        } catch (const Error &e) {
            CHECK(e.status() == SPECULA_ERR_INVALID_TOKEN);
        }
        try {
            vocab.detokenize({5, bad}, false);
            FAIL("detokenize accepted " << bad);
        } catch (const Error &e) {
            CHECK(e.status() == SPECULA_ERR_INVALID_TOKEN);
        }
        CHECK_FALSE(vocab.is_eog(bad));
        CHECK_FALSE(vocab.is_control(bad));
    }
}

TEST_CASE("tokenizer: special tokens in chat text (qwen2, llama-bpe)", "[tokenizer]") {
    const auto qwen_path = fixtures_dir() / "tokenizer" / "ggml-vocab-qwen2.gguf";
    if (!have_fixture(qwen_path)) return;
    const Vocab qwen = load_vocab(qwen_path);
    CHECK(qwen.model_name() == "gpt2");
    CHECK(qwen.pre_name() == "qwen2");
    CHECK_FALSE(qwen.add_bos());

    const int32_t im_start = qwen.tokenize("<|im_start|>", false, true).at(0);
    const int32_t im_end = qwen.tokenize("<|im_end|>", false, true).at(0);
    const int32_t endoftext = qwen.tokenize("<|endoftext|>", false, true).at(0);
    CHECK(im_start == 151644);
    CHECK(im_end == 151645);
    CHECK(endoftext == 151643);
    CHECK(qwen.eos() == im_end);
    CHECK(qwen.is_eog(im_end));
    CHECK(qwen.is_eog(endoftext));
    CHECK_FALSE(qwen.is_eog(im_start));
    CHECK(qwen.is_control(im_start));

    const std::string chat = "<|im_start|>user\nHi there<|im_end|>\n";
    const std::vector<int32_t> parsed = qwen.tokenize(chat, false, true);
    CHECK(parsed.front() == im_start);
    CHECK(std::count(parsed.begin(), parsed.end(), im_end) == 1);
    // Without parse_special the markers are plain text.
    const std::vector<int32_t> plain = qwen.tokenize(chat, false, false);
    CHECK(std::count(plain.begin(), plain.end(), im_start) == 0);
    CHECK(qwen.detokenize(plain, false) == chat);
    // Control tokens render only on request.
    CHECK(qwen.detokenize(parsed, true) == chat);
    CHECK(qwen.detokenize(parsed, false) == "user\nHi there\n");

    const auto llama_path = fixtures_dir() / "tokenizer" / "ggml-vocab-llama-bpe.gguf";
    if (!have_fixture(llama_path)) return;
    const Vocab llama = load_vocab(llama_path);
    CHECK(llama.add_bos());  // the llama-bpe pre-tokenizer implies it
    CHECK(llama.bos() == 128000);
    const std::vector<int32_t> with_bos = llama.tokenize("Hello", true, false);
    CHECK(with_bos.front() == 128000);
    CHECK(with_bos.size() == 2);
    const int32_t eot = llama.tokenize("<|eot_id|>", false, true).at(0);
    CHECK(eot == 128009);
    CHECK(llama.is_eog(eot));
    CHECK(llama.is_eog(128001));  // <|end_of_text|>
    CHECK(llama.eot() == eot);
}

// With special-token parsing off, llama.cpp skips only CONTROL and UNKNOWN tokens: a USER_DEFINED one is still
// split out of the text first (as Hugging Face does for added tokens). phi-3's "</s>" (id 2) is USER_DEFINED there,
// its "<|end|>" and "<|user|>" are CONTROL.
TEST_CASE("tokenizer: user-defined tokens match without special parsing, control ones do not (phi-3)", "[tokenizer]") {
    const auto path = fixtures_dir() / "tokenizer" / "ggml-vocab-phi-3.gguf";
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    REQUIRE(vocab.token_text(2) == "</s>");
    CHECK(vocab.token_attr(2) == TokenAttr::UserDefined);
    CHECK_FALSE(vocab.is_control(2));
    CHECK_FALSE(vocab.is_eog(2));  // phi-3 ends with <|endoftext|> (its EOS) and <|end|>
    CHECK(vocab.is_eog(32000));
    CHECK(vocab.is_eog(32007));

    const std::vector<int32_t> plain = vocab.tokenize("Hello</s>world", /*add_special=*/false, /*parse_special=*/false);
    CHECK(std::count(plain.begin(), plain.end(), 2) == 1);
    CHECK(plain == vocab.tokenize("Hello</s>world", false, true));
    // phi-3 strips the spaces to the right of "</s>" (llama.cpp's per-model RSTRIP): "</s>  world" == "</s>world".
    CHECK(vocab.tokenize("Hello</s>  world", false, false) == plain);
    // A user-defined token renders as its text (SentencePiece prefixes a space to the text after a special token,
    // as llama.cpp does, hence " world").
    CHECK(vocab.detokenize(plain, false) == "Hello</s> world");

    const std::string chat = "<|user|>\nHi<|end|>\n";
    const std::vector<int32_t> text_only = vocab.tokenize(chat, false, false);
    CHECK(std::count(text_only.begin(), text_only.end(), 32010) == 0);  // <|user|>
    CHECK(std::count(text_only.begin(), text_only.end(), 32007) == 0);  // <|end|>
    const std::vector<int32_t> parsed = vocab.tokenize(chat, false, true);
    CHECK(std::count(parsed.begin(), parsed.end(), 32010) == 1);
    CHECK(std::count(parsed.begin(), parsed.end(), 32007) == 1);
}

TEST_CASE("tokenizer: byte-level BPE pieces can split a character", "[tokenizer]") {
    const auto path = fixtures_dir() / "tokenizer" / "ggml-vocab-gpt-2.gguf";
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    const std::string text = "I \xF0\x9F\x92\x96 \xE4\xBD\xA0\xE5\xA5\xBD";  // "I 💖 你好"
    const std::vector<int32_t> ids = vocab.tokenize(text, false, false);
    std::string joined;
    bool some_piece_incomplete = false;
    for (const int32_t id : ids) {
        const std::string piece = vocab.token_to_piece(id, false);
        some_piece_incomplete |= piece.size() == 1 && (uint8_t(piece[0]) & 0x80);
        joined += piece;
    }
    CHECK(joined == text);
    CHECK(some_piece_incomplete);
    // Invalid UTF-8 is read as U+FFFD, as llama.cpp does.
    CHECK(vocab.detokenize(vocab.tokenize("a\xFF" "b", false, false), false) == "a\xEF\xBF\xBD" "b");
}

TEST_CASE("tokenizer: one Vocab serves several threads at once", "[tokenizer][concurrency]") {
    const auto path = fixtures_dir() / "tokenizer" / "ggml-vocab-llama-bpe.gguf";
    if (!have_fixture(path)) return;
    const Vocab vocab = load_vocab(path);
    const std::vector<VectorCase> cases = read_vectors(path);
    const Vocab copy = vocab;  // copies share the loaded data
    CHECK(copy.n_tokens() == vocab.n_tokens());

    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            const Vocab &v = t % 2 ? copy : vocab;
            for (int round = 0; round < 20; ++round)
                for (const VectorCase &c : cases)
                    if (v.tokenize(c.text, false, false) != c.expected || v.detokenize(c.expected, false).empty() != c.text.empty())
                        ++mismatches[size_t(t)];
        });
    }
    for (std::thread &th : threads) th.join();
    CHECK(mismatches == std::vector<int>(4, 0));
}

// StarCoder2's vocabulary is not among the fixtures: this one is GPT-2's byte-level BPE (StarCoder's tokenizer is
// of that kind) with StarCoder2's added tokens after it, as CONTROL tokens, and its `starcoder` pre-tokenizer. What
// a StarCoder2 GGUF needs for /infill: the FIM tokens found by their names (the converter writes no FIM ids), control
// tokens that special-token parsing matches, and, as in llama.cpp (2025-02-20 and since), `<repo_name>` and
// `<file_sep>` not taken for FIM_REP / FIM_SEP, so llama-server's prompt is the snippet form of the extra context.
TEST_CASE("tokenizer: a StarCoder2-style vocabulary has its fill-in-the-middle tokens and the snippet form", "[tokenizer][fim]") {
    using namespace specula::internal;
    const auto gpt2_path = fixtures_dir() / "tokenizer" / "ggml-vocab-gpt-2.gguf";
    if (!have_fixture(gpt2_path)) return;
    const GgufFile gpt2 = GgufFile::parse(FileBytes::open(gpt2_path.string(), true));
    // StarCoder2's added tokens after <|endoftext|> (ids 1-18 in its tokenizer.json), in their order.
    const std::vector<std::string> added = {"<fim_prefix>",     "<fim_middle>",     "<fim_suffix>",        "<fim_pad>",
                                            "<repo_name>",      "<file_sep>",       "<issue_start>",       "<issue_comment>",
                                            "<issue_closed>",   "<jupyter_start>",  "<jupyter_text>",      "<jupyter_code>",
                                            "<jupyter_output>", "<jupyter_script>", "<empty_output>",      "<code_to_intermediate>",
                                            "<intermediate_to_code>", "<pr>"};
    GgufWriter w;
    w.set_string("general.architecture", "starcoder2");
    int32_t first = -1;
    for (const auto &[key, value] : gpt2.metadata()) {
        if (key.rfind("tokenizer.", 0) != 0) continue;
        Value v = value;
        if (key == "tokenizer.ggml.tokens") {
            first = int32_t(v.items.size());
            for (const std::string &t : added) v.items.push_back(value_string(t));
        } else if (key == "tokenizer.ggml.token_type") {
            for (size_t i = 0; i < added.size(); ++i) v.items.push_back(value_i32(3));  // CONTROL
        } else if (key == "tokenizer.ggml.pre") {
            v = value_string("starcoder");
        }
        w.set(key, v);
    }
    REQUIRE(first > 0);
    const TempDir dir("starcoder2-vocab");
    w.write_file(dir.file("vocab.gguf"));
    const Vocab vocab = load_vocab(dir.file("vocab.gguf"));
    CHECK(vocab.pre_name() == "starcoder");
    CHECK(vocab.fim_pre() == first);
    CHECK(vocab.fim_mid() == first + 1);
    CHECK(vocab.fim_suf() == first + 2);
    CHECK(vocab.fim_pad() == first + 3);
    CHECK(vocab.fim_rep() == kNoToken);
    CHECK(vocab.fim_sep() == kNoToken);
    CHECK(vocab.is_control(vocab.fim_pre()));
    CHECK(vocab.is_eog(vocab.fim_pad()));  // as llama.cpp: FIM_PAD ends generation
    CHECK_FALSE(vocab.is_eog(vocab.fim_mid()));
    CHECK(vocab.is_eog(vocab.eos()));      // <|endoftext|>
    // A FIM prompt as text: the markers are single tokens with special parsing, plain text without it.
    const std::string text = "<fim_prefix>def add(a, b):\n    return <fim_suffix>\n<fim_middle>";
    const std::vector<int32_t> parsed = vocab.tokenize(text, false, true);
    CHECK(parsed.front() == vocab.fim_pre());
    CHECK(parsed.back() == vocab.fim_mid());
    CHECK(std::count(parsed.begin(), parsed.end(), vocab.fim_suf()) == 1);
    const std::vector<int32_t> plain = vocab.tokenize(text, false, false);
    CHECK(std::count(plain.begin(), plain.end(), vocab.fim_pre()) == 0);
    CHECK(vocab.detokenize(plain, false) == text);
    CHECK(vocab.detokenize(parsed, true) == text);
}
