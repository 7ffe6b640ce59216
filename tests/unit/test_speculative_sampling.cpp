// Lossless speculative *sampling*: the joint distribution of the first two generated tokens under speculative
// decoding equals the target's own distribution (after the whole sampler chain), by a chi-square
// goodness-of-fit test against the exact distribution computed from the target, with fixed seeds. Covered:
// the tree rule (deterministic beam children, sample-and-match), chains sampled from an independent draft model by
// the coupled rule (the default: the draft's race with the target's keys, then sample-and-match) and by Leviathan's
// accept/reject with the residual; and a negative control: the Leviathan chain with LongSpec's reference bug
// (resampling from p instead of the residual) fails the same test.
#include "backends/cpu/cpu_runner.h"
#include "common/distribution_fit.h"
#include "common/fixture_files.h"
#include "session/session.h"

#include <catch2/catch.hpp>

#include <map>
#include <vector>

using namespace specula::internal;

namespace {

using namespace test_sampling;

struct Fixture {
    std::shared_ptr<const Model> model, draft;
    std::vector<int32_t> prompt;
    std::map<Pair, double> joint;
};

bool setup(Fixture &f) {
    const auto target = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    const auto draft = test_fixtures::fixtures_dir() / "models/stories260K-L3.gguf";
    if (!test_fixtures::have_fixture(target) || !test_fixtures::have_fixture(draft)) return false;
    f.model = Model::load(target.string(), LoadOptions{});
    f.draft = Model::load(draft.string(), LoadOptions{});
    f.prompt = f.model->vocab().tokenize("Once upon a time, there was a", true, false);
    CpuRunner runner(f.model, 256, 1);
    f.joint = exact_joint(f.model, runner, f.prompt);
    return true;
}

constexpr int kSamples = 20000;

SessionConfig cpu_session() {
    SessionConfig sc;
    sc.n_ctx = 256;
    sc.n_threads = 1;
    return sc;
}

}  // namespace

TEST_CASE("speculative sampling with a beam tree has the target's distribution", "[speculative][sampling][long]") {
    Fixture f;
    if (!setup(f)) return;
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape{{4, 4}};
    double tau = 0;
    const FitResult r = speculative_fit(f.model, cpu_session(), spec, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold << " tau " << tau);
    CHECK(tau > 1.2);  // drafts were really accepted, not just bonus tokens
    CHECK(r.chi2 < r.threshold);
}

TEST_CASE("speculative sampling with a chain sampled by the coupled rule has the target's distribution", "[speculative][sampling][long]") {
    Fixture f;
    if (!setup(f)) return;
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape::chain(2);
    double tau = 0;
    const FitResult r = speculative_fit(f.model, cpu_session(), spec, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold << " tau " << tau);
    CHECK(tau > 1.2);
    CHECK(r.chi2 < r.threshold);
}

TEST_CASE("speculative sampling with a sampled chain and the Leviathan rule has the target's distribution", "[speculative][sampling][long]") {
    Fixture f;
    if (!setup(f)) return;
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape::chain(2);
    spec.sampled_drafts = SampledDraftRule::kLeviathan;
    double tau = 0;
    const FitResult r = speculative_fit(f.model, cpu_session(), spec, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold << " tau " << tau);
    CHECK(tau > 1.2);
    CHECK(r.chi2 < r.threshold);
}

TEST_CASE("the sampling test catches a biased verifier that resamples from the target instead of the residual", "[speculative][sampling][long]") {
    Fixture f;
    if (!setup(f)) return;
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape::chain(2);
    spec.sampled_drafts = SampledDraftRule::kLeviathan;
    spec.residual_rule = ResidualRule::kTargetResample;
    double tau = 0;
    const FitResult r = speculative_fit(f.model, cpu_session(), spec, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold);
    CHECK(r.chi2 > r.threshold);
}

TEST_CASE("plain sampling passes the same goodness-of-fit test", "[speculative][sampling][long]") {
    Fixture f;
    if (!setup(f)) return;
    double tau = 0;
    const FitResult r = speculative_fit(f.model, cpu_session(), SpeculativeConfig{}, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold);
    CHECK(r.chi2 < r.threshold);
}

// Under a grammar (docs/grammars.md) the target's distribution is the constrained one: the first token must start a
// word of a-m after a space, the second continue it or end the text. Every drafter's tree is shaped by the grammar
// too (rejected drafts dropped, forced text added); the samples must still follow the constrained distribution.
TEST_CASE("speculative sampling under a grammar has the constrained target's distribution, for a beam tree and a coupled chain",
          "[speculative][sampling][grammar][long]") {
    Fixture f;
    if (!setup(f)) return;
    const std::string grammar = R"(root ::= " " [a-m] [a-z]*)";
    CpuRunner runner(f.model, 256, 1);
    const auto joint = exact_joint(f.model, runner, f.prompt, grammar);
    REQUIRE(joint.size() > 20);
    for (const TreeShape &shape : {TreeShape{{4, 4}}, TreeShape::chain(2)}) {
        SpeculativeConfig spec;
        spec.draft_model = f.draft;
        spec.shape = shape;
        double tau = 0;
        const FitResult r = speculative_fit(f.model, cpu_session(), spec, f.prompt, joint, kSamples, &tau, grammar);
        INFO(shape.to_string() << ": chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold << " tau " << tau);
        CHECK(tau > 1.05);  // drafts were accepted (fewer than unconstrained: the beams are not grammar-aware, some are dropped)
        CHECK(r.chi2 < r.threshold);
    }
    // The grammar matters: the unconstrained distribution fails the same test.
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape{{4, 4}};
    double tau = 0;
    const FitResult wrong = speculative_fit(f.model, cpu_session(), spec, f.prompt, f.joint, kSamples, &tau, grammar);
    CHECK(wrong.chi2 > wrong.threshold);
}
