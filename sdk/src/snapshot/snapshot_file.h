// The snapshot container: how a session's state is laid out in a file or buffer, compressed and checked. What the
// sections hold is the session's business (session/session_snapshot.cpp); this file knows bytes, frames and
// key/value rows.
//
//   header   128 bytes: magic "SPECSNAP", format version, the target model's and the draft's fingerprints, the
//            options that change numerics (KV element type, n_ctx), sizes (n_tokens, KV slots, layers, row
//            width, vocabulary, chunk rows), the backend that saved it; XXH3-64 of all of it at the end.
//   sections TOKS (the context's token ids, first: a prompt cache reads just header and tokens), then the session's
//            own sections, each: a 40-byte section header (tag, codec, raw size, stored size, XXH3-64 of the stored bytes,
//            XXH3-64 of the section header) and the stored bytes: a zstd frame with its content checksum, or the
//            raw bytes (codec "stored", for forks and data zstd cannot shrink).
//   END      a last empty section: a file cut at a section boundary is still seen as truncated.
//
// Key/value rows travel in KV chunk sections of at most `chunk_slots` slots of one (cache, layer, K or V): saving
// and loading them run on the session's thread pool, a chunk per task, and stream (memory bounded by a batch of
// chunks, not the cache). Rows are byte-shuffled before zstd (all first bytes of the batch's elements, then all
// second bytes, ...): sign/exponent bytes then sit together and compress, mantissa bytes stay what they are. The
// chunks come in one fixed order (cache, layer, K then V, slots ascending), so a reader knows which chunk is
// which before decompressing it, and a missing, repeated or reordered chunk is an error.
//
// Every check that can fail on hostile input throws Error(FORMAT) (damaged, truncated) or Error(UNSUPPORTED) (a
// format version this library does not read), with a message naming the place.
#pragma once

#include "backend/kv_type.h"
#include "model/fingerprint.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace specula::internal {

class ThreadPool;

constexpr uint32_t kSnapshotFormatVersion = 1;
constexpr size_t kSnapshotHeaderBytes = 128;
constexpr size_t kSectionHeaderBytes = 40;
constexpr size_t kKvChunkHeaderBytes = 24;  // inside a KV chunk's raw bytes, before its rows

// Section tags (four ASCII letters read little-endian).
constexpr uint32_t section_tag(const char (&s)[5]) {
    return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 | uint32_t(uint8_t(s[3])) << 24;
}
constexpr uint32_t kTagTokens = section_tag("TOKS");
constexpr uint32_t kTagSession = section_tag("SESS");
constexpr uint32_t kTagSampler = section_tag("SAMP");
constexpr uint32_t kTagSpeculative = section_tag("SPEC");
constexpr uint32_t kTagKvChunk = section_tag("KVCH");
constexpr uint32_t kTagEnd = section_tag("END.");

enum class SnapshotScope : uint32_t {
    Full = 0,     // everything: a loaded session continues exactly as the saved one would have
    Context = 1,  // the context only (tokens, target KV, last logits): what prompt caches keep
};

struct SnapshotHeader {
    uint32_t version = kSnapshotFormatVersion;
    Fingerprint model;      // the target model's file
    Fingerprint draft;      // the LongSpec draft's or the draft model's file; empty without drafter state
    KvType kv_type = KvType::F32;
    SnapshotScope scope = SnapshotScope::Full;
    int32_t n_ctx = 0;      // of the session that saved it
    int32_t n_tokens = 0;   // context tokens
    int32_t n_kv = 0;       // target KV slots saved ([0, n_kv))
    int32_t n_layer = 0, n_embd_kv = 0, n_vocab = 0;
    int32_t chunk_slots = 0;  // slots per KV chunk
    uint32_t flags = 0;
    std::string backend;    // "cpu", "cuda", "vulkan" (at most 31 bytes)

    static constexpr uint32_t kFlagDrafterState = 1;  // the SPEC section carries drafter state
};

// Where a KV chunk's rows go, in the chunk order above. cache 0 is the target's; 1 a draft model's own cache.
struct KvChunkId {
    uint32_t cache = 0, layer = 0, kind = 0;  // kind 0: K, 1: V
    int32_t first = 0, count = 0;             // slots [first, first + count)
    bool operator==(const KvChunkId &) const = default;
};
// The chunks of a cache of n_layer layers whose slots [0, n_slots) are saved, in file order.
std::vector<KvChunkId> kv_chunk_plan(uint32_t cache, int32_t n_layer, int32_t n_slots, int32_t chunk_slots);
// Slots per chunk for rows of row_bytes: about 256 KiB of raw rows per chunk.
int32_t kv_chunk_slots_for(size_t row_bytes);

