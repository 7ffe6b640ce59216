#include "beam_tree.h"

#include "core/error.h"
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace specula::internal {
namespace {

struct Scored {
    float logp;  // cumulative
    int32_t parent;
    int32_t token;
};

// Context + the tokens on the path from the root's child down to `node`.
void path_history(const DraftTree &tree, int32_t node, std::span<const int32_t> context, int32_t window, std::vector<int32_t> &out) {
    if (window >= 0 && size_t(window) < context.size()) context = context.subspan(context.size() - size_t(window));
    out.assign(context.begin(), context.end());
    const size_t base = out.size();
    for (int32_t n = node; n > 0; n = tree.parent(n)) out.push_back(tree.token(n));
    std::reverse(out.begin() + std::ptrdiff_t(base), out.end());
}

void log_softmax(float *x, int32_t n) {
    float max = -INFINITY;
    for (int32_t i = 0; i < n; ++i) max = std::max(max, x[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(double(x[i] - max));
    const float lse = max + float(std::log(sum));
    for (int32_t i = 0; i < n; ++i) x[i] -= lse;
}

bool better(const Scored &a, const Scored &b) {
    if (a.logp != b.logp) return a.logp > b.logp;
    if (a.parent != b.parent) return a.parent < b.parent;
    return a.token < b.token;
}

// The level's children: the pool's best `width` (ties: lower parent, then lower token), added in parent order so
// that every level is contiguous and parents precede children.
void keep_best(std::vector<Scored> &pool, int32_t width, DraftTree &tree, std::vector<float> &cum) {
    const size_t keep = std::min(pool.size(), size_t(width));
    std::partial_sort(pool.begin(), pool.begin() + std::ptrdiff_t(keep), pool.end(), better);
    pool.resize(keep);
    std::sort(pool.begin(), pool.end(), [](const Scored &a, const Scored &b) {
        return a.parent != b.parent ? a.parent < b.parent : better(a, b);
    });
    for (const Scored &s : pool) {
        const int32_t before = tree.size();
        tree.add(s.parent, s.token);
        if (tree.size() > before) cum.push_back(s.logp);
    }
}

}  // namespace

void build_beam_tree(const DraftRequest &request, DraftTree &tree, int32_t n_vocab, int32_t row_stride, int32_t target_vocab,
                     const ScoreLevelFn &score_level, const ScoreTopkFn &score_topk) {
    const TreeShape &shape = request.shape;
    const bool sample_chain = request.sampler != nullptr && !request.sampler->greedy() && shape.is_chain();
    std::vector<float> cum(1, 0.0f);  // cumulative log-probability per node
    std::vector<float> logits;
    std::vector<int32_t> history;
    std::vector<Scored> pool;
    std::vector<int32_t> ids;  // one row's candidate ids, reused for every node
    std::vector<float> cand_logp;  // the level's candidates when the scorer ranks them (score_topk)
    std::vector<int32_t> cand_ids;
    const bool may_topk = score_topk && !sample_chain && !request.process_logits;
    Candidates q;
    // A sampled chain under a grammar: q is constrained by the grammar's state after the chain so far, as the
    // target's distribution at that node will be.
    std::optional<GrammarMatcher> grammar;
    if (sample_chain && request.sampler->has_grammar()) grammar = *request.sampler->grammar_state();
    int32_t first = 0, count = 1;  // the level whose children are chosen next
    for (int32_t level = 0; level < shape.depth() && tree.size() < request.node_budget; ++level) {
        const int32_t width = std::min(shape.widths[size_t(level)], request.node_budget - tree.size());
        const int32_t next_first = tree.size();
        const int32_t k = std::min(width, n_vocab);  // each row's candidates: the global best `width` are among them
        if (may_topk) {
            cand_logp.resize(size_t(count) * size_t(k));
            cand_ids.resize(cand_logp.size());
            if (score_topk(tree, first, count, k, cand_logp.data(), cand_ids.data())) {
                pool.clear();
                for (int32_t r = 0; r < count; ++r) {
                    const int32_t node = first + r;
                    for (int32_t i = 0; i < k; ++i) {
                        const size_t at = size_t(r) * size_t(k) + size_t(i);
                        if (cand_ids[at] < 0) continue;  // past the vocabulary (not with k <= n_vocab)
                        pool.push_back({cum[size_t(node)] + cand_logp[at], node, cand_ids[at]});
                    }
                }
                keep_best(pool, width, tree, cum);
                first = next_first;
                count = tree.size() - next_first;
                if (count == 0) break;
                continue;
            }
        }
        logits.resize(size_t(count) * size_t(row_stride));
        score_level(tree, first, count, logits.data());
        if (sample_chain) {
            // Sampled chain: one child drawn from q = the sampler chain on the draft logits.
            float *row = logits.data();
            path_history(tree, first, request.tokens, request.history_window, history);
            if (grammar) {
                // The draft may give every token the grammar allows no weight (e.g. ids past its vocabulary): the
                // chain then ends here.
                try {
                    request.sampler->distribution(row, n_vocab, history, q, &*grammar);
                } catch (const Error &e) {
                    if (e.status() != SPECULA_ERR_INVALID_ARGUMENT) throw;
                    break;
                }
            } else {
                request.sampler->distribution(row, n_vocab, history, q);
            }
            if (!request.draw_keys.empty()) {
                // Coupled: the race the target runs at this depth, with q's clocks (verifier.h).
                if (size_t(level) >= request.draw_keys.size()) break;
                const int32_t token = request.sampler->draw_keyed(q, request.draw_keys[size_t(level)]);
                first = tree.add(first, token);
                if (grammar) request.sampler->advance(*grammar, token);
                cum.push_back(0.0f);
                count = 1;
                continue;
            }
            std::vector<float> dense(size_t(target_vocab), 0.0f);
            for (const Candidate &c : q.items) dense[size_t(c.id)] = c.p;
            const int32_t token = request.sampler->draw(q);
            const int32_t child = tree.add(first, token);
            tree.set_child_distribution(first, std::move(dense));
            if (grammar) request.sampler->advance(*grammar, token);
            cum.push_back(0.0f);
            first = child;
            count = 1;
            continue;
        }
        pool.clear();
        for (int32_t r = 0; r < count; ++r) {
            const int32_t node = first + r;
            float *row = logits.data() + size_t(r) * size_t(row_stride);
            if (request.process_logits) {
                path_history(tree, node, request.tokens, request.history_window, history);
                request.process_logits(row, history);
            }
            log_softmax(row, n_vocab);
            // This row's best `width` candidates; the global best `width` are among the union of these.
            ids.resize(size_t(n_vocab));
            std::iota(ids.begin(), ids.end(), 0);
            std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
                return row[a] > row[b] || (row[a] == row[b] && a < b);
            });
            for (int32_t i = 0; i < k; ++i) pool.push_back({cum[size_t(node)] + row[ids[size_t(i)]], node, ids[size_t(i)]});
        }
        keep_best(pool, width, tree, cum);
        first = next_first;
        count = tree.size() - next_first;
        if (count == 0) break;
    }
}

}  // namespace specula::internal
