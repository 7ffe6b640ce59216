// The CPU's one attention path, for plain decoding, prompt batches, tree verification and the LongSpec draft's
// cross-attention alike: LongSpec's hybrid tree attention in a form that stays bit-exact.
//
// Every query row sees a run of contiguous slots [0, run) and then a short list of further slots (a tree node's
// ancestors and itself). Its keys, in that order, are cut into blocks of kAttentionBlock: block b holds the row's
// keys b*B .. b*B+B-1. A block that lies inside the contiguous run is the same slots for every row that reaches it,
// so the rows that share a KV head walk those blocks together (block outer, rows inner): each block's keys and
// values are read from the cache and converted once, then every row scores it and folds it into its own online
// softmax (running max, running sum, weighted values), always in block order. The rest of a row's keys (the last
// partial block of the run plus its listed slots) are gathered into blocks of the same size and folded the same way.
//
// A row with a sliding window sees [from, run) instead: its keys are still cut at the multiples of B of their
// logical position (slot s is position s, and the listed slots continue the run), so the blocks from
// ceil(from / B) on are the shared ones, and the partial block before them is gathered and folded first.
//
// Where 12 or more rows share a call (a tree of 3+ nodes over a KV group of 4 query heads), the shared blocks are
// folded with the rows side by side in 16 lanes (attention_kernels.h: the queries transposed once per call, each
// key element broadcast into 16 rows' multiply-adds, the softmax down the lanes): per lane the same operations in
// the same order, so the path a row takes changes no bit.
//
// So a row's arithmetic depends only on its own key sequence, never on which other rows share the batch: a tree
// node's output is bit-identical to decoding its path one token at a time (the lossless invariant), while the
// prefix costs one read per KV head per round instead of one per node.
#pragma once

#include "backends/cpu/attention_kernels.h"
#include "backends/cpu/kv_view.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace specula::internal {

constexpr int32_t kAttentionBlock = 64;
// Rows in lanes (attention_kernels.h) when at least this many rows share the call: measured with bench_attention at
// 8K on the 1B shape (docs/benchmarks.md), 8 rows ran 1.9x faster one by one (half the lanes idle), 16 rows 1.4x
// faster in lanes. The rows past the last whole chunk of kLaneRows go one by one when they are fewer than this.
constexpr int32_t kLaneMinRows = 12;
// Chunks of lanes per call at most (the CPU executor's tasks hold up to 64 rows: 4 chunks).
constexpr int32_t kMaxLaneChunks = 8;

struct AttentionQuery {
    const float *q = nullptr;      // hd floats (one head, after RoPE)
    float *out = nullptr;          // hd floats: the softmax-weighted mean of the values (zeros without keys)
    int32_t run = 0;               // sees slots [from, run) ...
    const int32_t *extra = nullptr;  // ... then these slots, in order
    int32_t n_extra = 0;
    int32_t from = 0;              // a sliding window's first slot (0: the whole run)
};

// Scratch for one thread; sizes depend on hd only. Construct it where it stays (emplace): a copy keeps the
// buffers but not the capacity reserved for the gathered tail, so its bytes would depend on its first calls.
class BlockAttention {
public:
    explicit BlockAttention(int32_t hd);

    // Attention of every query over its keys: element range [first, first + hd) of each key and value row (one KV
    // head), scores scaled by `scale`.
    void run(const KvView &keys, const KvView &values, int32_t first, float scale, std::span<const AttentionQuery> queries);

    // Scores become cap * tanh(score / cap) before the softmax (gemma2); 0: as they are.
    void set_softcap(float cap) { softcap_ = cap; }

    size_t bytes() const;
    // Makes room for calls of up to `rows` queries, and for rows with up to `keys` listed slots, so later calls
    // allocate nothing.
    void reserve_rows(size_t rows);
    void reserve_tail(size_t keys) { tail_.reserve(keys + size_t(kAttentionBlock)); }

private:
    struct Block {
        const float *k = nullptr, *v = nullptr;        // F32 rows in place, or rows converted into k_ / v_
        const uint16_t *k16 = nullptr, *v16 = nullptr;  // or F16 rows in place (converted in the kernels' registers)
        size_t stride = 0;  // elements between consecutive keys (and values)
    };
    Block load(const KvView &keys, const KvView &values, int32_t first, int32_t first_slot, const int32_t *slots, int32_t count);
    void fold(const size_t *rows, int32_t n_rows, std::span<const AttentionQuery> queries, const Block &block, int32_t count, float scale);
    // The rows [c * kLaneRows, ...) of chunk c in lanes: their state in (and back out of) qt_, ot_, lm_, ll_.
    void lanes_begin(std::span<const AttentionQuery> queries, size_t lane_rows);
    void lanes_fold(size_t lane_rows, const uint32_t *masks, const Block &block, float scale);
    void lanes_end(std::span<const AttentionQuery> queries, size_t lane_rows);

    int32_t hd_;
    float softcap_ = 0.0f;
    std::vector<float> k_, v_, scores_;  // scores_: kAttentionRowsAtOnce rows of a block
    std::vector<float> max_, sum_;  // per query row
    std::vector<int32_t> tail_;     // one row's gathered slots
    // Rows in lanes, per chunk of kLaneRows: queries transposed (hd x 16), outputs transposed (hd x 16), running
    // max and sum (16 each); st_: one block's scores, then weights (kAttentionBlock x 16).
    std::vector<float> qt_, ot_, lm_, ll_, st_;
};

}  // namespace specula::internal
