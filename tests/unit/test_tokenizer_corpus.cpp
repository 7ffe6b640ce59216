// Round trip on about 1 MB of real text found on the machine: the licences in /usr/share/common-licenses (prose)
// and the Python standard library's sources (code), gathered in sorted order so every run reads the same bytes.
// For every fixture vocabulary, detokenize(tokenize(text, add_special = false, parse_special = false)) == text,
// file by file, with the exceptions llama.cpp makes on purpose (see test_tokenizer.cpp / _roundtrip.cpp):
//   - SentencePiece prefixes a space (add_space_prefix) and detokenize strips it again: no exception needed,
//     but a text whose pieces do not start with that space would show here.
//   - gpt-2 and llama-bpe tidy spaces on output (llama.cpp's clean_up_tokenization_spaces: " ," -> "," ...).
//     For them the expected text is the file with the library's clean-up (sdk/src/tokenizer/space_cleanup.cpp,
//     checked against llama.cpp by the tokenizer vectors) applied, and the pieces of the tokens, concatenated, must be the file exactly: byte-level BPE
//     itself loses nothing.
// Files that are not valid UTF-8 are left out (BPE reads invalid bytes as U+FFFD, by design).
// The machine's files are not fixtures: the test WARNs and skips what it cannot find.
#include "common/skip.h"
#include "test_tokenizer_support.h"

#include "machine_files.h"

#include "tokenizer/space_cleanup.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <chrono>

using namespace specula::internal;
using namespace tokenizer_test;
namespace fs = std::filesystem;

namespace {

constexpr size_t kCorpusBytes = 1000 * 1000;
constexpr size_t kMaxFileBytes = 64 * 1024;  // no single file dominates the corpus

struct CorpusFile {
    std::string name;
    std::string text;
};

// Adds whole files in order while they fit in the budget (files over kMaxFileBytes, or not UTF-8, are skipped).
void add_files(const std::vector<fs::path> &files, const fs::path &base, std::vector<CorpusFile> &corpus, size_t &total) {
    for (const fs::path &p : files) {
        std::error_code ec;
        const auto size = fs::file_size(p, ec);
        if (ec || size == 0 || size > kMaxFileBytes || total + size > kCorpusBytes) continue;
        std::string text = read_file(p);
        if (text.size() != size || !is_valid_utf8(text)) continue;
        total += text.size();
        corpus.push_back({fs::relative(p, base).string(), std::move(text)});
    }
}

// Prose first (all of common-licenses), then Python sources up to 1 MB in all. Built once.
const std::vector<CorpusFile> &corpus() {
    static const std::vector<CorpusFile> files = [] {
        std::vector<CorpusFile> out;
        size_t total = 0;
        const fs::path licenses = "/usr/share/common-licenses";
        if (fs::is_directory(licenses)) add_files(specula_apps::sorted_files(licenses, ""), licenses.parent_path(), out, total);
        const fs::path stdlib = specula_apps::python_stdlib_dir();
        if (!stdlib.empty())
            add_files(specula_apps::sorted_files(stdlib, ".py", {"site-packages", "dist-packages", "__pycache__"}), stdlib.parent_path(), out, total);
        return out;
    }();
    return files;
}

size_t corpus_bytes() {
    size_t n = 0;
    for (const CorpusFile &f : corpus()) n += f.text.size();
    return n;
}

// The text detokenizing gives back for vocabularies that tidy spaces: llama.cpp's clean-up applied to the
// original (checked against llama.cpp's own outputs by the tokenizer vectors; the pieces test below checks the
// untidied bytes independently).
std::string clean_up_spaces_of(std::string s) {
    clean_up_spaces(s);
    return s;
}

// "offset N: expected '...' got '...'" around the first difference.
std::string first_difference(const std::string &expected, const std::string &got) {
    size_t i = 0;
    while (i < expected.size() && i < got.size() && expected[i] == got[i]) ++i;
    const size_t from = i > 30 ? i - 30 : 0;
    return "at byte " + std::to_string(i) + " (of " + std::to_string(expected.size()) + "): expected '" +
           escaped(expected.substr(from, 60)) + "' got '" + escaped(got.substr(from, 60)) + "'";
}

struct Model {
    const char *name;
    fs::path path;
};

std::vector<Model> models() {
    const fs::path tok = fixtures_dir() / "tokenizer";
    return {{"llama-spm", tok / "ggml-vocab-llama-spm.gguf"},
            {"phi-3", tok / "ggml-vocab-phi-3.gguf"},
            {"llama-bpe", tok / "ggml-vocab-llama-bpe.gguf"},
            {"qwen2", tok / "ggml-vocab-qwen2.gguf"},
            {"gpt-2", tok / "ggml-vocab-gpt-2.gguf"},
            {"deepseek-coder", tok / "ggml-vocab-deepseek-coder.gguf"},
            {"stories260K", fixtures_dir() / "models" / "stories260K.gguf"},
            {"code-7m", fixtures_dir() / "models" / "code-7m" / "model.gguf"}};
}

void check_corpus(const Model &m) {
    if (!have_fixture(m.path)) return;
    const std::vector<CorpusFile> &files = corpus();
    if (files.empty()) {
        SPECULA_SKIP("neither /usr/share/common-licenses nor a Python standard library was found; nothing to round trip");
        return;
    }
    const Vocab vocab = load_vocab(m.path);
    const bool tidies = std::string(m.name) == "gpt-2" || std::string(m.name) == "llama-bpe";
    size_t bytes = 0, n_files = 0, n_tokens = 0, failures = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const CorpusFile &f : files) {
        bytes += f.text.size();
        ++n_files;
        const std::vector<int32_t> ids = vocab.tokenize(f.text, /*add_special=*/false, /*parse_special=*/false);
        n_tokens += ids.size();
        const std::string back = vocab.detokenize(ids, /*render_special=*/false);
        const std::string expected = tidies ? clean_up_spaces_of(f.text) : f.text;
        bool ok = back == expected;
        std::string why = ok ? "" : "detokenize " + first_difference(expected, back);
        if (ok && tidies) {
            std::string joined;
            for (const int32_t id : ids) joined += vocab.token_to_piece(id, false);
            ok = joined == f.text;
            if (!ok) why = "pieces " + first_difference(f.text, joined);
        }
        if (!ok && ++failures <= 5) {
            INFO(m.name << ": " << f.name << ": " << why);
            CHECK(ok);
        }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(m.name << ": " << n_files << " files, " << bytes << " bytes, " << n_tokens << " tokens, " << s << " s");
    CHECK(failures == 0);
    CHECK(n_files > 0);
}

}  // namespace

TEST_CASE("tokenizer corpus: what was gathered", "[tokenizer]") {
    if (corpus().empty()) {
        SPECULA_SKIP("no corpus files on this machine (no /usr/share/common-licenses, no /usr/lib/python3*)");
        return;
    }
    if (specula_apps::python_stdlib_dir().empty()) WARN("no Python standard library found: the corpus is prose only");
    else CHECK(corpus_bytes() > kCorpusBytes * 9 / 10);  // 1 MB, give or take the last file that did not fit
    CHECK(corpus_bytes() <= kCorpusBytes);
}

// About 3 s in Release on a 2-core VM (8 vocabularies x 1 MB, loading included): under the ~5 s line for [slow].
TEST_CASE("tokenizer corpus: round trip on 1 MB of licences and Python sources", "[tokenizer]") {
    for (const Model &m : models())
        SECTION(m.name) { check_corpus(m); }
}
