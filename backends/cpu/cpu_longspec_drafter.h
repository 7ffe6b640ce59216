// LongSpec's draft layer on the CPU (the layer and its arithmetic: speculative/longspec_drafter.h), reading the
// target's CPU cache in place. CpuRunner::make_longspec_drafter makes one; the CUDA backend has its own
// (backends/cuda/cuda_longspec_drafter.cpp).
#pragma once

#include "backends/cpu/kv_cache.h"
#include "core/thread_pool.h"
#include "speculative/longspec_drafter.h"

#include <memory>

namespace specula::internal {

// max_tree_nodes: the most drafted nodes (root excluded) any request will ask for. pool: the target runner's
// threads (drafting and verifying alternate). target_kv: the target runner's cache; both must outlive the drafter.
std::unique_ptr<Drafter> make_cpu_longspec_drafter(std::shared_ptr<const LongSpecDraft> draft, int32_t max_tree_nodes, ThreadPool &pool,
                                                   const KvCache &target_kv);

}  // namespace specula::internal
