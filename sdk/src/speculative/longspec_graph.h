// LongSpec's draft layer as a graph (graph/graph.h), written once for every backend (paper Section 3; the layer is
// described in speculative/longspec_drafter.h):
//   stage kRingStage:  the self-attention keys/values of committed tokens, stored into the ring (the executor's
//                      own store, Graph::local_kv_slots = window + 1 ring slots, then one slot per tree node);
//   stage kLevelStage: the whole layer for a level of tree nodes: self-attention over the batch's key list 0 (the
//                      visible ring slots and ancestors), cross-attention onto the target's cache of one layer
//                      (key list 1: its committed prefix), the MLP, and the target's LM head (no final norm).
#pragma once

#include "graph/graph.h"

#include <memory>

namespace specula::internal {

class LongSpecDraft;

constexpr int32_t kRingStage = 0;
constexpr int32_t kLevelStage = 1;

// max_tree_nodes: tree slots after the ring (the root is committed: it is in the ring); n_ctx: the target session's
// context (its RoPE factors: LongRoPE's depend on it).
std::shared_ptr<const Graph> build_longspec_graph(const std::shared_ptr<const LongSpecDraft> &draft, int32_t max_tree_nodes, int32_t n_ctx);

}  // namespace specula::internal
