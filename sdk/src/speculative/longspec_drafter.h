// The LongSpec draft at inference: one decoder layer whose memory does not depend on the context length.
//
//   x  = embed_target(token)
//   x += SelfAttn(RMSNorm(x))   over a ring buffer of the last `window` + 1 committed positions plus the tree
//   x += CrossAttn(RMSNorm(x))  queries from the draft, keys/values = the TARGET's cache of one layer (the last),
//                               committed positions [0, n_target_kv) only: never the pending root or the tree
//   x += MLP(RMSNorm(x))        SwiGLU
//   logits = lm_head_target(x)  no final norm (as the reference, which trained it that way)
// RoPE uses the target's settings at real absolute positions: a tree node at depth d sits at root position + d.
//
// Because the layer's input is the token embedding alone, a committed token's self-attention key/value depend
// only on (token, position): catching up on new context is three small matmuls per token for the last
// window + 1 tokens, and the ring slot of position p is p mod (window + 1). The tree's keys/values live in
// separate slots, rewritten every round. Every buffer is allocated up front from (window, max tree nodes), so
// allocated_bytes() is the same at context 1K and 1M.
#pragma once

#include "backend/kv_type.h"
#include "speculative/drafter.h"
#include "speculative/longspec_draft_file.h"

#include <memory>
#include <span>
#include <vector>

namespace specula::internal {

// The ring as snapshots keep it (every LongSpec drafter's save_state): how far it has caught up on the context, the
// position each slot holds (-1: none yet) and the slots' self-attention keys and values, in the element type the
// drafter keeps them (F32 on the CPU, F16 on a GPU).
struct LongSpecRing {
    KvType type = KvType::F32;
    int32_t n_done = 0;
    std::vector<int32_t> positions;  // ring slots
    std::vector<uint8_t> k, v;       // ring slots x row_width elements of `type`

    std::vector<uint8_t> encode() const;
    // Throws Error(FORMAT) unless bytes hold a ring of this type, slot count and row width whose n_done fits a
    // context of n_tokens tokens.
    static LongSpecRing decode(std::span<const uint8_t> bytes, KvType type, int32_t slots, int32_t row_width, int32_t n_tokens);
};

// What every LongSpec drafter does with its layer, whatever computes it (the CPU: backends/cpu/
// cpu_longspec_drafter.cpp, CUDA: backends/cuda/cuda_longspec_drafter.cpp): a round catches up on the context, then either builds a beam tree
// scored level by level (speculative/beam_tree.h) or scores the root alone.
class LongSpecDrafterBase : public Drafter {
public:
    const char *name() const override { return "longspec"; }
    void draft(const DraftRequest &request, DraftTree &tree) override;
    bool root_logits(const DraftRequest &request, float *logits) override;
    // Snapshots: the ring, verbatim (LongSpecRing).
    std::vector<uint8_t> save_state() const override { return ring().encode(); }
    int32_t check_state(std::span<const uint8_t> state, int32_t n_tokens) const override;
    void load_state(std::span<const uint8_t> state) override;

protected:
    // ring_slots: window + 1; row_width: the target's n_embd_kv; ring_type: how this drafter keeps the ring's rows.
    LongSpecDrafterBase(int32_t max_tree_nodes, int32_t n_vocab, int32_t ring_slots, int32_t row_width, KvType ring_type)
        : max_nodes_(max_tree_nodes), n_vocab_(n_vocab), ring_slots_(ring_slots), row_width_(row_width), ring_type_(ring_type) {}
    // The root (the context's last token) and its position, the target KV the cross-attention may read (never at
    // or beyond the root), and the ring caught up to the context.
    virtual void begin_round(const DraftRequest &request) = 0;
    // The layer for tree nodes [first, first + count) (the root alone when first == 0): count rows of logits.
    virtual void score(const DraftTree &tree, int32_t first, int32_t count, float *logits) = 0;
    // The same rows, but only each row's k best (log-prob, id) pairs (beam_tree.h: ScoreTopkFn), for a drafter that
    // can rank where the logits are (the CUDA drafter: on the device). False: unsupported (the default), then
    // score() runs instead. build_beam_tree asks for it only when it needs no full row.
    virtual bool score_topk(const DraftTree &tree, int32_t first, int32_t count, int32_t k, float *logp, int32_t *ids) {
        (void)tree, (void)first, (void)count, (void)k, (void)logp, (void)ids;
        return false;
    }
    // The ring copied out of, and back into, wherever the drafter keeps it.
    virtual LongSpecRing ring() const = 0;
    virtual void set_ring(const LongSpecRing &ring) = 0;

    int32_t max_nodes_;  // the most drafted nodes (root excluded) a tree may have
    int32_t n_vocab_;
    int32_t ring_slots_, row_width_;
    KvType ring_type_;

private:
    DraftTree root_tree_;  // root_logits' one-node tree
};

// Each backend makes its LongSpec drafter (TargetRunner::make_longspec_drafter): the CPU's in
// backends/cpu/cpu_longspec_drafter.cpp, the CUDA backend's in backends/cuda/cuda_longspec_drafter.cpp.

}  // namespace specula::internal
