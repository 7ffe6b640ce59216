// specula_session_save_* / load_* / fork, specula_model_fingerprint and specula_prompt_cache_*: the C face of
// session/session_snapshot.cpp and snapshot/prompt_cache.cpp.
#include "handles.h"

#include "core/atomic_file.h"
#include "gguf/file_bytes.h"

#include <cstring>
#include <filesystem>

using namespace specula::internal;

namespace {

SnapshotOptions to_options(const specula_snapshot_options *user) {
    specula_snapshot_options defaults;
    specula_snapshot_options_init(&defaults);
    const specula_snapshot_options o = read_options(user, defaults, "opts");
    require_arg(o.scope == SPECULA_SNAPSHOT_FULL || o.scope == SPECULA_SNAPSHOT_CONTEXT, "opts->scope is not a specula_snapshot_scope value");
    require_arg(o.compression_level >= -100 && o.compression_level <= 19, "opts->compression_level must be in [-100, 19]");
    SnapshotOptions out;
    out.scope = o.scope == SPECULA_SNAPSHOT_CONTEXT ? SnapshotScope::Context : SnapshotScope::Full;
    out.level = o.compression_level;
    return out;
}

}  // namespace

extern "C" {

void specula_snapshot_options_init_sized(specula_snapshot_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_snapshot_options *opts) {
        opts->scope = SPECULA_SNAPSHOT_FULL;
        opts->compression_level = 1;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at compression_level.
void (specula_snapshot_options_init)(specula_snapshot_options *opts) { specula_snapshot_options_init_sized(opts, SPECULA_OPTIONS_END(specula_snapshot_options, compression_level)); }

specula_status specula_session_save_file(specula_session *session, const char *path, const specula_snapshot_options *opts, specula_error **err) {
    return guarded(err, [&] {
        Session &s = session_of(session);
        require_arg(path != nullptr && path[0] != '\0', "path is NULL or empty");
        const SnapshotOptions options = to_options(opts);
        // Written beside the target and renamed over it: the path never holds a partial snapshot.
        write_file_atomically(path, [&](const ByteSink &sink) { s.save_snapshot(options, sink); });
    });
}

specula_status specula_session_load_file(specula_session *session, const char *path, specula_error **err) {
    return guarded(err, [&] {
        Session &s = session_of(session);
        require_arg(path != nullptr, "path is NULL");
        // Read into memory, not mapped: another process truncating the file must not crash this one.
        const FileBytes bytes = FileBytes::open(path, false);
        s.load_snapshot(std::span<const uint8_t>(bytes.data(), bytes.size()));
    });
}

specula_status specula_session_save_buffer(specula_session *session, const specula_snapshot_options *opts, void *buf, size_t capacity,
                                           size_t *size, specula_error **err) {
    return guarded(err, [&] {
        Session &s = session_of(session);
        require_arg(size != nullptr, "size is NULL");
        const Session::PreparedSnapshot prepared = s.prepare_snapshot(to_options(opts));
        const uint64_t bound = prepared.bound();
        if (buf != nullptr && capacity >= bound) {  // fits whatever zstd does
            uint8_t *out = static_cast<uint8_t *>(buf);
            size_t used = 0;
            s.write_snapshot(prepared, [&](const void *data, size_t n) {
                std::memcpy(out + used, data, n);
                used += n;
            });
            *size = used;
            return;
        }
        if (buf != nullptr) {  // a smaller buffer may still hold the compressed snapshot
            std::vector<uint8_t> bytes;
            s.write_snapshot(prepared, [&](const void *data, size_t n) {
                bytes.insert(bytes.end(), static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + n);
            });
            if (bytes.size() <= capacity) {
                std::memcpy(buf, bytes.data(), bytes.size());
                *size = bytes.size();
                return;
            }
        }
        *size = size_t(bound);
        throw Error(SPECULA_ERR_BUFFER_TOO_SMALL, "snapshot: a buffer of " + std::to_string(capacity) + " bytes may be too small; " +
                                                      std::to_string(bound) + " bytes always fit");
    });
}

specula_status specula_session_load_buffer(specula_session *session, const void *buf, size_t size, specula_error **err) {
    return guarded(err, [&] {
        Session &s = session_of(session);
        require_arg(buf != nullptr || size == 0, "buf is NULL");
        s.load_snapshot(std::span<const uint8_t>(static_cast<const uint8_t *>(buf), size));
    });
}

specula_status specula_session_fork(specula_session *src, specula_session *dst, const specula_snapshot_options *opts, specula_error **err) {
    return guarded(err, [&] {
        Session &from = session_of(src);
        Session &to = session_of(dst);
        require_arg(&from != &to, "src and dst are the same session");
        SnapshotOptions options = to_options(opts);
        options.level = 0;  // in memory: no compression
        const Session::PreparedSnapshot prepared = from.prepare_snapshot(options);
        std::vector<uint8_t> bytes;
        bytes.reserve(size_t(prepared.bound()));
        from.write_snapshot(prepared, [&](const void *data, size_t n) {
            bytes.insert(bytes.end(), static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + n);
        });
        to.load_snapshot(bytes);
    });
}

specula_status specula_model_fingerprint(const specula_model *model, char *buf, size_t buf_size, size_t *len, specula_error **err) {
    return guarded(err, [&] {
        require_arg(model != nullptr && model->model != nullptr, "model is NULL");
        copy_text(model->model->fingerprint().hex(), buf, buf_size, len);
    });
}

void specula_prompt_cache_options_init_sized(specula_prompt_cache_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_prompt_cache_options *opts) {
        opts->max_bytes = PromptCacheConfig{}.max_bytes;
        opts->compression_level = 1;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at compression_level.
void (specula_prompt_cache_options_init)(specula_prompt_cache_options *opts) { specula_prompt_cache_options_init_sized(opts, SPECULA_OPTIONS_END(specula_prompt_cache_options, compression_level)); }

specula_status specula_prompt_cache_open(const char *dir, const specula_prompt_cache_options *opts, specula_prompt_cache **out, specula_error **err) {
    return guarded(err, [&] {
        require_arg(out != nullptr, "out is NULL");
        *out = nullptr;
        require_arg(dir != nullptr && dir[0] != '\0', "dir is NULL or empty");
        specula_prompt_cache_options defaults;
        specula_prompt_cache_options_init(&defaults);
        const specula_prompt_cache_options o = read_options(opts, defaults, "opts");
        require_arg(o.compression_level >= -100 && o.compression_level <= 19, "opts->compression_level must be in [-100, 19]");
        PromptCacheConfig config;
        config.max_bytes = o.max_bytes;
        config.level = o.compression_level;
        auto handle = std::make_unique<specula_prompt_cache>();
        handle->cache = std::make_unique<PromptCache>(std::filesystem::path(dir), config);
        *out = handle.release();
    });
}

void specula_prompt_cache_destroy(specula_prompt_cache *cache) { delete cache; }

specula_status specula_prompt_cache_restore(specula_prompt_cache *cache, specula_session *session, const int32_t *tokens, size_t n_tokens,
                                            size_t *n_restored, specula_error **err) {
    return guarded(err, [&] {
        require_arg(n_restored != nullptr, "n_restored is NULL");
        *n_restored = 0;
        require_arg(cache != nullptr && cache->cache != nullptr, "cache is NULL");
        require_arg(tokens != nullptr || n_tokens == 0, "tokens is NULL");
        *n_restored = size_t(cache->cache->restore(session_of(session), std::span<const int32_t>(tokens, n_tokens)));
    });
}

specula_status specula_prompt_cache_store(specula_prompt_cache *cache, specula_session *session, specula_error **err) {
    return guarded(err, [&] {
        require_arg(cache != nullptr && cache->cache != nullptr, "cache is NULL");
        cache->cache->store(session_of(session));
    });
}

specula_status specula_prompt_cache_get_stats(specula_prompt_cache *cache, specula_prompt_cache_stats *stats, specula_error **err) {
    return guarded(err, [&] {
        require_arg(cache != nullptr && cache->cache != nullptr, "cache is NULL");
        require_arg(stats != nullptr && stats->struct_size >= sizeof(uint32_t), "stats is NULL or its struct_size is unset");
        const PromptCacheStats s = cache->cache->stats();
        specula_prompt_cache_stats full{};
        full.struct_size = stats->struct_size;
        full.n_entries = s.n_entries;
        full.bytes = s.bytes;
        full.hits = s.hits;
        full.misses = s.misses;
        full.stores = s.stores;
        full.evictions = s.evictions;
        full.restored_tokens = s.restored_tokens;
        std::memcpy(stats, &full, std::min<size_t>(stats->struct_size, sizeof full));
    });
}

}  // extern "C"
