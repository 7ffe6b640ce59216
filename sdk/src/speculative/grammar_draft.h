// A drafted tree under a grammar (docs/grammars.md): the nodes whose token the grammar's state after their parent
// rejects are dropped with their subtrees (the verifier could never accept them: the constrained distribution
// gives them no weight), and each remaining leaf is extended along the text the grammar forces there (what it
// admits in exactly one way: JSON punctuation, a schema's fixed keys, closing brackets), spelled as the model spelled
// the same forced text before (GrammarSpellings), else with the vocabulary's longest matching tokens. Those forced
// tokens cost no drafter; the verifier checks them like any other draft, so the output is the same with and without
// them.
#pragma once

#include "sampling/sampler.h"
#include "speculative/draft_tree.h"
#include "speculative/drafter.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace specula::internal {

// How the model spelled forced text: forced text -> the tokens it wrote from there until the text was covered (the
// last one may run past it: `"` forced, the model writes `":`). The longest matching tokens are often not what a
// model writes (it splits `{"` as `{` then `"`, or joins a forced quote with the colon after it), so drafting its own
// earlier spelling is accepted far more often where the same text comes again (a schema's keys in every record).
// Learned from committed tokens only, so it holds nothing a drafter could not know. At most kMaxEntries entries
// (forgotten all at once beyond) of at most kMaxForcedBytes of text each: about 1 MB at worst, a few KB for a
// schema's keys.
class GrammarSpellings {
public:
    static constexpr size_t kMaxEntries = 4096;
    static constexpr size_t kMaxForcedBytes = 256;

    const std::vector<int32_t> *find(const std::string &forced) const;
    // state: the grammar's state before tokens[0]. Each position whose forced text the tokens cover whole is learned.
    void learn(const GrammarMatcher &state, const Sampler &sampler, std::span<const int32_t> tokens);
    void clear() { spelled_.clear(); }
    size_t size() const { return spelled_.size(); }

private:
    std::unordered_map<std::string, std::vector<int32_t>> spelled_;
};

struct GrammarDraftCounts {
    int32_t pruned = 0;  // drafted nodes dropped (with their subtrees)
    int32_t forced = 0;  // nodes the grammar drafted
};

// tree: a drafted tree whose root is the context's last token (the sampler's grammar state follows it). A tree
// with sampled (Leviathan) chains is left as it is. Forced nodes are added while the tree has fewer than max_nodes
// nodes and is shallower than max_depth, at most max_forced of them, deepest leaves first; forced[i] says whether
// node i of the result was. spellings (may be null): the model's earlier spellings of forced text, drafted where
// they apply. Without a grammar nothing changes.
GrammarDraftCounts shape_tree_by_grammar(DraftTree &tree, const Sampler &sampler, int32_t max_nodes, int32_t max_depth, int32_t max_forced,
                                         std::vector<uint8_t> &forced, const GrammarSpellings *spellings = nullptr);

// The grammar as a drafter of its own (SpeculativeConfig::grammar without another drafter): it drafts nothing
// itself, and each round's tree is the text the grammar forces after the root (shape_tree_by_grammar). Named
// "grammar"; keeps no state of its own.
std::unique_ptr<Drafter> make_grammar_drafter();

}  // namespace specula::internal