// A KV cache as the writer reads it / the reader fills it: rows of `row_width` elements of `type`.
struct KvRows {
    KvType type = KvType::F32;
    int32_t row_width = 0;
    // Copies chunk.count rows of (layer, kind) starting at slot chunk.first to/from a dense buffer.
    std::function<void(const KvChunkId &chunk, void *dst)> read;
    std::function<void(const KvChunkId &chunk, const void *src)> write;
};

class SnapshotWriter {
public:
    using Sink = std::function<void(const void *data, size_t n)>;
    // level: zstd level (1..19, negative = faster); 0 = store uncompressed (forks).
    SnapshotWriter(Sink sink, int level, ThreadPool &pool);
    ~SnapshotWriter();

    void write_header(const SnapshotHeader &header);
    void write_section(uint32_t tag, std::span<const uint8_t> raw);
    // Writes the chunk sections of `plan` (from kv_chunk_plan), reading rows through rows.read on this thread
    // and compressing a batch of chunks at a time on the pool.
    void write_kv(const std::vector<KvChunkId> &plan, const KvRows &rows);
    void write_end();
    // Byte-shuffle KV rows before compressing them (the default); off only to measure what shuffling gains.
    void set_shuffle(bool on) { shuffle_ = on; }
    uint64_t bytes_written() const { return written_; }
    uint64_t kv_raw_bytes() const { return kv_raw_; }

private:
    struct Impl;
    void emit(uint32_t tag, uint32_t codec, uint64_t raw_size, std::span<const uint8_t> stored);
    Sink sink_;
    int level_;
    ThreadPool &pool_;
    uint64_t written_ = 0, kv_raw_ = 0;
    bool shuffle_ = true;
    Impl *impl_;
};

// A section as found in the bytes (hashes already checked).
struct SectionView {
    uint32_t tag = 0;
    uint32_t codec = 0;  // 0 stored, 1 zstd
    uint64_t raw_size = 0;
    std::span<const uint8_t> stored;
    size_t offset = 0;  // of the section header in the snapshot, for messages
};

struct ParsedSnapshot {
    SnapshotHeader header;
    std::vector<SectionView> sections;  // in file order, END not included
};

// Parses the header and walks every section, checking the header's and each section's hashes, sizes and the END
// marker. Throws Error(FORMAT) (not a snapshot, damaged, truncated) or Error(UNSUPPORTED) (another format version).
ParsedSnapshot parse_snapshot(std::span<const uint8_t> bytes);
// Reads only the header (for tools and caches that list snapshots). Same errors.
SnapshotHeader parse_snapshot_header(std::span<const uint8_t> bytes);
// The section whose header starts at byte `at` (hashes checked; Error(FORMAT) when damaged or cut short).
SectionView parse_section_at(std::span<const uint8_t> bytes, size_t at);
// The TOKS section's token ids: Error(FORMAT) unless it holds exactly n_tokens ids in [0, n_vocab).
std::vector<int32_t> decode_tokens(const SectionView &section, int32_t n_tokens, int32_t n_vocab);
// The section's raw bytes: decompressed (zstd content checksum checked) or copied. raw_size must be <= max_raw.
std::vector<uint8_t> decode_section(const SectionView &section, uint64_t max_raw, const char *what);

// Decodes the KV chunks of `plan`, which must be exactly `chunks` (the file's KVCH sections of that cache, in
// order): pass `sink == nullptr` to only check them (decompress, compare ids and sizes; keeps the decoded rows in
// `staged` while their total stays within stage_budget bytes), or a sink to write them (from `staged` when
// present, else decoding again). Only slots below limit_slots are wanted: chunks starting at or beyond it are
// neither decompressed nor written (a partial restore), a chunk crossing it is written up to it. Runs a batch of
// chunks at a time on the pool; throws Error(FORMAT) naming the first bad chunk.
struct StagedKv {
    std::vector<std::vector<uint8_t>> rows;  // per chunk, when kept
    bool complete = false;
};
void read_kv_chunks(std::span<const SectionView> chunks, const std::vector<KvChunkId> &plan, KvType type, int32_t row_width,
                    ThreadPool &pool, const KvRows *sink, int32_t limit_slots, size_t stage_budget, StagedKv &staged);

}  // namespace specula::internal
