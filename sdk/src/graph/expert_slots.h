// What every backend's expert_mat_mul (graph.h) shares: the sizes of its scratch, and a batch's slots grouped by the
// expert each slot's route names, so that a backend multiplies each selected expert once over its gathered slots
// (the CPU reads the routes in place, the GPU backends after copying them back).
#pragma once

#include "graph/graph.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

// The largest expert operation of a graph (zeros when it has none): the widest input or output of an expert (its
// cols or rows), the most experts a row uses, the most experts an operation has.
struct ExpertShape {
    int64_t widest = 0;
    int32_t top_k = 0;
    int32_t n_experts = 0;
};
ExpertShape expert_shape(const Graph &graph);
// Bytes of a GPU backend's expert scratch for batches of max_rows rows: one expert's gathered inputs and its outputs
// as floats (at most max_rows slots: a row picks an expert once), and the batch's grouped slots as ints.
size_t expert_scratch_bytes(const Graph &graph, int32_t max_rows);

// routes: `rows` routes of 2 * k floats (graph.h's Route: k expert indices, then k weights). Slot s = row * k + j is
// row's j-th choice. On return slots[start[e] .. start[e + 1]) are the slots that chose expert e, in slot order
// (start: n_experts + 1 entries; slots: rows * k). Throws Error(INTERNAL) for a route that names no expert.
void group_slots_by_expert(const float *routes, int32_t rows, int32_t k, int32_t n_experts, std::vector<int32_t> &start, int32_t *slots);

}  // namespace specula::internal
