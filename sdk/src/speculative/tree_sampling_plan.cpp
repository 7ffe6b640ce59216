#include "tree_sampling_plan.h"

#include <algorithm>

namespace specula::internal {
namespace {

// The last `window` tokens (-1: all) of context + path, sorted.
void window_sorted(std::span<const int32_t> tokens, std::span<const int32_t> path, int32_t window, std::vector<int32_t> &out) {
    out.clear();
    const size_t total = tokens.size() + path.size();
    const size_t n = window < 0 ? total : std::min(total, size_t(window));
    const size_t from_path = std::min(n, path.size());
    out.insert(out.end(), tokens.end() - ptrdiff_t(n - from_path), tokens.end());
    out.insert(out.end(), path.end() - ptrdiff_t(from_path), path.end());
    std::sort(out.begin(), out.end());
}

size_t window_length(size_t total, int32_t window) { return window < 0 ? total : std::min(total, size_t(window)); }

}  // namespace

bool plan_tree_sampling(const DraftTree &tree, const Sampler &sampler, std::span<const int32_t> tokens, int32_t n_vocab,
                        TreeSamplingPlan &plan) {
    const SamplerConfig &c = sampler.config();
    const int32_t n = tree.size();
    if (sampler.has_grammar()) return false;  // the device walk has no grammar: the host verifier applies it
    // The device walk draws by the race (race_draw.h); llama.cpp's draws take their words in order, by the host
    // verifier's sampler.
    if (!sampler.greedy() && c.draw != DrawRule::Race) return false;
    if (!sampler.greedy())
        for (int32_t i = 0; i < n; ++i)
            if (tree.has_child_distribution(i)) return false;
    // The steps Sampler's constructor puts in its chain.
    const bool penalize = c.repeat_penalty != 1.0f || c.frequency_penalty != 0.0f || c.presence_penalty != 0.0f;
    plan.parents = tree.parents();
    plan.tokens = tree.tokens();
    plan.greedy = sampler.greedy();
    plan.penalties = penalize && c.penalty_last_n != 0;
    plan.repeat = c.repeat_penalty;
    plan.frequency = c.frequency_penalty;
    plan.presence = c.presence_penalty;
    plan.contextual = sampler.has_logit_processing();
    plan.theta = c.context_penalty;
    plan.top_k = c.top_k > 0 ? std::min(c.top_k, n_vocab) : 0;
    plan.top_p = c.top_p;
    plan.min_p = c.min_p;
    plan.temperature = c.temperature;

    const size_t longest = tokens.size() + size_t(tree.max_depth());
    if ((plan.penalties && window_length(longest, c.penalty_last_n) > size_t(kMaxPlanWindow)) ||
        (plan.contextual && window_length(longest, c.context_penalty_window) > size_t(kMaxPlanWindow)))
        return false;

    plan.edit_first.assign(1, 0);
    plan.edit_ids.clear();
    plan.edit_counts.clear();
    plan.edit_in_context.clear();
    std::vector<int32_t> path, pen, ctx;
    for (int32_t i = 0; i < n; ++i) {
        if (plan.penalties || plan.contextual) {
            // The node's history: the context, then its ancestors below the root and itself (the verifier's
            // `history` when it samples at this node).
            path.clear();
            for (int32_t a = i; a > 0; a = tree.parent(a)) path.push_back(tree.token(a));
            std::reverse(path.begin(), path.end());
            if (plan.penalties) window_sorted(tokens, path, c.penalty_last_n, pen);
            else pen.clear();
            if (plan.contextual) window_sorted(tokens, path, c.context_penalty_window, ctx);
            else ctx.clear();
            // Merge the two sorted windows into (id, count, in context), ids ascending and distinct.
            size_t a = 0, b = 0;
            while (a < pen.size() || b < ctx.size()) {
                const int32_t id = b == ctx.size() || (a < pen.size() && pen[a] < ctx[b]) ? pen[a] : ctx[b];
                int32_t count = 0;
                while (a < pen.size() && pen[a] == id) ++a, ++count;
                bool in_context = false;
                while (b < ctx.size() && ctx[b] == id) ++b, in_context = true;
                if (id < 0 || id >= n_vocab) continue;
                plan.edit_ids.push_back(id);
                plan.edit_counts.push_back(count);
                plan.edit_in_context.push_back(in_context ? 1 : 0);
            }
        }
        plan.edit_first.push_back(int32_t(plan.edit_ids.size()));
    }
    plan.keys.clear();
    if (!plan.greedy) plan.keys = sampler.peek_keys(size_t(tree.max_depth()) + 1);
    return true;
}

}  // namespace specula::internal
