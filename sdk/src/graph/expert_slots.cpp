#include "graph/expert_slots.h"

#include "core/error.h"

#include <algorithm>

namespace specula::internal {

ExpertShape expert_shape(const Graph &graph) {
    ExpertShape s;
    for (const std::vector<Op> &stage : graph.stages)
        for (const Op &op : stage)
            if (op.kind == OpKind::ExpertMatMul) {
                s.widest = std::max({s.widest, op.experts[0].cols, op.experts[0].rows});
                s.top_k = std::max(s.top_k, op.top_k);
                s.n_experts = std::max(s.n_experts, op.n_experts);
            }
    return s;
}

size_t expert_scratch_bytes(const Graph &graph, int32_t max_rows) {
    const ExpertShape s = expert_shape(graph);
    return 2 * size_t(max_rows) * size_t(s.widest) * sizeof(float) + size_t(max_rows) * size_t(s.top_k) * sizeof(int32_t);
}

// A counting sort: the experts' counts, their starts, then each slot placed at its expert's next free place.
void group_slots_by_expert(const float *routes, int32_t rows, int32_t k, int32_t n_experts, std::vector<int32_t> &start, int32_t *slots) {
    start.assign(size_t(n_experts) + 1, 0);
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t j = 0; j < k; ++j) {
            const int32_t e = int32_t(routes[size_t(r) * 2 * size_t(k) + size_t(j)]);
            require(e >= 0 && e < n_experts, SPECULA_ERR_INTERNAL, "experts: a route names no expert");
            ++start[size_t(e) + 1];
        }
    for (int32_t e = 0; e < n_experts; ++e) start[size_t(e) + 1] += start[size_t(e)];
    // Placing advances start[e] to expert e's end (= e + 1's start); shifting by one restores the starts.
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t j = 0; j < k; ++j) slots[start[size_t(routes[size_t(r) * 2 * size_t(k) + size_t(j)])]++] = r * k + j;
    for (int32_t e = n_experts; e > 0; --e) start[size_t(e)] = start[size_t(e) - 1];
    start[0] = 0;
}

}  // namespace specula::internal
