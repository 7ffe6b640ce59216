#include "snapshot/snapshot_file.h"

#include "core/thread_pool.h"
#include "core/error.h"
#include "core/byte_stream.h"

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>

namespace specula::internal {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'E', 'C', 'S', 'N', 'A', 'P'};
constexpr uint32_t kCodecStored = 0, kCodecZstd = 1;
constexpr uint32_t kEncodingPlain = 0, kEncodingShuffled = 1;
constexpr size_t kChunkHeaderBytes = kKvChunkHeaderBytes;

uint64_t hash64(const void *data, size_t n) { return XXH3_64bits(data, n); }

std::string tag_name(uint32_t tag) {
    std::string s;
    for (int i = 0; i < 4; ++i) {
        const char c = char((tag >> (8 * i)) & 0xff);
        s += (c >= 32 && c < 127) ? c : '?';
    }
    return s;
}

// Byte planes: out[b * n + i] = in[i * size + b] (and back). Zstd then sees runs of similar exponent bytes. One
// sequential pass over the elements with `size` output streams (the compiler vectorises the fixed sizes).
template <size_t Size> void shuffle_fixed(const uint8_t *in, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; ++i)
        for (size_t b = 0; b < Size; ++b) out[b * n + i] = in[i * Size + b];
}
template <size_t Size> void unshuffle_fixed(const uint8_t *in, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; ++i)
        for (size_t b = 0; b < Size; ++b) out[i * Size + b] = in[b * n + i];
}
void shuffle(const uint8_t *in, uint8_t *out, size_t n, size_t size) {
    if (size == 4) return shuffle_fixed<4>(in, out, n);
    if (size == 2) return shuffle_fixed<2>(in, out, n);
    for (size_t b = 0; b < size; ++b)
        for (size_t i = 0; i < n; ++i) out[b * n + i] = in[i * size + b];
}
void unshuffle(const uint8_t *in, uint8_t *out, size_t n, size_t size) {
    if (size == 4) return unshuffle_fixed<4>(in, out, n);
    if (size == 2) return unshuffle_fixed<2>(in, out, n);
    for (size_t b = 0; b < size; ++b)
        for (size_t i = 0; i < n; ++i) out[i * size + b] = in[b * n + i];
}

// Runs fn(i, thread) for i in [0, n) on the pool, then rethrows the first exception a task raised (pool tasks
// must not throw: each is caught and kept).
template <class Fn> void run_tasks(ThreadPool &pool, int64_t n, Fn &&fn) {
    std::mutex mutex;
    std::exception_ptr first;
    int64_t first_index = -1;
    pool.run(n, [&](int64_t i, int thread) {
        try {
            fn(i, thread);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            if (first_index < 0 || i < first_index) {
                first = std::current_exception();
                first_index = i;
            }
        }
    });
    if (first) std::rethrow_exception(first);
}

// c may come from a damaged file (the id a chunk claims): the end is summed in 64 bits, since first + count can
// overflow int32 (found by fuzzing: tests/fuzz/regressions/snapshot_load/chunk-id-end-int-overflow).
std::string chunk_name(const KvChunkId &c) {
    return std::string(c.cache == 0 ? "target" : "draft model") + " KV layer " + std::to_string(c.layer) + (c.kind == 0 ? " K" : " V") +
           " slots [" + std::to_string(c.first) + ", " + std::to_string(int64_t(c.first) + c.count) + ")";
}

}  // namespace

std::vector<KvChunkId> kv_chunk_plan(uint32_t cache, int32_t n_layer, int32_t n_slots, int32_t chunk_slots) {
    std::vector<KvChunkId> plan;
    if (n_slots <= 0) return plan;
    for (int32_t layer = 0; layer < n_layer; ++layer)
        for (uint32_t kind = 0; kind < 2; ++kind)
            for (int32_t first = 0; first < n_slots; first += chunk_slots)
                plan.push_back({cache, uint32_t(layer), kind, first, std::min(chunk_slots, n_slots - first)});
    return plan;
}

