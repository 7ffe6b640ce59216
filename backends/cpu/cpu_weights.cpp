#include "backends/cpu/cpu_weights.h"

#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "model/model.h"

#include <utility>

namespace specula::internal {

// The store of a file, kept in its BackendCache: made when the first CPU executor needs it and kept as long as the
// file (as the mapped bytes are), so sessions that come and go do not pack again. The layout is the same at every
// SIMD level (each level has kernels for the same types), so one packing serves them all: a benchmark that caps the
// level at run time (set_cpu_isa_cap) runs the capped level's kernels on it. At the scalar level nothing is packed
// (an empty store of its own).
std::shared_ptr<const CpuWeights> CpuWeights::of(const WeightSource &source) {
    const CpuIsa isa = active_cpu_isa();
    const char *key = isa == CpuIsa::Scalar ? "cpu.unpacked" : "cpu.packed";
    const FileBytes *bytes = source.bytes;
    std::shared_ptr<const void> entry = source.cache->get_or_make(
        key, [&] { return std::static_pointer_cast<const void>(std::shared_ptr<const CpuWeights>(new CpuWeights(isa, bytes))); });
    return std::static_pointer_cast<const CpuWeights>(entry);
}

std::shared_ptr<const CpuWeights> CpuWeights::of(const std::shared_ptr<const Model> &model) {
    return of(WeightSource{&model->file().bytes(), &model->backend_cache(), nullptr});
}

std::vector<std::shared_ptr<const CpuWeights>> CpuWeights::for_graph(const Graph &graph) {
    std::vector<std::shared_ptr<const CpuWeights>> stores;
    for (const WeightSource &s : graph.sources) stores.push_back(of(s));
    const double t0 = now_ms();
    size_t added = 0;
    for (const Graph::WeightUse &u : graph.weights()) {
        if (!u.multiplied) continue;  // an embedding's rows are gathered from the mapped bytes
        for (size_t i = 0; i < graph.sources.size(); ++i)
            if (graph.sources[i].holds(*u.w)) added += stores[i]->pack(*u.w, !u.gathered);
    }
    if (added > 0)
        log(SPECULA_LOG_INFO, "CPU: %zu bytes of weights packed for the %s kernels in %.1f ms (%s)", added, cpu_isa_name(active_cpu_isa()), now_ms() - t0,
            graph.name.c_str());
    return stores;
}

size_t CpuWeights::pack(const WeightView &w, bool release_source) const {
    if (isa_ == CpuIsa::Scalar || !w || !PackedMatrix::packable(w.type) || packed_gemm(w.type, isa_) == nullptr) return 0;
    std::lock_guard<std::mutex> lock(mutex_);
    if (packed_.count(w.data) != 0) return 0;
    std::unique_ptr<PackedMatrix> m = PackedMatrix::pack(w);
    const size_t added = m->bytes();
    bytes_ += added;
    packed_.emplace(w.data, std::move(m));
    // The packed copy serves every matrix product; the mapped original is read again only by nothing (or, for a
    // tied output, for embedding rows), so its pages need not stay resident beside the copy.
    if (release_source) bytes_source_->release_pages(w.data, size_t(w.rows) * w.row_bytes);
    return added;
}

CpuMatrix CpuWeights::matrix(const WeightView &w) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = packed_.find(w.data);
    return CpuMatrix{&w, it == packed_.end() ? nullptr : it->second.get()};
}

size_t CpuWeights::bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
}

}  // namespace specula::internal
