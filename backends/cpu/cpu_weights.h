// The CPU backend's repacked copies of a file's weight matrices (a model's, a LongSpec draft's), for its SIMD kernels
// (packed/packed_gemm.h): made when the first CPU executor of a graph over them needs them, shared by every CPU
// runner and executor of that file and kept in the file's BackendCache until it is freed. A model that only CUDA
// sessions use is never packed. The mapped original pages of a packed matrix are released (read again only if
// something touches them), so a packed model costs about its file size in memory, not twice.
#pragma once

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/packed/packed_matrix.h"
#include "gguf/file_bytes.h"
#include "graph/graph.h"
#include "model/weights.h"

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace specula::internal {

class Model;

// A weight matrix as the CPU multiplies by it: the mapped view, and its packed copy when the active instruction
// set has a kernel for its type (else nullptr: the scalar reference path on the mapped bytes).
struct CpuMatrix {
    const WeightView *w = nullptr;
    const PackedMatrix *packed = nullptr;
};

class CpuWeights {
public:
    // The store of the source's packed matrices at the active instruction-set level (one store per file, kept in its
    // BackendCache; empty until something packs into it). Thread-safe.
    static std::shared_ptr<const CpuWeights> of(const WeightSource &source);
    static std::shared_ptr<const CpuWeights> of(const std::shared_ptr<const Model> &model);
    // Packs every matrix of `graph` (each into its source's store) that is not packed yet, and returns the stores.
    // Throws Error(OUT_OF_MEMORY).
    static std::vector<std::shared_ptr<const CpuWeights>> for_graph(const Graph &graph);

    // w and its packed copy, if any. Thread-safe; the packed copy lives as long as the store.
    CpuMatrix matrix(const WeightView &w) const;
    // Bytes of the packed copies (0 at the scalar level).
    size_t bytes() const;

private:
    CpuWeights(CpuIsa isa, const FileBytes *bytes) : isa_(isa), bytes_source_(bytes) {}
    // Packs w when a kernel exists for its type; release_source: whether nothing else reads the mapped original (an
    // embedding's rows are gathered, also when the output head is tied to it). Returns the bytes it added.
    size_t pack(const WeightView &w, bool release_source) const;

    CpuIsa isa_;
    const FileBytes *bytes_source_;
    mutable std::mutex mutex_;
    mutable std::unordered_map<const uint8_t *, std::unique_ptr<PackedMatrix>> packed_;  // by the mapped data they copy
    mutable size_t bytes_ = 0;
};

}  // namespace specula::internal
