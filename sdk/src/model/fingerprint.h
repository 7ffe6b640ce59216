// A file's identity for snapshots: XXH3-128 over every byte of a GGUF (its metadata, tensor infos and tensor data),
// so a snapshot or cache entry made with one model is never loaded against another, even one with the same
// name, shapes and tokenizer but other weights (a fine-tune, another quantization).
//
// The bytes are hashed in fixed 64 MiB blocks (in parallel when a thread pool is given), then the block hashes
// and the size are hashed again: the same file gives the same fingerprint whatever the thread count. Hashing
// runs at memory speed (a 4.6 GB 8B Q4 model: about half a second on two cores), once per loaded model.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace specula::internal {

class ThreadPool;

struct Fingerprint {
    std::array<uint8_t, 16> bytes{};

    bool operator==(const Fingerprint &other) const = default;
    bool empty() const { return *this == Fingerprint{}; }
    // 32 lower-case hex digits.
    std::string hex() const;
};

Fingerprint fingerprint_bytes(const uint8_t *data, size_t size, ThreadPool *pool);

// Computed on first use and kept: for immutable objects (models, drafts) that many threads may share.
class LazyFingerprint {
public:
    const Fingerprint &get(const uint8_t *data, size_t size, ThreadPool *pool) const {
        std::call_once(once_, [&] { value_ = fingerprint_bytes(data, size, pool); });
        return value_;
    }

private:
    mutable std::once_flag once_;
    mutable Fingerprint value_;
};

}  // namespace specula::internal
