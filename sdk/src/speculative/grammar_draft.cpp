#include "speculative/grammar_draft.h"

#include <algorithm>
#include <numeric>
#include <optional>

namespace specula::internal {

const std::vector<int32_t> *GrammarSpellings::find(const std::string &forced) const {
    const auto it = spelled_.find(forced);
    return it == spelled_.end() ? nullptr : &it->second;
}

void GrammarSpellings::learn(const GrammarMatcher &state, const Sampler &sampler, std::span<const int32_t> tokens) {
    const GrammarVocab *vocab = sampler.grammar_vocab();
    if (vocab == nullptr) return;
    GrammarMatcher at = state;
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (!at.can_end()) {
            const std::string text = at.forced_text(kMaxForcedBytes);
            if (!text.empty()) {
                // The tokens from i that cover the forced text (their pieces start with it: the grammar forced it).
                std::string written;
                size_t j = i;
                while (j < tokens.size() && written.size() < text.size()) written += vocab->piece(tokens[j++]);
                if (written.size() >= text.size() && written.compare(0, text.size(), text) == 0) {
                    if (spelled_.size() >= kMaxEntries && !spelled_.count(text)) spelled_.clear();
                    spelled_[text].assign(tokens.begin() + std::ptrdiff_t(i), tokens.begin() + std::ptrdiff_t(j));
                }
            }
        }
        if (!sampler.allows(&at, tokens[i])) return;
        sampler.advance(at, tokens[i]);
    }
}

GrammarDraftCounts shape_tree_by_grammar(DraftTree &tree, const Sampler &sampler, int32_t max_nodes, int32_t max_depth, int32_t max_forced,
                                         std::vector<uint8_t> &forced, const GrammarSpellings *spellings) {
    GrammarDraftCounts counts;
    forced.assign(size_t(tree.size()), 0);
    if (!sampler.has_grammar() || sampler.grammar_vocab() == nullptr) return counts;
    for (int32_t i = 0; i < tree.size(); ++i)
        if (tree.has_child_distribution(i)) return counts;

    // 1. The grammar's state after each node (parents come before children); a node it rejects is dropped, and
    // with it every node below.
    const int32_t n = tree.size();
    std::vector<std::optional<GrammarMatcher>> state(static_cast<size_t>(n));
    state[0] = *sampler.grammar_state();
    DraftTree kept;
    kept.reset(tree.token(0));
    std::vector<int32_t> new_index(size_t(n), -1);
    new_index[0] = 0;
    std::vector<std::optional<GrammarMatcher>> kept_state(1);
    kept_state[0] = state[0];
    for (int32_t i = 1; i < n; ++i) {
        const int32_t p = tree.parent(i);
        if (!state[size_t(p)] || !sampler.allows(&*state[size_t(p)], tree.token(i))) {
            ++counts.pruned;
            continue;
        }
        state[size_t(i)] = *state[size_t(p)];
        sampler.advance(*state[size_t(i)], tree.token(i));
        new_index[size_t(i)] = kept.add(new_index[size_t(p)], tree.token(i));
        if (size_t(new_index[size_t(i)]) >= kept_state.size()) kept_state.resize(size_t(new_index[size_t(i)]) + 1);
        kept_state[size_t(new_index[size_t(i)])] = state[size_t(i)];
    }
    if (counts.pruned > 0) tree = kept;
    forced.assign(size_t(tree.size()), 0);

    // 2. The leaves, deepest first, each followed by what the grammar forces after it.
    std::vector<int32_t> leaves;
    for (int32_t i = 0; i < tree.size(); ++i)
        if (tree.is_leaf(i)) leaves.push_back(i);
    std::stable_sort(leaves.begin(), leaves.end(), [&](int32_t a, int32_t b) { return tree.depth(a) > tree.depth(b); });
    const GrammarVocab &vocab = *sampler.grammar_vocab();
    // Whether another forced node fits below `node`.
    const auto room_below = [&](int32_t node) {
        return counts.forced < max_forced && tree.size() < max_nodes && tree.depth(node) < max_depth;
    };
    // The forced token below `node` (a child already drafted with that token is reused, not counted).
    const auto add_forced = [&](int32_t node, int32_t token) {
        const int32_t before = tree.size();
        const int32_t child = tree.add(node, token);
        forced.resize(size_t(tree.size()), 0);
        if (tree.size() > before) {
            forced[size_t(child)] = 1;
            ++counts.forced;
        }
        return child;
    };
    for (const int32_t leaf : leaves) {
        if (!room_below(leaf)) continue;
        const GrammarMatcher &at = *kept_state[size_t(leaf)];
        if (at.can_end()) continue;  // the end is possible: nothing is forced
        const std::string text = at.forced_text(GrammarSpellings::kMaxForcedBytes);
        if (text.empty()) continue;
        int32_t node = leaf;
        // The model's own earlier spelling of this text, as far as the grammar allows it here (its last token may
        // run past the text into what this state refuses) and the budgets reach; the longest tokens when it gives none.
        if (const std::vector<int32_t> *spelled = spellings ? spellings->find(text) : nullptr) {
            GrammarMatcher m = at;
            for (const int32_t token : *spelled) {
                if (!room_below(node) || !sampler.allows(&m, token)) break;
                sampler.advance(m, token);
                node = add_forced(node, token);
            }
            if (node != leaf) continue;
        }
        size_t pos = 0;
        while (pos < text.size() && room_below(node)) {
            size_t len = 0;
            const int32_t token = vocab.longest_prefix_token(std::string_view(text).substr(pos), len);
            if (token < 0) break;
            node = add_forced(node, token);
            pos += len;
        }
    }
    return counts;
}

namespace {

class GrammarDrafter final : public Drafter {
public:
    const char *name() const override { return "grammar"; }
    void draft(const DraftRequest &request, DraftTree &tree) override {
        (void)request;
        (void)tree;
    }
    void rewind(int32_t n_tokens) override { (void)n_tokens; }
    size_t allocated_bytes() const override { return 0; }
};

}  // namespace

std::unique_ptr<Drafter> make_grammar_drafter() { return std::make_unique<GrammarDrafter>(); }

}  // namespace specula::internal
