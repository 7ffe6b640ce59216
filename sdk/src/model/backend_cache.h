// What a backend derives from a model's (or a draft's) weights and keeps for as long as the model lives, such as
// the CPU backend's packed copies of the matrices (backends/cpu/cpu_weights.h): made on first use, shared by
// every session. The core stores each entry without knowing its type, so it names no backend.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace specula::internal {

class BackendCache {
public:
    // The entry under `key`, made by `make` (under the lock: two sessions never make it twice) when absent.
    // An entry must not hold a reference to the model that holds the cache.
    std::shared_ptr<const void> get_or_make(const std::string &key, const std::function<std::shared_ptr<const void>()> &make) const {
        std::lock_guard<std::mutex> lock(mutex_);
        std::shared_ptr<const void> &entry = entries_[key];
        if (!entry) entry = make();
        return entry;
    }

    // Whether an entry exists under `key` (for tests and memory reports).
    bool contains(const std::string &key) const {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto it = entries_.find(key);
        return it != entries_.end() && it->second != nullptr;
    }

private:
    mutable std::mutex mutex_;
    mutable std::map<std::string, std::shared_ptr<const void>> entries_;
};

}  // namespace specula::internal
