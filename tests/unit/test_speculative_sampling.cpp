// Lossless speculative *sampling*: the joint distribution of the first two generated tokens under speculative
// decoding equals the target's own distribution (after the whole sampler chain), by a chi-square
// goodness-of-fit test against the exact distribution computed from the target, with fixed seeds. Covered:
// the tree rule (deterministic beam children, sample-and-match) and the chain rule (drafts sampled from an
// independent draft model, Leviathan accept/reject with the residual); and a negative control: the same chain
// with LongSpec's reference bug (resampling from p instead of the residual) fails the same test.
#include "backends/cpu/cpu_runner.h"
#include "common/fixture_files.h"
#include "session/session.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <vector>

using namespace specula::internal;

namespace {

SamplerConfig sampling_config(uint64_t seed) {
    SamplerConfig c;  // the whole chain stays on: top-k 40, top-p 0.98, min-p 0.01, temperature 1
    c.temperature = 1.0f;
    c.top_p = 0.98f;
    c.min_p = 0.01f;
    c.seed = seed;
    return c;
}

using Pair = std::pair<int32_t, int32_t>;

// The exact probability of every (t1, t2) the target can produce after `prompt`.
std::map<Pair, double> exact_joint(const std::shared_ptr<const Model> &model, const std::vector<int32_t> &prompt) {
    const int32_t n_vocab = model->hparams().n_vocab;
    CpuRunner runner(model, 256, 1);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    runner.eval(prompt.data(), int32_t(prompt.size()), 0, logits.data(), false);
    Sampler sampler(sampling_config(0));
    Candidates first, second;
    std::vector<int32_t> history = prompt;
    sampler.distribution(logits.data(), n_vocab, history, first);
    std::map<Pair, double> joint;
    for (const Candidate &a : first.items) {
        runner.eval(&a.id, 1, int32_t(prompt.size()), logits.data(), false);
        history.push_back(a.id);
        sampler.distribution(logits.data(), n_vocab, history, second);
        history.pop_back();
        for (const Candidate &b : second.items) joint[{a.id, b.id}] += double(a.p) * double(b.p);
    }
    return joint;
}

// Upper quantile of the chi-square distribution with k degrees of freedom (Wilson-Hilferty), z = normal quantile.
double chi_square_quantile(int k, double z) {
    const double h = 2.0 / (9.0 * k);
    return k * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
}

struct FitResult {
    double chi2 = 0;
    int dof = 0;
    double threshold = 0;
};

FitResult chi_square(const std::map<Pair, double> &p, const std::map<Pair, int> &counts, int n) {
    FitResult r;
    double other_expected = 0, other_observed = 0;
    int bins = 0;
    for (const auto &[pair, prob] : p) {
        const double expected = prob * n;
        const auto it = counts.find(pair);
        const double observed = it == counts.end() ? 0 : it->second;
        if (expected >= 5) {
            r.chi2 += (observed - expected) * (observed - expected) / expected;
            ++bins;
        } else {
            other_expected += expected;
            other_observed += observed;
        }
    }
    for (const auto &[pair, c] : counts)
        if (!p.count(pair)) other_observed += c;  // impossible pairs: any count here is a failure
    if (other_expected > 0) {
        r.chi2 += (other_observed - other_expected) * (other_observed - other_expected) / other_expected;
        ++bins;
    } else if (other_observed > 0) {
        r.chi2 = INFINITY;
    }
    r.dof = bins - 1;
    r.threshold = chi_square_quantile(r.dof, 3.719);  // p = 1e-4
    return r;
}

FitResult speculative_fit(const std::shared_ptr<const Model> &model, const SpeculativeConfig &spec, const std::vector<int32_t> &prompt,
                          const std::map<Pair, double> &joint, int n_samples, double *tau) {
    SessionConfig sc;
    sc.n_ctx = 256;
    sc.n_threads = 1;
    Session s(model, sc, sampling_config(1));
    s.set_speculative(spec);
    GenerateConfig run;
    run.max_tokens = 2;
    run.stop_at_eog = false;
    s.configure_run(run);
    s.append_tokens(prompt.data(), prompt.size());
    std::map<Pair, int> counts;
    for (int i = 0; i < n_samples; ++i) {
        s.set_sampler(sampling_config(1000 + uint64_t(i)));
        s.rewind(int32_t(prompt.size()));
        s.begin_run();
        int32_t t[2] = {-1, -1};
        for (int k = 0; k < 2; ++k) {
            StepResult r;
            s.step(r);
            t[k] = r.token;
        }
        ++counts[{t[0], t[1]}];
    }
    const SpeculativeStats &st = s.speculative_stats();
    *tau = st.rounds ? double(st.produced) / st.rounds : 0;
    return chi_square(joint, counts, n_samples);
}

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
    f.joint = exact_joint(f.model, f.prompt);
    return true;
}

constexpr int kSamples = 20000;

}  // namespace

TEST_CASE("speculative sampling with a beam tree has the target's distribution", "[speculative][sampling][slow]") {
    Fixture f;
    if (!setup(f)) return;
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape{{4, 4}};
    double tau = 0;
    const FitResult r = speculative_fit(f.model, spec, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold << " tau " << tau);
    CHECK(tau > 1.2);  // drafts were really accepted, not just bonus tokens
    CHECK(r.chi2 < r.threshold);
}

TEST_CASE("speculative sampling with a sampled chain and the Leviathan rule has the target's distribution", "[speculative][sampling][slow]") {
    Fixture f;
    if (!setup(f)) return;
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape::chain(2);
    double tau = 0;
    const FitResult r = speculative_fit(f.model, spec, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold << " tau " << tau);
    CHECK(tau > 1.2);
    CHECK(r.chi2 < r.threshold);
}

TEST_CASE("the sampling test catches a biased verifier that resamples from the target instead of the residual", "[speculative][sampling][slow]") {
    Fixture f;
    if (!setup(f)) return;
    SpeculativeConfig spec;
    spec.draft_model = f.draft;
    spec.shape = TreeShape::chain(2);
    spec.residual_rule = ResidualRule::kTargetResample;
    double tau = 0;
    const FitResult r = speculative_fit(f.model, spec, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold);
    CHECK(r.chi2 > r.threshold);
}

TEST_CASE("plain sampling passes the same goodness-of-fit test", "[speculative][sampling][slow]") {
    Fixture f;
    if (!setup(f)) return;
    double tau = 0;
    const FitResult r = speculative_fit(f.model, SpeculativeConfig{}, f.prompt, f.joint, kSamples, &tau);
    INFO("chi2 " << r.chi2 << " dof " << r.dof << " threshold(p=1e-4) " << r.threshold);
    CHECK(r.chi2 < r.threshold);
}
