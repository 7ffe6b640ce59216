// A directory of Context snapshots that saves re-evaluating long prompts: a new prompt restores the cached context
// sharing the longest prefix with it and evaluates only the rest.
//
//   DIR/<model fingerprint>-<kv type>/<XXH3-64 of the tokens>-<n tokens>.snap
//
// Entries are written under a temporary name and renamed, so readers (other processes included) only ever see
// whole files; each entry's tokens are read once (its header and TOKS section) and remembered by file name, since
// an entry never changes after it is written. The least recently used entries (file modification time, touched on
// every hit) go first when the directory is over its size limit, and an entry whose context is a prefix of a newer
// one is removed when the newer one is stored: the newer one shares at least as long a prefix with any prompt.
#pragma once

#include "session/session.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace specula::internal {

struct PromptCacheConfig {
    uint64_t max_bytes = uint64_t(1) << 30;  // 0: no limit
    int level = 1;                           // zstd level of new entries
};

struct PromptCacheStats {
    int64_t n_entries = 0;
    uint64_t bytes = 0;
    int64_t hits = 0, misses = 0, stores = 0, evictions = 0, restored_tokens = 0;
};

class PromptCache {
public:
    // Creates the directory if needed. Throws Error(IO).
    PromptCache(std::filesystem::path dir, const PromptCacheConfig &config);

    // Replaces the session's context with the longest cached prefix of `tokens` and returns its length; 0 on a
    // miss, with the session unchanged. A damaged entry is deleted and counts as a miss.
    int32_t restore(Session &session, std::span<const int32_t> tokens);
    // Stores the session's context (nothing when no token is evaluated yet), then enforces the size limit.
    void store(Session &session);
    PromptCacheStats stats();

private:
    struct Entry {
        std::vector<int32_t> tokens;
    };
    std::filesystem::path model_dir(Session &session);
    // Brings the remembered entries of `dir` up to date with the files there (other processes add and remove them).
    std::map<std::string, Entry> &refresh(const std::filesystem::path &dir, int32_t n_vocab);
    void remove(const std::filesystem::path &file);
    void enforce_limit(const std::filesystem::path &keep);

    std::filesystem::path dir_;
    PromptCacheConfig config_;
    std::mutex mutex_;
    std::map<std::string, std::map<std::string, Entry>> known_;  // model dir -> file name -> entry
    PromptCacheStats stats_;
};

}  // namespace specula::internal
