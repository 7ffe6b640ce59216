// bench_tokenize: tokenizer throughput through the public C API, printed as a markdown table.
//
//   bench_tokenize [--reps 5] [--vocab NAME]...
//
// Two corpora of 1 MB (10^6 bytes), gathered from the machine in sorted file order so that every run reads the
// same bytes:
//   code  - the Python standard library's sources (the first /usr/lib/python3.N or /usr/local/lib/python3.N that
//           holds os.py; site-/dist-packages left out), concatenated and cut at a character boundary at 1 MB.
//   prose - the licences in /usr/share/common-licenses (symlinks left out), concatenated and repeated until 1 MB
//           (the directory holds about 240 KB; repeating it changes nothing for a tokenizer without a cache).
// Files that are not valid UTF-8 are left out. For each vocabulary (SentencePiece: llama-spm, code-7m;
// byte-level BPE: llama-bpe, qwen2, gpt-2, deepseek-coder) and each corpus:
//   tokenize   - one specula_model_tokenize call on the whole megabyte (add-special and parse-special off),
//                into a buffer allocated beforehand; corpus MB / time.
//   detokenize - one specula_model_detokenize call on those tokens into a buffer allocated beforehand;
//                corpus MB / time.
// Single thread. Each figure is the median of --reps runs after one warm-up run that is not counted, by wall
// time and by the thread's CPU time (the two agree on an idle machine; on a shared one, trust the CPU column).
#include <specula/specula.h>

#include "bench_common.h"
#include "machine_files.h"
#include "utf8_check.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

using bench::cpu_name;
using bench::fmt;
using bench::median;
using bench::now_s;

constexpr size_t kCorpusBytes = 1000 * 1000;

struct BenchVocab {
    std::string name;
    std::string kind;  // "SPM" or "BPE"
    std::string path;
};

struct Args {
    int reps = 5;
    std::vector<std::string> vocabs;  // name filters; empty = all
};

// Command line (CLI11, as the specula tool). Exits with CLI11's usage message on bad arguments.
Args parse_args(int argc, char **argv) {
    Args a;
    CLI::App app{"bench_tokenize: tokenizer throughput"};
    app.add_option("--reps", a.reps, "measured runs per figure; the median is reported")->check(CLI::Range(1, 1000));
    app.add_option("--vocab", a.vocabs, "restrict to vocabularies whose name contains NAME (repeatable)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        std::exit(app.exit(e));
    }
    return a;
}

std::vector<BenchVocab> select_vocabs(const Args &args) {
    const std::string fx = SPECULA_FIXTURES_DIR;
    const std::vector<BenchVocab> known = {
        {"llama-spm", "SPM", fx + "/tokenizer/ggml-vocab-llama-spm.gguf"},
        {"code-7m", "SPM", fx + "/models/code-7m/model.gguf"},
        {"llama-bpe", "BPE", fx + "/tokenizer/ggml-vocab-llama-bpe.gguf"},
        {"qwen2", "BPE", fx + "/tokenizer/ggml-vocab-qwen2.gguf"},
        {"gpt-2", "BPE", fx + "/tokenizer/ggml-vocab-gpt-2.gguf"},
        {"deepseek-coder", "BPE", fx + "/tokenizer/ggml-vocab-deepseek-coder.gguf"},
    };
    std::vector<BenchVocab> out;
    std::error_code ec;
    for (const BenchVocab &v : known) {
        bool wanted = args.vocabs.empty();
        for (const std::string &f : args.vocabs) wanted = wanted || v.name.find(f) != std::string::npos;
        if (!wanted) continue;
        if (fs::is_regular_file(v.path, ec)) out.push_back(v);
        else std::fprintf(stderr, "bench_tokenize: %s not found at %s; skipped\n", v.name.c_str(), v.path.c_str());
    }
    return out;
}

// ---- corpus -------------------------------------------------------------------------------------------------

using specula_apps::valid_utf8;

// Cuts s to at most max bytes without splitting a character.
void cut_at_char_boundary(std::string &s, size_t max) {
    if (s.size() <= max) return;
    size_t end = max;
    while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
    s.resize(end);
}

