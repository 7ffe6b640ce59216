// The one interface every drafter implements: given the context, propose a tree of continuations of its last
// token. Drafters never decide what is emitted; the verifier does, against the target (see verifier.h), so a
// drafter can be arbitrarily bad without changing a single output token, only the speed.
#pragma once

#include "core/error.h"
#include "speculative/draft_tree.h"
#include "speculative/tree_shape.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

namespace specula::internal {

class Sampler;
class TargetRunner;

// What a drafter may look at for one round.
struct DraftRequest {
    // The whole context. tokens.back() is the root: generated, not yet evaluated by the target.
    std::span<const int32_t> tokens;
    // The target's KV cache holds positions [0, n_target_kv) (= tokens.size() - 1): the committed tokens.
    // LongSpec's cross-attention reads one layer of it (where its backend keeps it: TargetRunner::
    // make_longspec_drafter), and never anything at or beyond n_target_kv.
    int32_t n_target_kv = 0;
    // Level widths of the tree to build (beam search), and the most nodes the tree may have, root included.
    TreeShape shape;
    int32_t node_budget = 1;
    // Applied to the drafter's raw logits before it ranks or samples candidates, with the history the token
    // would have (context + path). Set when the sampler has a step that must act identically on draft and
    // target (TokenSwift's contextual penalty). May be empty.
    std::function<void(float *logits, std::span<const int32_t> history)> process_logits;
    // The newest context tokens process_logits / the sampler look at (-1 = all): drafters pass only that tail
    // plus the path as history, so a round does not copy a 100K-token context per node.
    int32_t history_window = -1;
    // Non-null when the target samples (T > 0) and the drafter may sample a chain from its own distribution q
    // (the sampler's chain on its logits). Drafters that only rank deterministically ignore it. How the chain's
    // tokens are drawn (verifier.h): with draw_keys, level d's with sampler->draw_keyed(q, draw_keys[d]), the key the
    // target draws that position with (the coupled rule; nothing recorded, the generator untouched); without,
    // with sampler->draw(q), recording q in the tree for the Leviathan rule.
    Sampler *sampler = nullptr;
    std::vector<uint64_t> draw_keys;
};

class Drafter {
public:
    virtual ~Drafter() = default;
    virtual const char *name() const = 0;
    // Fills `tree` (already reset to the root) with at most request.node_budget nodes in total.
    virtual void draft(const DraftRequest &request, DraftTree &tree) = 0;
    // The context was cut to its first n_tokens tokens: forget anything derived from later ones.
    virtual void rewind(int32_t n_tokens) = 0;
    // Brings what the drafter derives from the committed tokens up to date now (the session calls it after it
    // evaluated a prompt, as part of prompt processing), so that the first round does not pay for the prompt.
    // Returns how many tokens it evaluated (a draft model: those its cache lacked), or -1 for drafters that read
    // the context only when they draft (n-gram tables, LongSpec's window).
    virtual int32_t prefill(std::span<const int32_t> committed) {
        (void)committed;
        return -1;
    }
    // The most tokens catching up evaluates, however far behind the drafter is (a draft model: every token it
    // missed; LongSpec: its ring of the last window + 1 tokens), so that --tree auto charges a resume what it costs.
    virtual int32_t catch_up_bound() const { return std::numeric_limits<int32_t>::max(); }
    // A merged drafter: the nodes (root included) of the last tree that its model drafter drafted, before the
    // n-gram drafter added its own (they come first: nodes [0, model_part_size())); -1 for other drafters.
    virtual int32_t model_part_size() const { return -1; }
    // The session shifted its full context (backend/kv_shift.h): tokens [keep, keep + discard) were dropped
    // and the later ones moved down by discard. By default the drafter forgets what it derived from tokens after
    // `keep` and catches up from the new context on its next round; a drafter with its own cache of the whole
    // context shifts that cache the same way instead.
    virtual void shift(int32_t keep, int32_t discard) {
        (void)discard;
        rewind(keep);
    }
    // Bytes the drafter holds now (buffers, caches, tables), for memory reports and tests.
    virtual size_t allocated_bytes() const = 0;
    // The drafter's raw next-token logits at the root (request.tokens.back()), exactly as the first step of
    // draft() computes them, into n_vocab floats. For tools and tests (a trainer checks its own forward pass
    // against this). Returns false for drafters without one such distribution (n-gram tables, merged drafters).
    virtual bool root_logits(const DraftRequest &request, float *logits) {
        (void)request;
        (void)logits;
        return false;
    }

    // Snapshots (session/session_snapshot.cpp): what the drafter derived from the context, so that a loaded
    // session drafts exactly as the saved one would have. save_state() returns it as bytes. check_state() takes
    // bytes that save_state() wrote in a drafter of the same configuration, for a context of n_tokens tokens, and
    // throws Error(FORMAT) unless load_state() can apply them; it returns how many slots of the drafter's own KV
    // cache (own_cache(), e.g. a draft model's) the state says are filled: the session saves and loads those rows
    // in chunks, as it does the target's. load_state() applies checked bytes and cannot fail on their account.
    virtual std::vector<uint8_t> save_state() const { return {}; }
    virtual int32_t check_state(std::span<const uint8_t> state, int32_t n_tokens) const;
    virtual void load_state(std::span<const uint8_t> state) { (void)state; }
    virtual TargetRunner *own_cache() { return nullptr; }
    virtual int32_t own_cache_slots() const { return 0; }
};

inline int32_t Drafter::check_state(std::span<const uint8_t> state, int32_t n_tokens) const {
    (void)n_tokens;
    require(state.empty(), SPECULA_ERR_FORMAT,
            std::string("snapshot: the '") + name() + "' drafter keeps no state, but the snapshot holds " + std::to_string(state.size()) + " bytes for it");
    return 0;
}

}  // namespace specula::internal
