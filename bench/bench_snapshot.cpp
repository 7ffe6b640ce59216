// bench_snapshot: what session snapshots cost and save, measured in one run.
//
//   build/bin/bench_snapshot [--model M] [--context 4096] [--reps 3] [--threads 2] [--dir /tmp]
//
// The context is real code: held-out Python files of code-7m's corpus (json/, email/, asyncio/ of the Python on
// PATH, each file after a BOS, as code-7m was trained) up to --context tokens; stories text for a model without
// corpus.json beside it. The session evaluates it once (the re-evaluation cost), then:
//   sizes    the snapshot against the raw bytes of the KV rows it holds, per zstd level, with and without the
//            byte shuffle. The CPU cache is F32; the F16 rows are the same keys and values rounded to F16 (what the
//            CUDA backend keeps) written through the same chunk codec.
//   speed    save to and load from memory and a file: MB/s of raw KV rows (best of --reps).
//   resume   loading the file into a new session and producing the next token, against evaluating the context
//            again and producing it: the point of snapshots.
// Every resumed session is checked to give the same next 16 tokens as the original (greedy).
#include "formats/half.h"
#include "common/session_run.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "machine_files.h"
#include "model/model.h"
#include "session/session.h"
#include "snapshot/snapshot_file.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

using namespace specula::internal;
namespace fs = std::filesystem;

