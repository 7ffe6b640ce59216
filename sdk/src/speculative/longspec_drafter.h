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
//
// Written once for every backend: the ring's bookkeeping, the window rule (which ring slots and ancestors each row
// sees), catch-up and rewind are here; the layer is a graph (speculative/longspec_graph.h) that the target
// runner's backend executes beside the target, reading the target's cache where it keeps it (its memory or its
// GPU's), in place (backend/graph_executor.h).
#pragma once

#include "backend/kv_type.h"
#include "speculative/drafter.h"
#include "speculative/longspec_draft_file.h"

#include <memory>
#include <span>
#include <vector>

namespace specula::internal {

class TargetRunner;

// The ring as snapshots keep it: how far it has caught up on the context, the position each slot holds (-1: none
// yet) and the slots' self-attention keys and values, in the element type the backend keeps them (F32 on the CPU,
// F16 on a GPU).
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

// The drafter for `draft` on the backend of `runner` (the target's runner: the draft's cross-attention reads its
// cache), for trees of at most max_tree_nodes drafted nodes (root excluded). Throws INVALID_ARGUMENT for a node
// count outside [0, 4096], UNSUPPORTED when the backend lacks an operation of the layer.
std::unique_ptr<Drafter> make_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, TargetRunner &runner);

}  // namespace specula::internal