int32_t kv_chunk_slots_for(size_t row_bytes) {
    constexpr size_t kTarget = size_t(256) << 10;
    return int32_t(std::clamp<size_t>(kTarget / std::max<size_t>(row_bytes, 1), 1, 1 << 16));
}

// ---- writing -----------------------------------------------------------------------------------------------

struct SnapshotWriter::Impl {
    std::vector<ZSTD_CCtx *> contexts;  // one per pool thread
    ~Impl() {
        for (ZSTD_CCtx *c : contexts) ZSTD_freeCCtx(c);
    }
    ZSTD_CCtx *context(int thread, int level) {
        ZSTD_CCtx *&c = contexts[size_t(thread)];
        if (c == nullptr) {
            c = ZSTD_createCCtx();
            if (c == nullptr) throw std::bad_alloc();
            ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
            ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
        }
        return c;
    }
    // Compresses raw into out (zstd codec), or leaves out empty when zstd does not make it smaller.
    void compress(int thread, int level, std::span<const uint8_t> raw, std::vector<uint8_t> &out) {
        out.resize(ZSTD_compressBound(raw.size()));
        const size_t n = ZSTD_compress2(context(thread, level), out.data(), out.size(), raw.data(), raw.size());
        // zstd's own allocations (malloc) failing is OUT_OF_MEMORY, not a bug (INTERNAL).
        if (ZSTD_isError(n) && ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation) throw std::bad_alloc();
        require(!ZSTD_isError(n), SPECULA_ERR_INTERNAL, std::string("snapshot: zstd compression failed: ") + ZSTD_getErrorName(n));
        if (n >= raw.size()) {
            out.clear();
            return;
        }
        out.resize(n);
    }
};

SnapshotWriter::SnapshotWriter(Sink sink, int level, ThreadPool &pool) : sink_(std::move(sink)), level_(level), pool_(pool), impl_(new Impl) {
    // A constructor that throws runs no destructor: impl_ leaked when this assign threw (found by tests/alloc).
    try {
        impl_->contexts.assign(size_t(pool.size()), nullptr);
    } catch (...) {
        delete impl_;
        throw;
    }
}

SnapshotWriter::~SnapshotWriter() { delete impl_; }

void SnapshotWriter::write_header(const SnapshotHeader &h) {
    ByteWriter w;
    w.put_raw(kMagic, sizeof kMagic);
    w.put<uint32_t>(h.version);
    w.put<uint32_t>(uint32_t(kSnapshotHeaderBytes));
    w.put_raw(h.model.bytes.data(), 16);
    w.put_raw(h.draft.bytes.data(), 16);
    w.put<uint32_t>(uint32_t(h.kv_type));
    w.put<uint32_t>(uint32_t(h.scope));
    w.put<int32_t>(h.n_ctx);
    w.put<int32_t>(h.n_tokens);
    w.put<int32_t>(h.n_kv);
    w.put<int32_t>(h.n_layer);
    w.put<int32_t>(h.n_embd_kv);
    w.put<int32_t>(h.n_vocab);
    w.put<int32_t>(h.chunk_slots);
    w.put<uint32_t>(h.flags);
    char backend[32] = {};
    std::memcpy(backend, h.backend.data(), std::min<size_t>(h.backend.size(), 31));
    w.put_raw(backend, sizeof backend);
    require(w.bytes().size() == kSnapshotHeaderBytes - 8, SPECULA_ERR_INTERNAL, "snapshot: header layout");
    w.put<uint64_t>(hash64(w.bytes().data(), w.bytes().size()));
    sink_(w.bytes().data(), w.bytes().size());
    written_ += w.bytes().size();
}

