#include "backends/cpu/cpu_weights.h"

#include "core/log.h"
#include "core/timer.h"
#include "model/model.h"
#include "speculative/longspec_draft_file.h"

#include <utility>

namespace specula::internal {
namespace {

// The packing of a model or draft, kept in its BackendCache: made when the first CPU session needs it and kept as
// long as the model (as the mapped file is), so sessions that come and go do not pack again. The layout is the same
// at every SIMD level (each level has kernels for the same types), so one packing serves them all: a benchmark
// that caps the level at run time (set_cpu_isa_cap) runs the capped level's kernels on it. At the scalar level
// nothing is packed (an empty entry of its own).
template <typename Owner, typename Make>
std::shared_ptr<const CpuWeights> find_or_make(const Owner &owner, Make make) {
    const CpuIsa isa = active_cpu_isa();
    const char *key = isa == CpuIsa::Scalar ? "cpu.unpacked" : "cpu.packed";
    std::shared_ptr<const void> entry = owner.backend_cache().get_or_make(key, [&] {
        const double t0 = now_ms();
        std::shared_ptr<const CpuWeights> made = make(isa);
        log(SPECULA_LOG_INFO, "CPU: %zu bytes of weights packed for the %s kernels in %.1f ms", made->bytes(), cpu_isa_name(isa), now_ms() - t0);
        return std::static_pointer_cast<const void>(made);
    });
    return std::static_pointer_cast<const CpuWeights>(entry);
}

}  // namespace

void CpuWeights::pack(const WeightView &w, CpuIsa isa, const FileBytes &bytes, bool release_source) {
    if (isa == CpuIsa::Scalar || !w || !PackedMatrix::packable(w.type) || packed_gemm(w.type, isa) == nullptr) return;
    if (packed_.count(w.data) != 0) return;
    std::unique_ptr<PackedMatrix> m = PackedMatrix::pack(w);
    bytes_ += m->bytes();
    packed_.emplace(w.data, std::move(m));
    // The packed copy serves every matrix product; the mapped original is read again only by nothing (or, for a
    // tied output, for embedding rows), so its pages need not stay resident beside the copy.
    if (release_source) bytes.release_pages(w.data, size_t(w.rows) * w.row_bytes);
}

std::shared_ptr<const CpuWeights> CpuWeights::of(const std::shared_ptr<const Model> &model) {
    return find_or_make(*model, [&](CpuIsa isa) {
        std::shared_ptr<CpuWeights> cw(new CpuWeights());
        const ModelWeights &w = model->weights();
        const FileBytes &bytes = model->file().bytes();
        for (const LayerWeights &l : w.layers)
            for (const WeightView *m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) cw->pack(*m, isa, bytes, true);
        // A tied output shares the embedding's bytes; only the output needs packing (embedding rows are gathered).
        cw->pack(w.output, isa, bytes, !w.tied_output);
        return std::shared_ptr<const CpuWeights>(std::move(cw));
    });
}

std::shared_ptr<const CpuWeights> CpuWeights::of(const std::shared_ptr<const LongSpecDraft> &draft) {
    return find_or_make(*draft, [&](CpuIsa isa) {
        std::shared_ptr<CpuWeights> cw(new CpuWeights());
        const LongSpecWeights &w = draft->weights();
        const FileBytes &bytes = draft->file().bytes();
        for (const WeightView *v : {&w.wq, &w.wk, &w.wv, &w.wo, &w.cross_wq, &w.cross_wo, &w.ffn_gate, &w.ffn_up, &w.ffn_down})
            cw->pack(*v, isa, bytes, true);
        return std::shared_ptr<const CpuWeights>(std::move(cw));
    });
}

}  // namespace specula::internal
