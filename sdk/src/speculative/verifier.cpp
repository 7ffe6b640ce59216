#include "verifier.h"

#include "core/error.h"

#include <optional>

namespace specula::internal {
namespace {

// Draws from the weights w (not necessarily normalised) over the candidates' ids.
int32_t draw(const std::vector<Candidate> &items, const std::vector<double> &w, double total, double u) {
    double cumulative = 0.0;
    for (size_t i = 0; i < items.size(); ++i) {
        cumulative += w[i];
        if (u * total < cumulative) return items[i].id;
    }
    for (size_t i = items.size(); i-- > 0;)
        if (w[i] > 0) return items[i].id;
    return items.back().id;
}

}  // namespace

VerifyOutcome verify_tree(const DraftTree &tree, const float *logits, int32_t n_vocab, Sampler &sampler,
                          std::vector<int32_t> &history, ResidualRule rule) {
    return verify_tree(
        tree, [&](int32_t node) { return logits + size_t(node) * size_t(n_vocab); }, n_vocab, sampler, history, rule);
}

VerifyOutcome verify_tree(const DraftTree &tree, const std::function<const float *(int32_t node)> &row_of, int32_t n_vocab,
                          Sampler &sampler, std::vector<int32_t> &history, ResidualRule rule) {
    VerifyOutcome result;
    const size_t history_size = history.size();
    Candidates p;
    // With a grammar, a node's distribution is constrained by the grammar's state after its path (the sampler's
    // state, then each accepted token).
    std::optional<GrammarMatcher> grammar;
    if (sampler.has_grammar()) grammar = *sampler.grammar_state();
    const GrammarMatcher *state = grammar ? &*grammar : nullptr;
    auto descend = [&](int32_t token) {
        history.push_back(token);
        if (grammar) sampler.advance(*grammar, token);
    };
    int32_t node = 0;
    for (;;) {
        const float *row = row_of(node);
        if (tree.has_child_distribution(node) && !sampler.greedy()) {
            // A sampled draft: the Leviathan accept/reject rule.
            const std::vector<float> &q = tree.child_distribution(node);
            int32_t child = -1;
            for (int32_t c = node + 1; c < tree.size() && child < 0; ++c)
                if (tree.parent(c) == node) child = c;
            require(child >= 0 && q.size() == size_t(n_vocab), SPECULA_ERR_INTERNAL, "verifier: malformed sampled draft");
            sampler.distribution(row, n_vocab, history, p, state);
            const int32_t token = tree.token(child);
            double p_token = 0.0;
            for (const Candidate &c : p.items)
                if (c.id == token) p_token = c.p;
            const double q_token = q[size_t(token)];
            const double u = sampler.uniform();
            if (q_token > 0.0 && u * q_token < p_token) {
                result.path.push_back(child);
                descend(token);
                node = child;
                continue;
            }
            std::vector<double> w(p.items.size());
            double total = 0.0;
            for (size_t i = 0; i < p.items.size(); ++i) {
                const double r = rule == ResidualRule::kExact ? double(p.items[i].p) - double(q[size_t(p.items[i].id)])
                                                              : double(p.items[i].p);
                w[i] = r > 0.0 ? r : 0.0;
                total += w[i];
            }
            if (total <= 0.0) {  // p == q up to rounding: the residual is empty, p itself is exact
                for (size_t i = 0; i < p.items.size(); ++i) w[i] = p.items[i].p;
                total = 1.0;
            }
            result.bonus = draw(p.items, w, total, sampler.uniform());
            break;
        }
        const int32_t y = sampler.sample(row, n_vocab, history, state);
        const int32_t child = tree.find_child(node, y);
        if (child < 0) {
            result.bonus = y;
            break;
        }
        result.path.push_back(child);
        descend(y);
        node = child;
    }
    history.resize(history_size);
    return result;
}

}  // namespace specula::internal