void SnapshotWriter::emit(uint32_t tag, uint32_t codec, uint64_t raw_size, std::span<const uint8_t> stored) {
    ByteWriter w;
    w.put<uint32_t>(tag);
    w.put<uint32_t>(codec);
    w.put<uint64_t>(raw_size);
    w.put<uint64_t>(stored.size());
    w.put<uint64_t>(hash64(stored.data(), stored.size()));
    w.put<uint64_t>(hash64(w.bytes().data(), w.bytes().size()));
    sink_(w.bytes().data(), w.bytes().size());
    if (!stored.empty()) sink_(stored.data(), stored.size());
    written_ += w.bytes().size() + stored.size();
}

void SnapshotWriter::write_section(uint32_t tag, std::span<const uint8_t> raw) {
    std::vector<uint8_t> packed;
    if (level_ != 0) impl_->compress(0, level_, raw, packed);
    if (packed.empty())
        emit(tag, kCodecStored, raw.size(), raw);
    else
        emit(tag, kCodecZstd, raw.size(), packed);
}

void SnapshotWriter::write_kv(const std::vector<KvChunkId> &plan, const KvRows &rows) {
    const size_t esize = kv_type_size(rows.type), row_bytes = kv_row_bytes(rows.type, rows.row_width);
    // Uncompressed (forks) rows stay as they are and are read straight behind their chunk header: shuffling only
    // helps zstd.
    const bool shuffled = shuffle_ && level_ != 0;
    const size_t batch = size_t(2 * pool_.size());
    std::vector<std::vector<uint8_t>> raw(batch), encoded(batch), packed(batch);
    for (size_t start = 0; start < plan.size(); start += batch) {
        const size_t nb = std::min(batch, plan.size() - start);
        for (size_t j = 0; j < nb; ++j) {  // reads stay on this thread: a GPU backend copies through its stream
            const KvChunkId &c = plan[start + j];
            const size_t bytes = size_t(c.count) * row_bytes;
            encoded[j].resize(kChunkHeaderBytes + bytes);
            const uint32_t head[6] = {c.cache, c.layer, c.kind, uint32_t(c.first), uint32_t(c.count), shuffled ? kEncodingShuffled : kEncodingPlain};
            std::memcpy(encoded[j].data(), head, sizeof head);
            if (shuffled) raw[j].resize(bytes);
            rows.read(c, shuffled ? raw[j].data() : encoded[j].data() + kChunkHeaderBytes);
            kv_raw_ += bytes;
        }
        run_tasks(pool_, int64_t(nb), [&](int64_t task, int thread) {
            const size_t j = size_t(task);
            if (shuffled) shuffle(raw[j].data(), encoded[j].data() + kChunkHeaderBytes, raw[j].size() / esize, esize);
            packed[j].clear();
            if (level_ != 0) impl_->compress(thread, level_, encoded[j], packed[j]);
        });
        for (size_t j = 0; j < nb; ++j) {
            if (packed[j].empty())
                emit(kTagKvChunk, kCodecStored, encoded[j].size(), encoded[j]);
            else
                emit(kTagKvChunk, kCodecZstd, encoded[j].size(), packed[j]);
        }
    }
}

void SnapshotWriter::write_end() { emit(kTagEnd, kCodecStored, 0, {}); }

// ---- reading -----------------------------------------------------------------------------------------------

