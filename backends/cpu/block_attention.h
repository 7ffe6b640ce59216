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
// A block read by kTransposedRows rows or more (a tree of 8+ nodes over a KV group of 4 query heads) has its keys
// transposed once and scored 16 keys per register (attention_scores_transposed): each score is still the same
// eight lane sums in the same order and the same pairwise reduction, so the path a block takes changes no bit.
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
// A shared block's keys are transposed once (attention_scores_transposed) when at least this many rows read it:
// measured with bench_attention at 8K (1B shape, 4 query heads per KV head), 32 and 64 rows scored 15-20 % faster
// that way, 8 and 16 rows 10-40 % slower (the transposition is not paid back).
constexpr int32_t kTransposedRows = 32;
// Rows folded together: kAttentionRowsAtOnce reading the keys as stored, more from transposed keys (whose kernel
// takes 3 rows per pass).
constexpr int32_t kFoldRows = 12;

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
        const float *kt = nullptr;  // or, for many rows, the keys transposed into kt_ (attention_kernels.h)
    };
    Block load(const KvView &keys, const KvView &values, int32_t first, int32_t first_slot, const int32_t *slots, int32_t count);
    void fold(const size_t *rows, int32_t n_rows, std::span<const AttentionQuery> queries, const Block &block, int32_t count, float scale);

    int32_t hd_;
    float softcap_ = 0.0f;
    std::vector<float> k_, v_, kt_, scores_;  // scores_: kFoldRows rows of a block
    std::vector<float> max_, sum_;  // per query row
    std::vector<int32_t> tail_;     // one row's gathered slots
};

}  // namespace specula::internal
