// The CPU backend's packed weights (backends/cpu/cpu_weights.h): made when the first CPU runner of a model needs
// them, not when the model loads (a model only a GPU runs is never packed), shared by every CPU runner and kept
// with the model.
#include <catch2/catch.hpp>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/cpu_runner.h"
#include "backends/cpu/cpu_weights.h"
#include "common/fixture_files.h"
#include "model/model.h"

#include <filesystem>
#include <vector>

using namespace specula::internal;

TEST_CASE("CPU packing happens at the first CPU runner, once per model, and serves every runner", "[kernels]") {
    std::filesystem::path path = std::filesystem::path(SPECULA_SOURCE_DIR) / "models/stories260K.gguf";
    const auto model = Model::load(path.string(), LoadOptions{});
    const bool simd = active_cpu_isa() != CpuIsa::Scalar;
    const char *key = simd ? "cpu.packed" : "cpu.unpacked";
    CHECK_FALSE(model->backend_cache().contains(key));  // loading packs nothing
    {
        CpuRunner a(model, 64, 1);
        CHECK(model->backend_cache().contains(key));
        const auto w1 = CpuWeights::of(model);
        CpuRunner b(model, 64, 1);
        CHECK(CpuWeights::of(model).get() == w1.get());  // one packing per model
        // stories260K is F32: every matrix of the forward pass has a packed copy at a SIMD level.
        const LayerWeights &l = model->weights().layers[0];
        CHECK((w1->matrix(l.wq).packed != nullptr) == simd);
        CHECK((w1->matrix(model->weights().output).packed != nullptr) == simd);
        CHECK(w1->matrix(model->weights().layers[0].attn_norm).packed == nullptr);  // norms are not multiplied by
        if (simd) CHECK(w1->bytes() >= size_t(l.wq.rows) * l.wq.row_bytes);
        // Both runners compute the same logits from it.
        const std::vector<int32_t> tokens = {1, 20, 30, 40};
        std::vector<float> la(size_t(model->hparams().n_vocab)), lb(la.size());
        REQUIRE(a.eval(tokens.data(), 4, 0, la.data(), false));
        REQUIRE(b.eval(tokens.data(), 4, 0, lb.data(), false));
        CHECK(la == lb);
    }
    CHECK(model->backend_cache().contains(key));  // kept with the model: the next session does not pack again
}
