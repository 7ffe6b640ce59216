// The CPU backend's repacked copies of a model's (or a LongSpec draft's) weight matrices, for its SIMD kernels
// (packed/packed_gemm.h): made when the first CPU session of the model needs them, shared by every CPU runner and
// drafter of that model and kept in the model's BackendCache until the model is freed. A model that only CUDA
// sessions use is never packed. The mapped original pages of a packed matrix are released (read again only if
// something touches them), so a packed model costs about its file size in memory, not twice.
#pragma once

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/packed/packed_matrix.h"
#include "gguf/file_bytes.h"
#include "model/weights.h"

#include <cstddef>
#include <memory>
#include <unordered_map>

namespace specula::internal {

class Model;
class LongSpecDraft;

// A weight matrix as the CPU multiplies by it: the mapped view, and its packed copy when the active instruction
// set has a kernel for its type (else nullptr: the scalar reference path on the mapped bytes).
struct CpuMatrix {
    const WeightView &w;
    const PackedMatrix *packed = nullptr;
};

class CpuWeights {
public:
    // The packed matrices of `model` (the forward pass's seven per layer and the output) or `draft` (its
    // layer's nine) at the active instruction-set level, packing them on the first call at that level. The
    // model must outlive the result. Throws Error(OUT_OF_MEMORY). Thread-safe.
    static std::shared_ptr<const CpuWeights> of(const std::shared_ptr<const Model> &model);
    static std::shared_ptr<const CpuWeights> of(const std::shared_ptr<const LongSpecDraft> &draft);

    CpuMatrix matrix(const WeightView &w) const {
        const auto it = packed_.find(w.data);
        return CpuMatrix{w, it == packed_.end() ? nullptr : it->second.get()};
    }
    // Bytes of the packed copies (0 at the scalar level).
    size_t bytes() const { return bytes_; }

private:
    CpuWeights() = default;
    // Packs w when a kernel exists for its type at `isa`; release_source: whether nothing else reads the mapped
    // original (a tied output's bytes are the embedding's, whose rows are gathered).
    void pack(const WeightView &w, CpuIsa isa, const FileBytes &bytes, bool release_source);

    std::unordered_map<const uint8_t *, std::unique_ptr<PackedMatrix>> packed_;  // by the mapped data they copy
    size_t bytes_ = 0;
};

}  // namespace specula::internal