SnapshotHeader parse_snapshot_header(std::span<const uint8_t> bytes) {
    require(bytes.size() >= 16 && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0, SPECULA_ERR_FORMAT,
            "snapshot: not a Specula snapshot (no SPECSNAP magic)");
    ByteReader r(bytes, "snapshot header");
    r.take(8);
    const uint32_t version = r.get<uint32_t>();
    const uint32_t header_size = r.get<uint32_t>();
    require(header_size >= 24 && header_size <= 65536 && header_size <= bytes.size(), SPECULA_ERR_FORMAT,
            "snapshot: the header size " + std::to_string(header_size) + " is damaged or the file is truncated (" + std::to_string(bytes.size()) + " bytes)");
    uint64_t stored_hash;
    std::memcpy(&stored_hash, bytes.data() + header_size - 8, 8);
    require(hash64(bytes.data(), header_size - 8) == stored_hash, SPECULA_ERR_FORMAT, "snapshot: the header is damaged (checksum mismatch)");
    require(version == kSnapshotFormatVersion, SPECULA_ERR_UNSUPPORTED,
            "snapshot: format version " + std::to_string(version) + "; this library reads version " + std::to_string(kSnapshotFormatVersion));
    require(header_size == kSnapshotHeaderBytes, SPECULA_ERR_FORMAT, "snapshot: a version 1 header must be 128 bytes");

    SnapshotHeader h;
    h.version = version;
    std::memcpy(h.model.bytes.data(), r.take(16), 16);
    std::memcpy(h.draft.bytes.data(), r.take(16), 16);
    const uint32_t kv_type = r.get<uint32_t>(), scope = r.get<uint32_t>();
    r.check(kv_type_valid(kv_type), "unknown KV element type " + std::to_string(kv_type));
    r.check(scope <= 1, "unknown scope " + std::to_string(scope));
    h.kv_type = KvType(kv_type);
    h.scope = SnapshotScope(scope);
    h.n_ctx = r.get<int32_t>();
    h.n_tokens = r.get<int32_t>();
    h.n_kv = r.get<int32_t>();
    h.n_layer = r.get<int32_t>();
    h.n_embd_kv = r.get<int32_t>();
    h.n_vocab = r.get<int32_t>();
    h.chunk_slots = r.get<int32_t>();
    h.flags = r.get<uint32_t>();
    const char *backend = reinterpret_cast<const char *>(r.take(32));
    r.check(std::memchr(backend, 0, 32) != nullptr, "the backend name is not terminated");
    h.backend = backend;
    r.check(h.n_ctx > 0 && h.n_ctx <= (1 << 22), "n_ctx " + std::to_string(h.n_ctx) + " is out of range");
    r.check(h.n_tokens >= 0 && h.n_tokens <= h.n_ctx, "n_tokens " + std::to_string(h.n_tokens) + " is outside [0, n_ctx]");
    r.check(h.n_kv >= 0 && h.n_kv <= h.n_ctx, "n_kv " + std::to_string(h.n_kv) + " is outside [0, n_ctx]");
    r.check(h.n_layer > 0 && h.n_layer <= 4096 && h.n_embd_kv > 0 && h.n_embd_kv <= (1 << 20) && h.n_vocab > 0 && h.n_vocab <= (1 << 24),
            "model sizes out of range");
    r.check(h.chunk_slots > 0 && h.chunk_slots <= (1 << 16), "chunk size " + std::to_string(h.chunk_slots) + " is out of range");
    r.check((h.flags & ~SnapshotHeader::kFlagDrafterState) == 0, "unknown flags " + std::to_string(h.flags));
    return h;
}

SectionView parse_section_at(std::span<const uint8_t> bytes, size_t at) {
    require(at <= bytes.size() && bytes.size() - at >= kSectionHeaderBytes, SPECULA_ERR_FORMAT,
            "snapshot: truncated at byte " + std::to_string(at) + " of " + std::to_string(bytes.size()) + " (no END section)");
    ByteReader r(bytes.subspan(at, kSectionHeaderBytes), "snapshot section at byte " + std::to_string(at));
    SectionView s;
    s.offset = at;
    s.tag = r.get<uint32_t>();
    s.codec = r.get<uint32_t>();
    s.raw_size = r.get<uint64_t>();
    const uint64_t stored_size = r.get<uint64_t>();
    const uint64_t data_hash = r.get<uint64_t>();
    const uint64_t header_hash = r.get<uint64_t>();
    require(hash64(bytes.data() + at, 32) == header_hash, SPECULA_ERR_FORMAT,
            "snapshot: the section header at byte " + std::to_string(at) + " is damaged (checksum mismatch)");
    at += kSectionHeaderBytes;
    require(stored_size <= bytes.size() - at, SPECULA_ERR_FORMAT,
            "snapshot: truncated: the " + tag_name(s.tag) + " section at byte " + std::to_string(s.offset) + " needs " + std::to_string(stored_size) +
                " bytes, " + std::to_string(bytes.size() - at) + " are left");
    s.stored = bytes.subspan(at, size_t(stored_size));
    require(hash64(s.stored.data(), s.stored.size()) == data_hash, SPECULA_ERR_FORMAT,
            "snapshot: the " + tag_name(s.tag) + " section at byte " + std::to_string(s.offset) + " is damaged (checksum mismatch)");
    r.check(s.codec == kCodecStored || s.codec == kCodecZstd, "unknown codec " + std::to_string(s.codec));
    r.check(s.codec != kCodecStored || s.raw_size == stored_size, "a stored section's sizes differ");
    return s;
}

