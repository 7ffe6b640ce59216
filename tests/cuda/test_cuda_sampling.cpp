// Lossless speculative *sampling* on CUDA: the first two tokens a speculative session on the CUDA backend samples
// follow the exact joint distribution of the CUDA target (computed from its own logits), by the chi-square test
// of tests/unit/test_speculative_sampling.cpp; and the negative control (LongSpec's reference residual bug) fails.
#include "backends/cuda/cuda_runner.h"
#include "common/distribution_fit.h"
#include "common/fixture_files.h"

#include <catch2/catch.hpp>

using namespace specula::internal;
using namespace test_sampling;
using specula::internal::cuda::CudaRunner;

#ifdef SPECULA_CUDA_EMULATION
#define SLOW_WHEN_EMULATED "[slow]"
#else
#define SLOW_WHEN_EMULATED ""
#endif

namespace {

SessionConfig cuda_session() {
    SessionConfig sc;
    sc.n_ctx = 256;
    sc.n_threads = 1;
    sc.make_runner = [](std::shared_ptr<const Model> m, int32_t n_ctx, ThreadPool &) -> std::unique_ptr<TargetRunner> {
        return std::make_unique<CudaRunner>(std::move(m), n_ctx, 0);
    };
    return sc;
}

void fit_on_cuda(SampledDraftRule sampled, ResidualRule rule, const TreeShape &shape, bool expect_pass) {
    const auto target = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    const auto draft = test_fixtures::fixtures_dir() / "models/stories260K-L3.gguf";
    if (!test_fixtures::have_fixture(target) || !test_fixtures::have_fixture(draft)) return;
    const auto model = Model::load(target.string(), LoadOptions{});
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time, there was a", true, false);
    CudaRunner runner(model, 256, 0);
    const auto joint = exact_joint(model, runner, prompt);
    SpeculativeConfig spec;
    spec.draft_model = Model::load(draft.string(), LoadOptions{});
    spec.shape = shape;
    spec.sampled_drafts = sampled;
    spec.residual_rule = rule;
    double tau = 0;
    const FitResult r = speculative_fit(model, cuda_session(), spec, prompt, joint, 20000, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold << " tau " << tau);
    if (expect_pass) {
        CHECK(tau > 1.2);
        CHECK(r.chi2 < r.threshold);
    } else {
        CHECK(r.chi2 > r.threshold);
    }
}

}  // namespace

TEST_CASE("cuda: speculative sampling with a beam tree has the CUDA target's distribution", "[cuda][sampling]" SLOW_WHEN_EMULATED) {
    fit_on_cuda(SampledDraftRule::kCoupled, ResidualRule::kExact, TreeShape{{4, 4}}, true);
}

// Coupled chains are verified on the device (their children are deterministic); Leviathan's on the host.
TEST_CASE("cuda: speculative sampling with a chain sampled by the coupled rule has the CUDA target's distribution",
          "[cuda][sampling]" SLOW_WHEN_EMULATED) {
    fit_on_cuda(SampledDraftRule::kCoupled, ResidualRule::kExact, TreeShape::chain(2), true);
}

TEST_CASE("cuda: speculative sampling with a sampled chain and the Leviathan rule has the CUDA target's distribution",
          "[cuda][sampling]" SLOW_WHEN_EMULATED) {
    fit_on_cuda(SampledDraftRule::kLeviathan, ResidualRule::kExact, TreeShape::chain(2), true);
}

TEST_CASE("cuda: the sampling test catches a biased verifier on CUDA too", "[cuda][sampling]" SLOW_WHEN_EMULATED) {
    fit_on_cuda(SampledDraftRule::kLeviathan, ResidualRule::kTargetResample, TreeShape::chain(2), false);
}
