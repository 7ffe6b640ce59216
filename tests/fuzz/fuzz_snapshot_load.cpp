// snapshot_load: session snapshots loaded into a fresh CPU session of the bundled models/stories260K.gguf
// (n_ctx 64). Covers the snapshot container (sdk/src/snapshot/snapshot_file.cpp: header, section walk, zstd and
// stored sections, KV chunk plan and decoding) and what the session makes of the sections
// (sdk/src/session/session_snapshot.cpp: tokens, session and sampler state, drafter state, KV rows, partial
// restores).
//
// Input: a mode byte, a keep byte, then the snapshot bytes.
//   bit 0: recompute the header's and every section's XXH3 checksums before loading, so that mutations get past
//          them into the parsing behind (zstd frames keep their own content checksum, so stored sections go
//          deepest); without it the checksums themselves are fuzzed.
//   bit 1: after a successful load, generate 2 tokens (the restored cache and state are used).
//   bit 2: restore only the first `keep` tokens (keep_tokens, what prompt caches do).
//   bit 3: the session has the LongSpec draft models/drafts/stories260K.longspec.gguf attached (drafter state).
//   bit 4: the session has n-gram drafting on (drafter state).
//
// The seeds in corpus/snapshot_load were saved by the library itself: SPECULA_FUZZ_WRITE_SEEDS=<dir> makes
// LLVMFuzzerInitialize write them there and exit (see README.md).
#include "fuzz_common.h"

#include "model/model.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"

#include <xxhash.h>

#include <cstring>
#include <fstream>

using namespace specula::internal;

namespace {

std::shared_ptr<const Model> g_model;
std::shared_ptr<const LongSpecDraft> g_draft;

std::unique_ptr<Session> make_session(bool longspec, bool ngram) {
    SessionConfig config;
    config.n_ctx = 64;
    config.n_threads = 1;
    config.n_batch = 16;
    config.backend.kind = BackendKind::Cpu;
    config.backend.allow_fallback = false;
    SamplerConfig sampler;
    sampler.temperature = 0.0f;  // greedy: no seed state needed to reproduce
    auto s = std::make_unique<Session>(g_model, config, sampler);
    if (longspec || ngram) {
        SpeculativeConfig spec;
        if (longspec) spec.longspec = g_draft;
        spec.ngram = ngram;
        s->set_speculative(spec);
    }
    return s;
}

uint64_t get64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}
void put64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }

// The checksums the writer computes (snapshot_file.cpp: header hash at 120, then 40-byte section headers whose
// bytes 24..32 hash the stored bytes and 32..40 the first 32 bytes), recomputed in place.
void fix_checksums(std::vector<uint8_t> &b) {
    if (b.size() < kSnapshotHeaderBytes) return;
    put64(b.data() + kSnapshotHeaderBytes - 8, XXH3_64bits(b.data(), kSnapshotHeaderBytes - 8));
    size_t at = kSnapshotHeaderBytes;
    while (b.size() - at >= kSectionHeaderBytes) {
        const uint64_t stored = get64(b.data() + at + 16);
        if (stored > b.size() - at - kSectionHeaderBytes) break;
        put64(b.data() + at + 24, XXH3_64bits(b.data() + at + kSectionHeaderBytes, size_t(stored)));
        put64(b.data() + at + 32, XXH3_64bits(b.data() + at, 32));
        at += kSectionHeaderBytes + size_t(stored);
    }
}

std::vector<uint8_t> save(Session &s, SnapshotScope scope, int level) {
    std::vector<uint8_t> out;
    SnapshotOptions options;
    options.scope = scope;
    options.level = level;
    s.save_snapshot(options, [&](const void *p, size_t n) {
        out.insert(out.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
    });
    return out;
}

void write_seed(const std::string &dir, const std::string &name, uint8_t mode, const std::vector<uint8_t> &snapshot,
                uint8_t keep = 0) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.put(char(mode));
    out.put(char(keep));
    out.write(reinterpret_cast<const char *>(snapshot.data()), std::streamsize(snapshot.size()));
}

// The seed corpus: small sessions (a few tokens) saved in every shape the loader reads.
void write_seeds(const std::string &dir) {
    const std::vector<int32_t> prompt = g_model->vocab().tokenize("Once upon a time", true, false);
    for (int variant = 0; variant < 3; ++variant) {
        const bool longspec = variant == 1, ngram = variant == 2;
        auto s = make_session(longspec, ngram);
        s->append_tokens(prompt.data(), prompt.size());
        GenerateConfig run;
        run.max_tokens = 3;
        s->configure_run(run);
        s->begin_run();
        StepResult r;
        for (int i = 0; i < 3 && r.stop == SPECULA_STOP_NONE; ++i) s->step(r);
        const std::string tag = longspec ? "longspec" : ngram ? "ngram" : "plain";
        const uint8_t spec_bit = longspec ? 8 : ngram ? 16 : 0;
        write_seed(dir, tag + "-full-stored", uint8_t(1 | 2 | spec_bit), save(*s, SnapshotScope::Full, 0));
        write_seed(dir, tag + "-full-zstd", uint8_t(1 | spec_bit), save(*s, SnapshotScope::Full, 1));
        if (variant == 0) {
            write_seed(dir, "plain-context-stored", uint8_t(1 | 4), save(*s, SnapshotScope::Context, 0), 3);
            write_seed(dir, "plain-context-zstd", uint8_t(0), save(*s, SnapshotScope::Context, 3));
            auto empty = make_session(false, false);
            write_seed(dir, "empty-full-stored", uint8_t(1), save(*empty, SnapshotScope::Full, 0));
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const std::string model = fuzz::require_file(fuzz::source_dir() / "models" / "stories260K.gguf", "snapshot_load's model");
    const std::string draft = fuzz::require_file(fuzz::source_dir() / "models" / "drafts" / "stories260K.longspec.gguf",
                                                 "snapshot_load's draft");
    g_model = Model::load(model, LoadOptions{});
    g_draft = LongSpecDraft::load(draft, g_model);
    if (const char *dir = std::getenv("SPECULA_FUZZ_WRITE_SEEDS")) {
        write_seeds(dir);
        std::printf("snapshot_load: seeds written to %s\n", dir);
        std::exit(0);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const uint8_t mode = data[0];
    std::vector<uint8_t> bytes(data + 2, data + size);
    if (mode & 1) fix_checksums(bytes);
    auto session = make_session((mode & 8) != 0, (mode & 16) != 0);
    try {
        const int32_t keep = (mode & 4) ? int32_t(data[1]) : -1;
        const int32_t restored = session->load_snapshot(bytes, keep);
        FUZZ_CHECK(restored >= 0 && restored <= session->n_ctx());
        FUZZ_CHECK(int32_t(session->tokens().size()) <= session->n_ctx());
        if (mode & 2) {
            GenerateConfig run;
            run.max_tokens = 2;
            session->configure_run(run);
            session->begin_run();
            StepResult r;
            for (int i = 0; i < 2 && r.stop == SPECULA_STOP_NONE; ++i) session->step(r);
        }
    } catch (const Error &e) {
        fuzz::expected_error(e);
    }
    return 0;
}
