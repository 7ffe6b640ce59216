#include "session/prompt_cache.h"

#include "core/thread_pool.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "gguf/file_bytes.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <dirent.h>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace specula::internal {
namespace {

constexpr const char *kSuffix = ".snap";

// At most the first max_bytes bytes of a file.
std::vector<uint8_t> read_prefix(const fs::path &path, size_t max_bytes) {
    std::ifstream in(path, std::ios::binary);
    require(bool(in), SPECULA_ERR_IO, "cannot open '" + path.string() + "'");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    require(size >= 0, SPECULA_ERR_IO, "cannot read '" + path.string() + "'");
    in.seekg(0);
    std::vector<uint8_t> bytes(std::min(size_t(size), max_bytes));
    in.read(reinterpret_cast<char *>(bytes.data()), std::streamsize(bytes.size()));
    require(in.gcount() == std::streamsize(bytes.size()), SPECULA_ERR_IO, "cannot read '" + path.string() + "'");
    return bytes;
}

// An entry's token ids: the header and the TOKS section only.
std::vector<int32_t> read_entry_tokens(const fs::path &path, int32_t n_vocab) {
    const size_t head = kSnapshotHeaderBytes + kSectionHeaderBytes;
    std::vector<uint8_t> bytes = read_prefix(path, head);
    require(bytes.size() == head, SPECULA_ERR_FORMAT, "prompt cache: '" + path.string() + "' is too short");
    uint64_t stored = 0;
    std::memcpy(&stored, bytes.data() + kSnapshotHeaderBytes + 16, 8);
    require(stored <= (uint64_t(1) << 32), SPECULA_ERR_FORMAT, "prompt cache: '" + path.string() + "' is damaged");
    bytes = read_prefix(path, head + size_t(stored));
    const SnapshotHeader h = parse_snapshot_header(bytes);
    require(h.scope == SnapshotScope::Context, SPECULA_ERR_FORMAT, "prompt cache: '" + path.string() + "' is not a context snapshot");
    return decode_tokens(parse_section_at(bytes, kSnapshotHeaderBytes), h.n_tokens, n_vocab);
}

std::string entry_name(std::span<const int32_t> tokens) {
    char name[64];
    std::snprintf(name, sizeof name, "%016llx-%zu%s", static_cast<unsigned long long>(XXH3_64bits(tokens.data(), tokens.size_bytes())), tokens.size(),
                  kSuffix);
    return name;
}

bool is_entry(const fs::path &p) {
    return p.extension() == kSuffix && p.filename().string().find(".tmp.") == std::string::npos;
}

// Calls f(path, stat) for every regular file in dir (and below it when recursive), with POSIX calls: std::filesystem's
// directory iterators allocate inside noexcept functions of libstdc++, so a bad_alloc there was std::terminate (found
// by tests/alloc). A file or directory removed meanwhile (by another process) is skipped.
template <typename F> void walk_files(const fs::path &dir, bool recursive, F &&f) {
    DIR *d = ::opendir(dir.c_str());
    if (d == nullptr) return;
    struct Closer {
        DIR *d;
        ~Closer() { ::closedir(d); }
    } closer{d};
    while (const dirent *e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        const fs::path p = dir / e->d_name;
        struct stat st;
        if (::lstat(p.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (recursive) walk_files(p, true, f);
        } else if (S_ISREG(st.st_mode)) {
            f(p, st);
        }
    }
}

// Every entry file under the cache directory (all models), with its size and last use.
struct EntryFile {
    fs::path path;
    uint64_t size;
    int64_t time;  // last write, ns since the epoch
};
std::vector<EntryFile> entry_files(const fs::path &root) {
    std::vector<EntryFile> files;
    walk_files(root, true, [&](const fs::path &p, const struct stat &st) {
        if (is_entry(p))
            files.push_back({p, uint64_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1000000000 + int64_t(st.st_mtim.tv_nsec)});
    });
    return files;
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

}  // namespace

PromptCache::PromptCache(fs::path dir, const PromptCacheConfig &config) : dir_(std::move(dir)), config_(config) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    require(!ec && fs::is_directory(dir_, ec), SPECULA_ERR_IO, "prompt cache: cannot create the directory '" + dir_.string() + "': " + ec.message());
}

fs::path PromptCache::model_dir(Session &session) {
    const std::string kv = session.kv_type() == KvType::F16 ? "f16" : "f32";
    return dir_ / (session.model().fingerprint(&session.pool()).hex() + "-" + kv);
}

std::map<std::string, PromptCache::Entry> &PromptCache::refresh(const fs::path &dir, int32_t n_vocab) {
    std::map<std::string, Entry> &known = known_[dir.string()];
    std::map<std::string, Entry> now;
    walk_files(dir, false, [&](const fs::path &path, const struct stat &) {
        if (!is_entry(path)) return;
        const std::string name = path.filename().string();
        auto found = known.find(name);
        if (found != known.end()) {
            now.emplace(name, std::move(found->second));
            return;
        }
        try {
            now.emplace(name, Entry{read_entry_tokens(path, n_vocab)});
        } catch (const Error &e) {
            if (e.status() == SPECULA_ERR_IO) return;  // removed by another process while we looked
            log(SPECULA_LOG_WARN, "prompt cache: removing a damaged entry: %s", e.what());
            remove(path);
        }
    });
    known = std::move(now);
    return known;
}

void PromptCache::remove(const fs::path &file) {
    std::error_code ec;
    if (fs::remove(file, ec)) ++stats_.evictions;
    known_[file.parent_path().string()].erase(file.filename().string());
}

int32_t PromptCache::restore(Session &session, std::span<const int32_t> tokens) {
    std::lock_guard<std::mutex> lock(mutex_);
    const fs::path dir = model_dir(session);
    std::map<std::string, Entry> &entries = refresh(dir, session.model().hparams().n_vocab);
    std::string best;
    size_t best_len = 0;
    fs::file_time_type best_time{};
    for (const auto &[name, entry] : entries) {
        const size_t n = common_prefix(tokens, entry.tokens);
        if (n == 0 || n < best_len) continue;
        std::error_code ec;
        const fs::file_time_type t = fs::last_write_time(dir / name, ec);
        if (n > best_len || t > best_time) {
            best = name;
            best_len = n;
            best_time = t;
        }
    }
    const int32_t keep = int32_t(std::min<size_t>(best_len, size_t(session.n_ctx())));
    if (keep == 0) {
        ++stats_.misses;
        return 0;
    }
    const fs::path file = dir / best;
    FileBytes bytes;
    try {
        bytes = FileBytes::open(file.string(), false);  // read, not mapped: another process may remove it
    } catch (const Error &) {  // gone since the listing: another process evicted it
        known_[dir.string()].erase(best);
        ++stats_.misses;
        return 0;
    }
    try {
        session.load_snapshot(std::span<const uint8_t>(bytes.data(), bytes.size()), keep);
    } catch (const Error &e) {
        const specula_status st = e.status();
        if (st != SPECULA_ERR_FORMAT && st != SPECULA_ERR_UNSUPPORTED && st != SPECULA_ERR_INCOMPATIBLE) throw;
        log(SPECULA_LOG_WARN, "prompt cache: removing an entry that does not load: %s", e.what());
        remove(file);
        ++stats_.misses;
        return 0;
    }
    std::error_code ec;
    fs::last_write_time(file, fs::file_time_type::clock::now(), ec);  // most recently used
    ++stats_.hits;
    stats_.restored_tokens += keep;
    return keep;
}

void PromptCache::store(Session &session) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (session.tokens().empty() || session.n_evaluated() == 0) return;
    const fs::path dir = model_dir(session);
    std::error_code ec;
    fs::create_directories(dir, ec);
    require(!ec, SPECULA_ERR_IO, "prompt cache: cannot create '" + dir.string() + "': " + ec.message());
    std::map<std::string, Entry> &entries = refresh(dir, session.model().hparams().n_vocab);
    const std::vector<int32_t> tokens = session.tokens();
    const std::string name = entry_name(tokens);
    const fs::path file = dir / name;
    if (entries.count(name) == 0) {
        SnapshotOptions options;
        options.scope = SnapshotScope::Context;
        options.level = config_.level;
        write_file_atomically(file.string(), [&](const ByteSink &sink) { session.save_snapshot(options, sink); });
        entries[name] = Entry{tokens};
        ++stats_.stores;
    } else {
        fs::last_write_time(file, fs::file_time_type::clock::now(), ec);
    }
    // Entries whose context is a prefix of this one are served as well by this one.
    std::vector<std::string> dominated;
    for (const auto &[other, entry] : entries)
        if (other != name && entry.tokens.size() < tokens.size() && common_prefix(entry.tokens, tokens) == entry.tokens.size()) dominated.push_back(other);
    for (const std::string &other : dominated) remove(dir / other);
    enforce_limit(file);
}

void PromptCache::enforce_limit(const fs::path &keep) {
    if (config_.max_bytes == 0) return;
    std::vector<EntryFile> files = entry_files(dir_);
    uint64_t total = 0;
    for (const EntryFile &f : files) total += f.size;
    std::sort(files.begin(), files.end(), [](const EntryFile &a, const EntryFile &b) { return a.time < b.time; });
    for (const EntryFile &f : files) {
        if (total <= config_.max_bytes) break;
        if (f.path == keep) continue;  // the entry just stored goes last
        remove(f.path);
        total -= f.size;
    }
    if (total > config_.max_bytes) remove(keep);  // larger than the limit on its own
}

PromptCacheStats PromptCache::stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    PromptCacheStats s = stats_;
    for (const EntryFile &f : entry_files(dir_)) {
        ++s.n_entries;
        s.bytes += f.size;
    }
    return s;
}

}  // namespace specula::internal