std::string read_file(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The valid-UTF-8 files concatenated in order, stopping once max bytes are reached; *n_files counts those used.
std::string concatenate(const std::vector<fs::path> &files, size_t max, size_t *n_files) {
    std::string out;
    *n_files = 0;
    for (const fs::path &p : files) {
        if (out.size() >= max) break;
        std::string text = read_file(p);
        if (text.empty() || !valid_utf8(text)) continue;
        out += text;
        ++*n_files;
    }
    cut_at_char_boundary(out, max);
    return out;
}

struct Corpus {
    std::string name;
    std::string source;  // for the header
    std::string text;
};

std::vector<Corpus> gather_corpora() {
    std::vector<Corpus> out;
    if (const fs::path stdlib = specula_apps::python_stdlib_dir(); !stdlib.empty()) {
        size_t n = 0;
        std::string text = concatenate(specula_apps::sorted_files(stdlib, ".py", {"site-packages", "dist-packages", "__pycache__"}), kCorpusBytes, &n);
        out.push_back({"code", std::to_string(n) + " files of " + stdlib.string() + "/**.py", std::move(text)});
    } else {
        std::fprintf(stderr, "bench_tokenize: no Python standard library found (/usr/lib/python3.N); no code corpus\n");
    }
    const fs::path licenses = "/usr/share/common-licenses";
    size_t n = 0;
    const std::string once = fs::is_directory(licenses) ? concatenate(specula_apps::sorted_files(licenses, ""), kCorpusBytes, &n) : "";
    if (!once.empty()) {
        std::string text;
        while (text.size() < kCorpusBytes) text += once;
        cut_at_char_boundary(text, kCorpusBytes);
        char src[160];
        std::snprintf(src, sizeof src, "%zu files of %s (%zu bytes, repeated x%.1f)", n, licenses.c_str(), once.size(),
                      double(text.size()) / double(once.size()));
        out.push_back({"prose", src, std::move(text)});
    } else {
        std::fprintf(stderr, "bench_tokenize: /usr/share/common-licenses not found; no prose corpus\n");
    }
    return out;
}

// ---- measuring ----------------------------------------------------------------------------------------------

void check(specula_status st, specula_error *err, const char *what) {
    if (st == SPECULA_OK) return;
    std::string msg = std::string(what) + ": " + specula_status_string(st) + ": " + specula_error_message(err);
    specula_error_destroy(err);
    throw std::runtime_error(msg);
}

// CPU time of the calling thread: unlike wall time it does not grow when other processes share the cores.
double thread_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Result {
    size_t n_tokens = 0;
    double tokenize_mbps = 0, tokenize_cpu_mbps = 0;
    double detokenize_mbps = 0, detokenize_cpu_mbps = 0;
};

Result measure(const specula_model *model, const std::string &text, int reps) {
    std::vector<int32_t> ids(text.size() + 16);  // SentencePiece byte fallback: at most one token per byte
    std::string back(text.size() * 2 + 16, '\0');
    size_t n = 0, len = 0;
    specula_error *err = nullptr;
    std::vector<double> tok_s, tok_cpu, detok_s, detok_cpu;
    for (int r = 0; r <= reps; ++r) {  // run 0 is the warm-up
        const double t0 = now_s(), c0 = thread_cpu_s();
        check(specula_model_tokenize(model, text.data(), text.size(), 0, ids.data(), ids.size(), &n, &err), err, "tokenize");
        const double t1 = now_s(), c1 = thread_cpu_s();
        check(specula_model_detokenize(model, ids.data(), n, 0, back.data(), back.size(), &len, &err), err, "detokenize");
        const double t2 = now_s(), c2 = thread_cpu_s();
        if (r > 0) {
            tok_s.push_back(t1 - t0);
            tok_cpu.push_back(c1 - c0);
            detok_s.push_back(t2 - t1);
            detok_cpu.push_back(c2 - c1);
        }
    }
    const double mb = double(text.size()) / 1e6;
    Result res;
    res.n_tokens = n;
    res.tokenize_mbps = mb / median(tok_s);
    res.tokenize_cpu_mbps = mb / median(tok_cpu);
    res.detokenize_mbps = mb / median(detok_s);
    res.detokenize_cpu_mbps = mb / median(detok_cpu);
    return res;
}

std::string load_average() {
    std::ifstream in("/proc/loadavg");
    std::string one;
    in >> one;
    return in ? one : "?";
}

}  // namespace

int main(int argc, char **argv) {
    const Args args = parse_args(argc, argv);
    const std::vector<BenchVocab> vocabs = select_vocabs(args);
    if (vocabs.empty()) {
        std::fprintf(stderr, "bench_tokenize: no vocabulary found%s\n", args.vocabs.empty() ? "" : " matching --vocab");
        return 1;
    }
    const std::vector<Corpus> corpora = gather_corpora();
    if (corpora.empty()) {
        std::fprintf(stderr, "bench_tokenize: no corpus (neither a Python standard library nor common-licenses)\n");
        return 1;
    }

    std::printf("specula %s | %s, %u cores, load average %s | 1 thread | median of %d runs after 1 warm-up | "
                "MB = 10^6 bytes\n",
                specula_version_string(), cpu_name().c_str(), std::thread::hardware_concurrency(), load_average().c_str(),
                args.reps);
    for (const Corpus &c : corpora) std::printf("- %s: %zu bytes from %s\n", c.name.c_str(), c.text.size(), c.source.c_str());
    std::printf("\n| vocab | type | corpus | tokens | bytes/token | tokenize MB/s | (CPU time) | detokenize MB/s | (CPU time) |\n");
    std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    std::fflush(stdout);

    for (const BenchVocab &v : vocabs) {
        specula_model_options opts;
        specula_model_options_init(&opts);
        opts.vocab_only = 1;  // the tokenizer is all we need (and the fixtures have no weights)
        specula_model *model = nullptr;
        specula_error *err = nullptr;
        if (specula_model_load(v.path.c_str(), &opts, &model, &err) != SPECULA_OK) {
            std::printf("| %s | %s | | cannot load: %s | | | | | |\n", v.name.c_str(), v.kind.c_str(), specula_error_message(err));
            specula_error_destroy(err);
            std::fflush(stdout);
            continue;
        }
        for (const Corpus &c : corpora) {
            try {
                const Result r = measure(model, c.text, args.reps);
                std::printf("| %s | %s | %s | %zu | %s | %s | %s | %s | %s |\n", v.name.c_str(), v.kind.c_str(), c.name.c_str(),
                            r.n_tokens, fmt(double(c.text.size()) / double(r.n_tokens)).c_str(), fmt(r.tokenize_mbps).c_str(),
                            fmt(r.tokenize_cpu_mbps).c_str(), fmt(r.detokenize_mbps).c_str(), fmt(r.detokenize_cpu_mbps).c_str());
            } catch (const std::exception &e) {
                std::printf("| %s | %s | %s | failed: %s | | | | | |\n", v.name.c_str(), v.kind.c_str(), c.name.c_str(), e.what());
            }
            std::fflush(stdout);
        }
        specula_model_destroy(model);
    }
    return 0;
}
