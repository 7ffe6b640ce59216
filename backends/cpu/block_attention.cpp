#include "block_attention.h"

#include "attention_kernels.h"

#include <algorithm>
#include <cmath>

namespace specula::internal {
namespace {
constexpr size_t kF16InPlaceReaders = 4;
}  // namespace

BlockAttention::BlockAttention(int32_t hd)
    : hd_(hd), k_(size_t(kAttentionBlock) * size_t(hd)), v_(k_.size()), scores_(size_t(kAttentionBlock)) {
    tail_.reserve(2 * size_t(kAttentionBlock));  // a partial block plus a tree path: no growth with context
}

void BlockAttention::reserve_rows(size_t rows) {
    max_.reserve(rows);
    sum_.reserve(rows);
}

size_t BlockAttention::bytes() const {
    return (k_.capacity() + v_.capacity() + scores_.capacity() + max_.capacity() + sum_.capacity()) * sizeof(float) +
           tail_.capacity() * sizeof(int32_t);
}

// F32 rows are read in place; F16 rows too when few rows read the block (decoding: one query per head of the
// group); other types, and F16 for many readers, are converted into the block buffers. Either way the kernels
// compute on the stored values (every half converts exactly), so where they come from does not change a bit.
BlockAttention::Block BlockAttention::load(const KvView &keys, const KvView &values, int32_t first, int32_t first_slot, const int32_t *slots,
                                           int32_t count, size_t readers) {
    Block b;
    if (keys.type == KvType::F32 && slots == nullptr) {
        b.stride = keys.row_bytes / sizeof(float);
        b.k = reinterpret_cast<const float *>(keys.data) + size_t(first_slot) * b.stride + size_t(first);
        b.v = reinterpret_cast<const float *>(values.data) + size_t(first_slot) * b.stride + size_t(first);
        return b;
    }
    if (keys.type == KvType::F16 && slots == nullptr && readers <= kF16InPlaceReaders) {
        b.stride = keys.row_bytes / sizeof(uint16_t);
        b.k16 = reinterpret_cast<const uint16_t *>(keys.data) + size_t(first_slot) * b.stride + size_t(first);
        b.v16 = reinterpret_cast<const uint16_t *>(values.data) + size_t(first_slot) * b.stride + size_t(first);
        return b;
    }
    kv_load_head(keys, first_slot, slots, count, first, hd_, k_.data());
    kv_load_head(values, first_slot, slots, count, first, hd_, v_.data());
    b.k = k_.data();
    b.v = v_.data();
    b.stride = size_t(hd_);
    return b;
}

// One block into one row's online softmax: scores, the new running max (rescaling what was summed under the old
// one), the block's weights and their sum, the weighted values in key order.
void BlockAttention::fold(size_t row, const AttentionQuery &q, const Block &block, int32_t count, float scale) {
    float *scores = scores_.data();
    if (block.k16) attention_scores(q.q, hd_, scale, block.k16, block.stride, count, scores);
    else attention_scores(q.q, hd_, scale, block.k, block.stride, count, scores);
    float block_max = scores[0];
    for (int32_t t = 1; t < count; ++t) block_max = std::max(block_max, scores[t]);
    float &m = max_[row], &l = sum_[row];
    if (block_max > m) {
        if (m != -INFINITY) {
            const float r = std::exp(m - block_max);
            for (int32_t j = 0; j < hd_; ++j) q.out[j] *= r;
            l *= r;
        }
        m = block_max;
    }
    l += exp_weights(scores, count, m);
    if (block.v16) accumulate_weighted(q.out, hd_, scores, block.v16, block.stride, count);
    else accumulate_weighted(q.out, hd_, scores, block.v, block.stride, count);
}

void BlockAttention::run(const KvView &keys, const KvView &values, int32_t first, float scale, std::span<const AttentionQuery> queries) {
    constexpr int32_t B = kAttentionBlock;
    const size_t nq = queries.size();
    max_.assign(nq, -INFINITY);
    sum_.assign(nq, 0.0f);
    int32_t shared_blocks = 0;
    for (const AttentionQuery &q : queries) {
        std::fill(q.out, q.out + hd_, 0.0f);
        shared_blocks = std::max(shared_blocks, q.run / B);
    }
    // The blocks inside the contiguous runs: read once, folded into every row that reaches them.
    for (int32_t b = 0; b < shared_blocks; ++b) {
        size_t readers = 0;
        for (const AttentionQuery &q : queries) readers += q.run / B > b;
        const Block block = load(keys, values, first, b * B, nullptr, B, readers);
        for (size_t r = 0; r < nq; ++r)
            if (queries[r].run / B > b) fold(r, queries[r], block, B, scale);
    }
    // Each row's remaining keys: the partial block of its run, then its listed slots, in blocks of B.
    for (size_t r = 0; r < nq; ++r) {
        const AttentionQuery &q = queries[r];
        tail_.clear();
        for (int32_t s = (q.run / B) * B; s < q.run; ++s) tail_.push_back(s);
        tail_.insert(tail_.end(), q.extra, q.extra + q.n_extra);
        for (size_t t0 = 0; t0 < tail_.size(); t0 += B) {
            const int32_t count = int32_t(std::min(tail_.size() - t0, size_t(B)));
            fold(r, q, load(keys, values, first, 0, tail_.data() + t0, count, 1), count, scale);
        }
        if (sum_[r] > 0.0f) {
            const float inv = 1.0f / sum_[r];
            for (int32_t j = 0; j < hd_; ++j) q.out[j] *= inv;
        }
    }
}

}  // namespace specula::internal
