// A drafted tree under a grammar (docs/grammars.md): the nodes whose token the grammar's state after their parent
// rejects are dropped with their subtrees (the verifier could never accept them: the constrained distribution
// gives them no weight), and each remaining leaf is extended along the text the grammar forces there (what it
// admits in exactly one way: JSON punctuation, a schema's fixed keys, closing brackets), spelled with the
// vocabulary's longest matching tokens. Those forced tokens cost no drafter; the verifier checks them like any other
// draft, so the output is the same with and without them.
#pragma once

#include "sampling/sampler.h"
#include "speculative/draft_tree.h"

#include <cstdint>
#include <vector>

namespace specula::internal {

struct GrammarDraftCounts {
    int32_t pruned = 0;  // drafted nodes dropped (with their subtrees)
    int32_t forced = 0;  // nodes the grammar drafted
};

// tree: a drafted tree whose root is the context's last token (the sampler's grammar state follows it). A tree
// with sampled (Leviathan) chains is left as it is. Forced nodes are added while the tree has fewer than max_nodes
// nodes and is shallower than max_depth, at most max_forced of them, deepest leaves first; forced[i] says whether
// node i of the result was. Without a grammar nothing changes.
GrammarDraftCounts shape_tree_by_grammar(DraftTree &tree, const Sampler &sampler, int32_t max_nodes, int32_t max_depth, int32_t max_forced,
                                         std::vector<uint8_t> &forced);

}  // namespace specula::internal