ParsedSnapshot parse_snapshot(std::span<const uint8_t> bytes) {
    ParsedSnapshot out;
    out.header = parse_snapshot_header(bytes);
    size_t at = kSnapshotHeaderBytes;
    for (;;) {
        const SectionView s = parse_section_at(bytes, at);
        at = s.offset + kSectionHeaderBytes + s.stored.size();
        if (s.tag == kTagEnd) {
            require(s.raw_size == 0 && s.stored.empty(), SPECULA_ERR_FORMAT, "snapshot: the END section is not empty");
            require(at == bytes.size(), SPECULA_ERR_FORMAT, "snapshot: " + std::to_string(bytes.size() - at) + " bytes after the END section");
            return out;
        }
        out.sections.push_back(s);
    }
}

std::vector<uint8_t> decode_section(const SectionView &s, uint64_t max_raw, const char *what) {
    require(s.raw_size <= max_raw, SPECULA_ERR_FORMAT,
            std::string("snapshot: the ") + what + " section claims " + std::to_string(s.raw_size) + " bytes, more than its bound " + std::to_string(max_raw));
    std::vector<uint8_t> raw(size_t(s.raw_size));
    if (s.codec == kCodecStored) {
        if (!raw.empty()) std::memcpy(raw.data(), s.stored.data(), raw.size());
        return raw;
    }
    const unsigned long long content = ZSTD_getFrameContentSize(s.stored.data(), s.stored.size());
    require(content == s.raw_size, SPECULA_ERR_FORMAT,
            std::string("snapshot: the ") + what + " section's zstd frame does not hold the " + std::to_string(s.raw_size) + " bytes it claims");
    const size_t n = ZSTD_decompress(raw.data(), raw.size(), s.stored.data(), s.stored.size());
    // ZSTD_decompress allocates its context (malloc): that failing is OUT_OF_MEMORY, not a damaged snapshot (FORMAT).
    if (ZSTD_isError(n) && ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation) throw std::bad_alloc();
    require(!ZSTD_isError(n) && n == raw.size(), SPECULA_ERR_FORMAT,
            std::string("snapshot: the ") + what + " section does not decompress" + (ZSTD_isError(n) ? std::string(": ") + ZSTD_getErrorName(n) : std::string()));
    return raw;
}

std::vector<int32_t> decode_tokens(const SectionView &section, int32_t n_tokens, int32_t n_vocab) {
    require(section.tag == kTagTokens, SPECULA_ERR_FORMAT, "snapshot: the TOKS section is missing or out of place");
    const std::vector<uint8_t> raw = decode_section(section, 16 + 4 * uint64_t(n_tokens), "TOKS");
    ByteReader r(raw, "snapshot: TOKS section");
    std::vector<int32_t> tokens = r.get_array<int32_t>(uint64_t(n_tokens));
    r.check(tokens.size() == size_t(n_tokens), "holds " + std::to_string(tokens.size()) + " tokens, the header says " + std::to_string(n_tokens));
    for (int32_t t : tokens) r.check(t >= 0 && t < n_vocab, "token id " + std::to_string(t) + " is outside the vocabulary");
    r.expect_end();
    return tokens;
}

