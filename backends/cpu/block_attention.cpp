#include "block_attention.h"


#include <algorithm>
#include <climits>
#include <cmath>

namespace specula::internal {

BlockAttention::BlockAttention(int32_t hd)
    : hd_(hd), k_(size_t(kAttentionBlock) * size_t(hd)), v_(k_.size()), scores_(size_t(kAttentionRowsAtOnce) * size_t(kAttentionBlock)),
      st_(attention_lanes_available() ? size_t(kAttentionBlock + kLaneScoreSlack) * size_t(kLaneRows) : 0) {
    tail_.reserve(2 * size_t(kAttentionBlock));  // a partial block plus a tree path: no growth with context
}

void BlockAttention::reserve_rows(size_t rows) {
    max_.reserve(rows);
    sum_.reserve(rows);
    if (attention_lanes_available()) {
        const size_t lanes = (rows + size_t(kLaneRows) - 1) / size_t(kLaneRows) * size_t(kLaneRows);
        qt_.reserve(lanes * size_t(hd_));
        ot_.reserve(lanes * size_t(hd_));
        lm_.reserve(lanes);
        ll_.reserve(lanes);
    }
}

size_t BlockAttention::bytes() const {
    return (k_.capacity() + v_.capacity() + scores_.capacity() + max_.capacity() + sum_.capacity() + qt_.capacity() +
            ot_.capacity() + lm_.capacity() + ll_.capacity() + st_.capacity()) *
               sizeof(float) +
           tail_.capacity() * sizeof(int32_t);
}

// A contiguous run of F32 or F16 rows is read in place (the kernels convert halves in their registers, once per
// pass of up to 4 rows: cheaper than converting into a buffer and reading it back, measured for 4 to 64 rows);
// gathered slots and Q8_0 rows are converted into the block buffers. Either way the kernels compute on the stored
// values (every half converts exactly), so where they come from does not change a bit.
BlockAttention::Block BlockAttention::load(const KvView &keys, const KvView &values, int32_t first, int32_t first_slot, const int32_t *slots,
                                           int32_t count) {
    Block b;
    int32_t at = first, at_v = first;  // first within the head's rows (the same for keys and values)
    const uint8_t *k_row = keys.row(first_slot, at), *v_row = values.row(first_slot, at_v);
    if (keys.type == KvType::F32 && slots == nullptr) {
        b.stride = keys.row_bytes / sizeof(float);
        b.k = reinterpret_cast<const float *>(k_row) + at;
        b.v = reinterpret_cast<const float *>(v_row) + at;
        return b;
    }
    if (keys.type == KvType::F16 && slots == nullptr) {
        b.stride = keys.row_bytes / sizeof(uint16_t);
        b.k16 = reinterpret_cast<const uint16_t *>(k_row) + at;
        b.v16 = reinterpret_cast<const uint16_t *>(v_row) + at;
        return b;
    }
    kv_load_head(keys, first_slot, slots, count, first, hd_, k_.data());
    kv_load_head(values, first_slot, slots, count, first, hd_, v_.data());
    b.k = k_.data();
    b.v = v_.data();
    b.stride = size_t(hd_);
    return b;
}

// One block into the online softmax of each of up to kAttentionRowsAtOnce rows: their scores (the block's keys
// read once for all of them), then per row the new running max (rescaling what was summed under the old one), the
// block's weights and their sum, then the weighted values in key order (read once for all). Each row's arithmetic
// is what it would be alone.
void BlockAttention::fold(const size_t *rows, int32_t n_rows, std::span<const AttentionQuery> queries, const Block &block, int32_t count,
                          float scale) {
    const float *q[kAttentionRowsAtOnce];
    float *out[kAttentionRowsAtOnce];
    for (int32_t i = 0; i < n_rows; ++i) q[i] = queries[rows[i]].q, out[i] = queries[rows[i]].out;
    constexpr size_t ld = kAttentionBlock;
    if (block.k16) attention_scores(q, n_rows, hd_, scale, block.k16, block.stride, count, scores_.data(), ld);
    else attention_scores(q, n_rows, hd_, scale, block.k, block.stride, count, scores_.data(), ld);
    for (int32_t i = 0; i < n_rows; ++i) {
        float *scores = scores_.data() + size_t(i) * ld;
        if (softcap_ > 0.0f) {  // llama.cpp's order: scale by 1 / cap, tanh, scale by cap
            const float inv = 1.0f / softcap_;
            for (int32_t t = 0; t < count; ++t) scores[t] = std::tanh(scores[t] * inv) * softcap_;
        }
        const float block_max = scores_max(scores, count);
        float &m = max_[rows[i]], &l = sum_[rows[i]];
        if (block_max > m) {
            if (m != -INFINITY) {
                const float r = std::exp(m - block_max);
                for (int32_t j = 0; j < hd_; ++j) out[i][j] *= r;
                l *= r;
            }
            m = block_max;
        }
        l += exp_weights(scores, count, m);
    }
    if (block.v16) accumulate_weighted(out, n_rows, hd_, scores_.data(), ld, block.v16, block.stride, count);
    else accumulate_weighted(out, n_rows, hd_, scores_.data(), ld, block.v, block.stride, count);
}

void BlockAttention::lanes_begin(std::span<const AttentionQuery> queries, size_t lane_rows) {
    const size_t chunks = lane_rows / size_t(kLaneRows) + (lane_rows % size_t(kLaneRows) != 0), hd = size_t(hd_), L = size_t(kLaneRows);
    qt_.resize(chunks * L * hd);
    ot_.resize(chunks * L * hd);
    lm_.resize(chunks * L);
    ll_.resize(chunks * L);
    for (size_t c = 0; c < chunks; ++c) {
        const size_t r0 = c * L, n = std::min(L, lane_rows - r0);
        const float *q[kLaneRows];
        for (size_t r = 0; r < n; ++r) q[r] = queries[r0 + r].q;
        lanes_transpose_queries(q, int32_t(n), hd_, qt_.data() + c * L * hd);
        float *ot = ot_.data() + c * L * hd;
        for (size_t r = 0; r < L; ++r) {
            // A window's first partial block may already be folded in (run's first loop): start from its state.
            for (size_t j = 0; j < hd; ++j) ot[j * L + r] = r < n ? queries[r0 + r].out[j] : 0.0f;
            lm_[r0 + r] = r < n ? max_[r0 + r] : -INFINITY;
            ll_[r0 + r] = r < n ? sum_[r0 + r] : 0.0f;
        }
    }
}

// One shared block into every chunk of lanes with a row reaching it (masks[c]: chunk c's rows that do): keys and
// values as F32 rows (F16 ones converted once for all chunks), then the chunk's scores, softmax step and weighted
// values.
void BlockAttention::lanes_fold(size_t lane_rows, const uint32_t *masks, const Block &block, float scale) {
    constexpr int32_t B = kAttentionBlock;
    const size_t L = size_t(kLaneRows), hd = size_t(hd_);
    const float *k = block.k, *v = block.v;
    size_t stride = block.stride;
    for (size_t c = 0; c * L < lane_rows; ++c) {
        const uint32_t mask = masks[c];
        if (mask == 0) continue;
        float *st = st_.data();
        if (!k) {  // F16 read in place: the first chunk converts the keys and values (exactly) as it scores
            lanes_scores(qt_.data() + c * L * hd, hd_, scale, block.k16, block.v16, block.stride, B, st, k_.data(), v_.data());
            k = k_.data(), v = v_.data(), stride = hd;
        } else {
            lanes_scores(qt_.data() + c * L * hd, hd_, scale, k, stride, B, st);
        }
        if (softcap_ > 0.0f) {  // fold's order: scale by 1 / cap, tanh, scale by cap
            const float inv = 1.0f / softcap_;
            for (size_t i = 0; i < size_t(B) * L; ++i) st[i] = std::tanh(st[i] * inv) * softcap_;
        }
        lanes_softmax(st, B, mask, lm_.data() + c * L, ll_.data() + c * L, ot_.data() + c * L * hd, hd_);
        lanes_accumulate(ot_.data() + c * L * hd, hd_, st, v, stride, B, mask);
    }
}

void BlockAttention::lanes_end(std::span<const AttentionQuery> queries, size_t lane_rows) {
    const size_t L = size_t(kLaneRows), hd = size_t(hd_);
    for (size_t r = 0; r < lane_rows; ++r) {
        const float *ot = ot_.data() + r / L * L * hd + r % L;
        for (size_t j = 0; j < hd; ++j) queries[r].out[j] = ot[j * L];
        max_[r] = lm_[r];
        sum_[r] = ll_[r];
    }
}

void BlockAttention::run(const KvView &keys, const KvView &values, int32_t first, float scale, std::span<const AttentionQuery> queries) {
    constexpr int32_t B = kAttentionBlock;
    const size_t nq = queries.size();
    max_.assign(nq, -INFINITY);
    sum_.assign(nq, 0.0f);
    // Row r's keys have logical positions [from, end): slot s for from <= s < run, then its listed slots from
    // base = max(from, run) on (a window that starts past the run keeps only its last listed slots, which sit at
    // those positions). The blocks [lo_block, hi_block) lie inside its run and are shared; the keys before (a
    // window's partial first block) and after them are gathered in blocks cut at the multiples of B.
    auto base_of = [](const AttentionQuery &q) { return std::max(q.from, q.run); };
    auto end_of = [&](const AttentionQuery &q) { return base_of(q) + q.n_extra; };
    auto lo_block = [&](const AttentionQuery &q) { return (q.from + B - 1) / B; };
    auto hi_block = [&](const AttentionQuery &q) { return std::max(q.run / B, lo_block(q)); };
    auto reaches = [&](const AttentionQuery &q, int32_t b) { return lo_block(q) <= b && b < hi_block(q); };
    auto gather = [&](const AttentionQuery &q, int32_t lo, int32_t hi) {  // logical positions [lo, hi)
        tail_.clear();
        const int32_t base = base_of(q);
        for (int32_t s = lo; s < hi; ++s) tail_.push_back(s < q.run ? s : q.extra[s - base]);
    };
    auto fold_gathered = [&](size_t r) {
        for (size_t t0 = 0; t0 < tail_.size(); t0 += B) {
            const int32_t count = int32_t(std::min(tail_.size() - t0, size_t(B)));
            fold(&r, 1, queries, load(keys, values, first, 0, tail_.data() + t0, count), count, scale);
        }
    };
    int32_t shared_lo = INT32_MAX, shared_hi = 0;
    for (size_t r = 0; r < nq; ++r) {
        const AttentionQuery &q = queries[r];
        std::fill(q.out, q.out + hd_, 0.0f);
        shared_lo = std::min(shared_lo, lo_block(q));
        shared_hi = std::max(shared_hi, hi_block(q));
        // A window's first partial block (up to the next multiple of B, or the end of its keys).
        if (q.from % B != 0) {
            gather(q, q.from, std::min(lo_block(q) * B, end_of(q)));
            fold_gathered(r);
        }
    }
    // Rows in lanes: the first lane_rows rows, in chunks of kLaneRows (a last chunk of fewer than kLaneMinRows rows,
    // and rows past kMaxLaneChunks chunks, go the per-row way below).
    size_t lane_rows = 0;
    if (attention_lanes_available() && nq >= size_t(kLaneMinRows)) {
        lane_rows = nq / size_t(kLaneRows) * size_t(kLaneRows);
        if (nq - lane_rows >= size_t(kLaneMinRows)) lane_rows = nq;
        lane_rows = std::min(lane_rows, size_t(kMaxLaneChunks) * size_t(kLaneRows));  // more than a task's rows: the rest one by one
    }
    if (lane_rows > 0) lanes_begin(queries, lane_rows);
    // The blocks inside the contiguous runs: read once, folded into every row that reaches them (the rows in lanes
    // together, the others up to kAttentionRowsAtOnce at a time: the same bits, attention_kernels.h).
    for (int32_t b = shared_lo; b < shared_hi; ++b) {
        const auto n_reach = std::count_if(queries.begin() + std::ptrdiff_t(lane_rows), queries.end(), [&](const AttentionQuery &q) { return reaches(q, b); });
        uint32_t masks[kMaxLaneChunks] = {}, lanes_reach = 0;  // per chunk of lanes: its rows that reach block b
        for (size_t r = 0; r < lane_rows; ++r)
            if (reaches(queries[r], b)) masks[r / size_t(kLaneRows)] |= 1u << (r % size_t(kLaneRows)), lanes_reach = 1;
        if (n_reach == 0 && !lanes_reach) continue;
        Block block = load(keys, values, first, b * B, nullptr, B);
        if (lanes_reach) lanes_fold(lane_rows, masks, block, scale);
        if (n_reach == 0) continue;
        size_t group[kAttentionRowsAtOnce];
        int32_t n_group = 0;
        for (size_t r = lane_rows; r < nq; ++r) {
            if (!reaches(queries[r], b)) continue;
            group[n_group++] = r;
            if (n_group == kAttentionRowsAtOnce) fold(group, n_group, queries, block, B, scale), n_group = 0;
        }
        if (n_group > 0) fold(group, n_group, queries, block, B, scale);
    }
    if (lane_rows > 0) lanes_end(queries, lane_rows);
    // Each row's remaining keys: the partial block of its run, then its listed slots, in blocks of B.
    for (size_t r = 0; r < nq; ++r) {
        const AttentionQuery &q = queries[r];
        gather(q, std::max(hi_block(q) * B, q.from), end_of(q));
        fold_gathered(r);
        if (sum_[r] > 0.0f) {
            const float inv = 1.0f / sum_[r];
            for (int32_t j = 0; j < hd_; ++j) q.out[j] *= inv;
        }
    }
}

}  // namespace specula::internal