namespace {

struct Args {
    std::string model;
    int32_t context = 4096;
    int reps = 3;
    int threads = 2;
    std::string dir = fs::temp_directory_path().string();
};

std::string read_text(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// Held-out code files after BOS each, or stories text repeated, until n tokens.
std::vector<int32_t> context_tokens(const Model &model, const fs::path &model_path, int32_t n, std::string &source) {
    std::vector<int32_t> out;
    const int32_t bos = model.vocab().bos();
    if (fs::exists(model_path.parent_path() / "corpus.json")) {
        const fs::path stdlib = specula_apps::python3_sysconfig_stdlib_dir();
        for (const char *folder : {"json", "email", "asyncio"}) {
            for (const fs::path &f : specula_apps::sorted_files(stdlib / folder, ".py", {"test", "tests", "__pycache__"})) {
                if (int32_t(out.size()) >= n) break;
                std::vector<int32_t> ids;
                try {
                    ids = model.vocab().tokenize(read_text(f), false, false);
                } catch (const std::exception &) {
                    continue;
                }
                if (bos >= 0) out.push_back(bos);
                out.insert(out.end(), ids.begin(), ids.end());
            }
        }
        source = "held-out Python files under " + stdlib.string();
    }
    if (out.empty()) {
        const std::vector<int32_t> ids = model.vocab().tokenize(
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. ", false, false);
        if (bos >= 0) out.push_back(bos);
        while (int32_t(out.size()) < n) out.insert(out.end(), ids.begin(), ids.end());
        source = "a stories sentence, repeated";
    }
    out.resize(size_t(n));
    return out;
}

std::unique_ptr<Session> new_session(const std::shared_ptr<const Model> &model, const Args &a) {
    SessionConfig c;
    c.n_ctx = a.context + 64;
    c.n_threads = a.threads;
    c.backend.kind = BackendKind::Cpu;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    return std::make_unique<Session>(model, c, greedy);
}

std::vector<uint8_t> save_memory(Session &s, SnapshotScope scope, int level) {
    std::vector<uint8_t> bytes;
    SnapshotOptions o;
    o.scope = scope;
    o.level = level;
    s.save_snapshot(o, [&](const void *p, size_t n) { bytes.insert(bytes.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n); });
    return bytes;
}

// The KV rows of the session's cache written through the snapshot's chunk codec as `type` (F16: rounded).
uint64_t codec_bytes(Session &s, const Model &model, KvType type, int level, bool shuffle, uint64_t &raw) {
    const HParams &hp = model.hparams();
    const int32_t n_kv = s.n_evaluated(), width = hp.n_embd_kv();
    std::vector<float> rows32;
    KvRows rows;
    rows.type = type;
    rows.row_width = width;
    rows.read = [&](const KvChunkId &c, void *dst) {
        rows32.resize(size_t(c.count) * size_t(width));
        s.runner().read_kv(int32_t(c.layer), KvPart(c.kind), c.first, c.count, rows32.data());
        if (type == KvType::F32) {
            std::memcpy(dst, rows32.data(), rows32.size() * 4);
        } else {
            uint16_t *h = static_cast<uint16_t *>(dst);
            for (size_t i = 0; i < rows32.size(); ++i) h[i] = float_to_half(rows32[i]);
        }
    };
    uint64_t bytes = 0;
    SnapshotWriter w([&](const void *, size_t n) { bytes += n; }, level, s.pool());
    w.set_shuffle(shuffle);
    w.write_kv(kv_chunk_plan(0, hp.n_layer, n_kv, kv_chunk_slots_for(size_t(width) * kv_type_size(type))), rows);
    raw = w.kv_raw_bytes();
    return bytes;
}

}  // namespace

int main(int argc, char **argv) {
    Args a;
    CLI::App app{"bench_snapshot: snapshot size, save/load speed and resume time against re-evaluation"};
    app.add_option("--model", a.model, "GGUF model (default: code-7m from the shared fixtures, else the bundled stories260K)");
    app.add_option("--context", a.context, "context tokens")->capture_default_str()->check(CLI::Range(16, 1 << 20));
    app.add_option("--reps", a.reps, "repetitions (the best is reported)")->capture_default_str()->check(CLI::Range(1, 100));
    app.add_option("--threads", a.threads, "threads")->capture_default_str()->check(CLI::Range(1, 256));
    app.add_option("--dir", a.dir, "where snapshot files are written")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    if (a.model.empty()) {
        const fs::path code = fs::path(SPECULA_FIXTURES_DIR) / "models/code-7m/model.gguf";
        a.model = fs::exists(code) ? code.string() : SPECULA_DEFAULT_MODEL;
    }
    const auto model = Model::load(a.model, LoadOptions{});
    std::string source;
    const std::vector<int32_t> ctx = context_tokens(*model, a.model, a.context, source);
    const HParams &hp = model->hparams();
    std::printf("model %s: %d layers, n_embd_kv %d, vocab %d; %d threads\n", a.model.c_str(), hp.n_layer, hp.n_embd_kv(), hp.n_vocab, a.threads);
    std::printf("context: %d tokens of %s\n\n", a.context, source.c_str());

    // The original: evaluate the context (the cost a snapshot saves), remember what follows.
    std::unique_ptr<Session> original;
    double eval_ms = 1e30;
    std::vector<int32_t> expected;
    for (int r = 0; r < a.reps; ++r) {
        auto s = new_session(model, a);
        s->append_tokens(ctx.data(), ctx.size());
        const double t0 = now_ms();
        const std::vector<int32_t> first = test_sessions::generate_more(*s, 1);
        eval_ms = std::min(eval_ms, now_ms() - t0);
        if (r == 0) {
            expected = first;
            const std::vector<int32_t> more = test_sessions::generate_more(*s, 15);
            expected.insert(expected.end(), more.begin(), more.end());
            original = std::move(s);
        }
    }
    // The snapshot is taken right after the context was evaluated and its first token produced; rewinding to the
    // context keeps those keys/values (only the last token is evaluated again for its logits).
    original->rewind(a.context);
    const uint64_t kv_raw = uint64_t(hp.n_layer) * 2 * uint64_t(original->n_evaluated()) * uint64_t(hp.n_embd_kv()) * 4;
    std::printf("re-evaluating the context and producing the next token: %.1f ms (%.0f tok/s)\n", eval_ms, 1000.0 * a.context / eval_ms);
    std::printf("KV rows of %d evaluated tokens: %.2f MB as F32 (%.2f MB as F16)\n\n", original->n_evaluated(), kv_raw / 1e6, kv_raw / 2e6);

    std::printf("%-26s %-5s %12s %12s %9s\n", "snapshot (KV rows only)", "zstd", "raw MB", "stored MB", "ratio");
    for (const KvType type : {KvType::F32, KvType::F16})
        for (const int level : {1, 3, 9})
            for (const bool shuffle : {true, false}) {
                uint64_t raw = 0;
                const uint64_t stored = codec_bytes(*original, *model, type, level, shuffle, raw);
                std::printf("%-26s %-5d %12.3f %12.3f %8.1f%%\n",
                            (std::string(kv_type_name(type)) + (shuffle ? ", shuffled" : ", plain")).c_str(), level, raw / 1e6, stored / 1e6,
                            100.0 * double(stored) / double(raw));
            }

    std::printf("\n%-30s %12s %12s %12s %10s %10s\n", "whole snapshot (F32 cache)", "bytes", "of raw KV", "save MB/s", "load MB/s", "load ms");
    const fs::path file = fs::path(a.dir) / ("bench_snapshot_" + std::to_string(::getpid()) + ".snap");
    struct Case {
        const char *name;
        int level;
        bool to_file;
    };
    double resume_ms = 1e30;
    for (const Case c : {Case{"memory, stored (fork)", 0, false}, Case{"memory, zstd 1", 1, false}, Case{"memory, zstd 3", 3, false},
                         Case{"file, zstd 1", 1, true}}) {
        double save_ms = 1e30, load_ms = 1e30;
        std::vector<uint8_t> bytes;
        for (int r = 0; r < a.reps; ++r) {
            const double t0 = now_ms();
            if (c.to_file) {
                std::FILE *f = std::fopen(file.c_str(), "wb");
                if (f == nullptr) {
                    std::fprintf(stderr, "cannot write %s\n", file.c_str());
                    return 1;
                }
                SnapshotOptions o;
                o.level = c.level;
                original->save_snapshot(o, [&](const void *p, size_t n) { std::fwrite(p, 1, n, f); });
                std::fclose(f);
            } else {
                bytes = save_memory(*original, SnapshotScope::Full, c.level);
            }
            save_ms = std::min(save_ms, now_ms() - t0);
        }
        if (c.to_file) bytes.resize(size_t(fs::file_size(file)));
        for (int r = 0; r < a.reps; ++r) {
            auto s = new_session(model, a);
            s->model().fingerprint(&s->pool());  // computed once per model in any real use
            const double t0 = now_ms();
            if (c.to_file) {
                std::ifstream in(file, std::ios::binary);
                std::vector<uint8_t> read(size_t(fs::file_size(file)));
                in.read(reinterpret_cast<char *>(read.data()), std::streamsize(read.size()));
                s->load_snapshot(read);
            } else {
                s->load_snapshot(bytes);
            }
            const double t_load = now_ms() - t0;
            load_ms = std::min(load_ms, t_load);
            const std::vector<int32_t> got = test_sessions::generate_more(*s, 16);
            if (c.to_file) resume_ms = std::min(resume_ms, now_ms() - t0 - 0.0);
            if (got != expected) {
                std::fprintf(stderr, "MISMATCH: the resumed session (%s) continues differently\n", c.name);
                return 1;
            }
        }
        std::printf("%-30s %12zu %11.1f%% %12.0f %10.0f %10.2f\n", c.name, bytes.size(), 100.0 * double(bytes.size()) / double(kv_raw),
                    kv_raw / 1e3 / save_ms, kv_raw / 1e3 / load_ms, load_ms);
    }
    std::error_code ec;
    fs::remove(file, ec);

    // Resume = read + check + load the file, then the next 16 tokens; against evaluating the context + 16 tokens.
    auto fresh = new_session(model, a);
    fresh->append_tokens(ctx.data(), ctx.size());
    const double t0 = now_ms();
    test_sessions::generate_more(*fresh, 16);
    const double reeval_ms = now_ms() - t0;
    std::printf("\nresume from the file and produce 16 tokens: %.1f ms; evaluate the context and produce 16 tokens: %.1f ms: %.1fx faster\n",
                resume_ms, reeval_ms, reeval_ms / resume_ms);
    std::printf("every resumed session produced the original's next 16 tokens\n");
    return 0;
}
