#include "model/fingerprint.h"

#include "core/thread_pool.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <vector>

namespace specula::internal {

std::string Fingerprint::hex() const {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (uint8_t b : bytes) {
        out += digits[b >> 4];
        out += digits[b & 15];
    }
    return out;
}

Fingerprint fingerprint_bytes(const uint8_t *data, size_t size, ThreadPool *pool) {
    constexpr size_t kBlock = size_t(64) << 20;
    const size_t n_blocks = (size + kBlock - 1) / kBlock;
    std::vector<XXH128_hash_t> blocks(n_blocks);
    auto hash_block = [&](int64_t i, int) {
        const size_t at = size_t(i) * kBlock;
        blocks[size_t(i)] = XXH3_128bits(data + at, std::min(kBlock, size - at));
    };
    if (pool != nullptr && n_blocks > 1) {
        pool->run(int64_t(n_blocks), hash_block);
    } else {
        for (size_t i = 0; i < n_blocks; ++i) hash_block(int64_t(i), 0);
    }
    XXH3_state_t state;
    XXH3_128bits_reset(&state);
    const uint64_t n = size;
    XXH3_128bits_update(&state, &n, sizeof n);
    for (const XXH128_hash_t &h : blocks) {
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, h);
        XXH3_128bits_update(&state, c.digest, sizeof c.digest);
    }
    XXH128_canonical_t out;
    XXH128_canonicalFromHash(&out, XXH3_128bits_digest(&state));
    Fingerprint f;
    std::copy(std::begin(out.digest), std::end(out.digest), f.bytes.begin());
    return f;
}

}  // namespace specula::internal