void read_kv_chunks(std::span<const SectionView> chunks, const std::vector<KvChunkId> &plan, KvType type, int32_t row_width, ThreadPool &pool,
                    const KvRows *sink, int32_t limit_slots, size_t stage_budget, StagedKv &staged) {
    require(chunks.size() == plan.size(), SPECULA_ERR_FORMAT,
            "snapshot: " + std::to_string(chunks.size()) + " KV chunks where " + std::to_string(plan.size()) + " are expected");
    const size_t esize = kv_type_size(type);
    // Decodes chunk i (checks its id, size and encoding) and returns its rows unshuffled.
    auto decode = [&](size_t i, std::vector<uint8_t> &rows_out) {
        const KvChunkId &want = plan[i];
        const size_t row_bytes = size_t(want.count) * kv_row_bytes(type, row_width);
        const std::string name = chunk_name(want);
        const std::vector<uint8_t> raw = decode_section(chunks[i], kChunkHeaderBytes + row_bytes, name.c_str());
        require(raw.size() == kChunkHeaderBytes + row_bytes, SPECULA_ERR_FORMAT,
                "snapshot: the chunk of " + name + " has " + std::to_string(raw.size()) + " bytes, expected " + std::to_string(kChunkHeaderBytes + row_bytes));
        uint32_t head[6];
        std::memcpy(head, raw.data(), sizeof head);
        const KvChunkId got{head[0], head[1], head[2], int32_t(head[3]), int32_t(head[4])};
        require(got == want, SPECULA_ERR_FORMAT, "snapshot: found the chunk of " + chunk_name(got) + " where " + name + " belongs");
        require(head[5] == kEncodingPlain || head[5] == kEncodingShuffled, SPECULA_ERR_FORMAT,
                "snapshot: the chunk of " + name + " has an unknown encoding " + std::to_string(head[5]));
        rows_out.resize(row_bytes);
        if (head[5] == kEncodingShuffled)
            unshuffle(raw.data() + kChunkHeaderBytes, rows_out.data(), row_bytes / esize, esize);
        else
            std::memcpy(rows_out.data(), raw.data() + kChunkHeaderBytes, row_bytes);
    };

    const size_t batch = size_t(2 * pool.size());
    if (sink == nullptr) {  // check every chunk that will be written; keep the rows while they fit the budget
        size_t total = 0;
        for (const KvChunkId &c : plan)
            if (c.first < limit_slots) total += size_t(c.count) * kv_row_bytes(type, row_width);
        const bool keep = total <= stage_budget;
        staged.rows.assign(keep ? plan.size() : 0, {});
        std::vector<std::vector<uint8_t>> scratch(size_t(pool.size()));
        run_tasks(pool, int64_t(plan.size()), [&](int64_t i, int thread) {
            if (plan[size_t(i)].first >= limit_slots) return;  // a partial restore never reads it (its hash was checked)
            decode(size_t(i), keep ? staged.rows[size_t(i)] : scratch[size_t(thread)]);
        });
        staged.complete = keep;
        return;
    }
    std::vector<std::vector<uint8_t>> rows(batch);
    for (size_t start = 0; start < plan.size(); start += batch) {
        const size_t nb = std::min(batch, plan.size() - start);
        if (!staged.complete)
            run_tasks(pool, int64_t(nb), [&](int64_t j, int) {
                if (plan[start + size_t(j)].first < limit_slots) decode(start + size_t(j), rows[size_t(j)]);
            });
        for (size_t j = 0; j < nb; ++j) {  // writes stay on this thread: a GPU backend copies through its stream
            KvChunkId c = plan[start + j];
            if (c.first >= limit_slots) continue;
            c.count = std::min(c.count, limit_slots - c.first);  // rows are dense: the leading ones are a prefix
            sink->write(c, staged.complete ? staged.rows[start + j].data() : rows[j].data());
        }
    }
}

}  // namespace specula::internal
