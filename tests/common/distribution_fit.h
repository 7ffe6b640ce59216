// The goodness-of-fit machinery of the speculative-sampling tests, shared by the CPU tests (tests/unit) and the
// CUDA ones (tests/cuda): the exact joint distribution of the first two tokens computed from a runner, and a
// chi-square test of the tokens a session samples against it.
#pragma once

#include "backend/target_runner.h"
#include "session/session.h"

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace test_sampling {

using namespace specula::internal;

// grammar: a GBNF grammar the text must follow (docs/grammars.md), or none.
inline SamplerConfig sampling_config(uint64_t seed, const std::string &grammar = "") {
    SamplerConfig c;  // the whole chain stays on: top-k 40, top-p 0.98, min-p 0.01, temperature 1
    c.temperature = 1.0f;
    c.top_p = 0.98f;
    c.min_p = 0.01f;
    c.seed = seed;
    c.grammar = grammar;
    return c;
}

using Pair = std::pair<int32_t, int32_t>;

// The exact probability of every (t1, t2) the target can produce after `prompt` (under `grammar`, when given: the
// second token's distribution constrained by the grammar's state after the first).
inline std::map<Pair, double> exact_joint(const std::shared_ptr<const Model> &model, TargetRunner &runner, const std::vector<int32_t> &prompt,
                                          const std::string &grammar = "") {
    const int32_t n_vocab = model->hparams().n_vocab;
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    runner.eval(prompt.data(), int32_t(prompt.size()), 0, logits.data(), false);
    Sampler sampler(sampling_config(0, grammar));
    if (sampler.has_grammar()) sampler.bind_vocab(model->grammar_vocab());
    Candidates first, second;
    std::vector<int32_t> history = prompt;
    sampler.distribution(logits.data(), n_vocab, history, first);
    std::map<Pair, double> joint;
    for (const Candidate &a : first.items) {
        runner.eval(&a.id, 1, int32_t(prompt.size()), logits.data(), false);
        history.push_back(a.id);
        std::optional<GrammarMatcher> after;
        if (sampler.has_grammar()) {
            after = *sampler.grammar_state();
            sampler.advance(*after, a.id);
        }
        sampler.distribution(logits.data(), n_vocab, history, second, after ? &*after : nullptr);
        history.pop_back();
        for (const Candidate &b : second.items) joint[{a.id, b.id}] += double(a.p) * double(b.p);
    }
    return joint;
}

// Upper quantile of the chi-square distribution with k degrees of freedom (Wilson-Hilferty), z = normal quantile.
inline double chi_square_quantile(int k, double z) {
    const double h = 2.0 / (9.0 * k);
    return k * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
}

struct FitResult {
    double chi2 = 0;
    int dof = 0;
    double threshold = 0;
};

inline FitResult chi_square(const std::map<Pair, double> &p, const std::map<Pair, int> &counts, int n) {
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

// Samples (t1, t2) n_samples times from a session made with `sc` (seeds 1000..) and tests the counts against joint.
inline FitResult speculative_fit(const std::shared_ptr<const Model> &model, const SessionConfig &sc, const SpeculativeConfig &spec,
                          const std::vector<int32_t> &prompt, const std::map<Pair, double> &joint, int n_samples, double *tau,
                          const std::string &grammar = "") {
    Session s(model, sc, sampling_config(1, grammar));
    s.set_speculative(spec);
    GenerateConfig run;
    run.max_tokens = 2;
    run.stop_at_eog = false;
    s.configure_run(run);
    s.append_tokens(prompt.data(), prompt.size());
    std::map<Pair, int> counts;
    for (int i = 0; i < n_samples; ++i) {
        s.set_sampler(sampling_config(1000 + uint64_t(i), grammar));
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

}  // namespace test_sampling
