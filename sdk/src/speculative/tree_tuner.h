// "--tree auto": which tree to draft in the next round, chosen from what this session has measured, to get the
// most tokens per second. Speculation is lossless whatever tree is drafted, so this only changes the speed.
//
// A round of tree T costs draft(T) + verify(n(T)) and produces E(T) tokens (the accepted path and the bonus);
// plain decoding is the tree with no drafted node: cost verify(1), one token. The tuner keeps
//   - verify(n): the target's pass over n tree nodes at the current context, a curve of measured points (node
//     counts in power-of-two buckets, recent rounds weighted most), interpolated between them and extrapolated
//     along the last measured slope (before two points exist, with a slope of kPriorSlope x verify(1) per node);
//   - draft(T): a least-squares fit of the draft's time to (levels, rows scored) of the rounds drafted so far, the
//     constant term covering the n-gram drafter, whose cost does not depend on the tree;
//   - E(T): for chains, the acceptance at each depth given the depth above was accepted, pooled over every chain
//     played (a chain of k levels is the first k levels of a longer one); for other trees and every shape with
//     n-gram nodes, the tokens per round measured on that shape, never below what a tree it holds gets (a wider
//     or deeper tree accepts at least as much), starting from an optimistic guess bounded by what is known
//     (guess_tokens, weighted as one round), so that a promising shape is tried and a few unlucky rounds do
//     not bury it. Rounds in which the drafter proposed nothing (no n-gram match) are one-node passes whatever
//     the shape: they only update verify(1).
// Each round takes the shape with the highest E(T) / (draft(T) + verify(n(T))), plain decoding included: when
// nothing pays, the session decodes plainly. Only shapes within reach of the measured curve are candidates: up to
// kFirstReach nodes at first, then up to twice the most nodes a round has verified, so the curve is learned one
// doubling at a time instead of from a guess about a tree eight times larger. A shape that is not the best is
// re-measured now and then (a probe, with a back-off that doubles each time it is still not the best), so that the
// estimates follow the text and the context length; what a shape measured fades with the rounds since, back
// toward its guess. While plain decoding is the best measured choice, probes may lose at most 1% of the time, net
// (measured: a probe's time minus what plain decoding would have taken for its tokens; a probe that gained gives
// credit), and a probe is made only if what it is expected to lose, a drafter's catch-up included, fits; a shape
// that looks best on its guess alone (not played yet, or not for long) is such a probe. A model drafter idle for a
// stretch must catch up before it drafts (a draft model evaluates the tokens it missed): such a resume round is
// kept out of the draft-time fit and its excess, per token caught up, is charged to the model shapes while the
// stretch lasts, for at most the tokens the drafter evaluates (set_catch_up_bound(): LongSpec writes its ring only).
//
// Counterfactual rounds: the text a session emits does not depend on what was drafted (speculative/verifier.h), so
// once the tokens after a root are emitted, what an n-gram proposal made at that root would have had accepted is
// known exactly (the longest path of its tree the emitted tokens follow). The session drafts the n-gram-only
// choices (shadow_choices()) beside rounds that do not play them, where that costs little (microseconds against a
// decode step; n-grams need nothing verified), and reports each with record_shadow() once settled: their tokens per
// round follow the text without a probe. Without them, an n-gram share tried once while the text had not started
// repeating itself (code often does, a few lines in) looks poor, and while plain decoding is best probes are
// rationed: a 128-token completion stayed plain throughout where n-grams would have run 1.3x faster.
//
// The same holds for the model part of a merged round (record_model_part()): how deep the model's tree alone would
// have been accepted is known once the round's tokens are out, so a chain merged with n-gram nodes also measures the
// chain alone, which otherwise is learned only by playing it. And the other way round (record_merged_shadow()): a
// round that drafted a chain, beside the n-gram shadows of its root, tells what every chain merged with each share
// would have accepted, so the merged shapes are measured on every such round, not only when played.
//
// What one session learned starts the next (knowledge(), learn()): sessions of the same target, drafters and machine
// settings in a process (a server's slots, an editor's completions, a benchmark's rows) hand it on through the
// process's TunerMemory (speculative/tuner_memory.h). A 128-token completion is 30-40 rounds, and a session starting
// from nothing spent ~20 of them learning the chain's acceptance depth by depth and the verify curve one doubling at a
// time; with what an earlier session measured it plays the best shape from its first round. What is handed on counts
// as a few rounds (kCarry*), so the session's own rounds take over quickly where its text or context differ: the
// verify curve serves only for node counts this session has not verified yet, scaled by how its own passes compare
// (the context may have grown), and only when saved at a context within a factor of kCarryContext of this one.
//
// The tuner never sees tokens or the clock: the session reports each round's measured times and its accepted
// length, so tests can drive it with any cost model.
#pragma once

#include "speculative/tree_shape.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace specula::internal {

// One candidate tree: the model drafter's levels (empty: none) and the nodes given to n-gram candidates.
struct TreeChoice {
    TreeShape shape{{}};
    int32_t ngram_nodes = 0;

    bool plain() const { return shape.widths.empty() && ngram_nodes == 0; }
    // Drafted nodes at most (the root not counted).
    int32_t max_nodes() const { return (shape.widths.empty() ? 0 : shape.max_nodes()) + ngram_nodes; }
    // "plain", "1,1,1,1", "ngram:8", "4,16,16+ngram:8".
    std::string to_string() const;
};

class TreeTuner {
public:
    // What a tuner measured, as handed to the next session's tuner (see above). Plain data.
    struct Knowledge {
        int32_t n_choices = 0;  // the tuner's candidates (a tuner with other choices ignores it)
        int32_t context = 0;    // the context length when it was taken
        std::vector<std::pair<double, double>> curve;  // per verify bucket: mean nodes and ms (0 nodes: none)
        int32_t max_nodes_seen = 1;
        double ls[3][4] = {};   // the draft-time fit's normal equations
        bool drafted = false;   // the fit holds drafted rounds
        std::vector<double> depth_hit, depth_try;  // chains' acceptance per depth
        struct ArmData {
            double tokens = 0, weight = 0, nodes = 0, node_weight = 0;
        };
        std::vector<ArmData> arms;  // per choice
        double resume_per_token = 0, resume_weight = 0;
        int32_t rounds = 0;     // rounds it rests on (0: nothing to hand on)
    };
    // What this tuner knows now, its rounds and what it was handed, at a context of `context` tokens.
    Knowledge knowledge(int32_t context) const;
    // Starts from what an earlier session's tuner knew (call before the first round; with other choices, or nothing
    // measured, nothing changes). `context`: this session's context length now.
    void learn(const Knowledge &k, int32_t context);
    bool learned() const { return learned_; }  // learn() took something

    // model: a model drafter (LongSpec draft or draft model) is attached; its candidate shapes are the built-in
    // ladder (chains of 1 to 8, then trees up to LongSpec's default [4,16,16,16,16]), or, with a bound, the ladder's
    // shapes that fit in it (levels no deeper, widths no wider) and the bound itself. ngram: n-gram drafting is
    // attached, with at most max_ngram_nodes nodes.
    TreeTuner(bool model, const TreeShape *bound, bool ngram, int32_t max_ngram_nodes);

    const std::vector<TreeChoice> &choices() const { return choices_; }
    // The most drafted nodes any candidate can have, and the deepest model shape (what drafters allocate for).
    int32_t max_model_nodes() const;

    // What the n-gram drafter proposes at the next round's root, when the session looked (it drafts the n-gram-only
    // choices first, as counterfactual rounds): with nothing proposed, a choice with n-gram nodes would draft only
    // its model part (n-grams alone: a plain pass), so those choices sit this round out; with a proposal, their
    // estimates (n-grams alone: measured on rounds with one) apply as they are. Choosing blind, n-grams alone were
    // rated by their rounds with a proposal and then played on every round, most of them plain passes, while a draft
    // that paid on every round waited.
    enum class NgramProposal { Unknown, None, Some };
    // The shape of the next round (an index into choices()).
    int32_t next(NgramProposal ngram = NgramProposal::Unknown);
    // What the round of choice `index` cost and produced: `nodes` tree nodes verified (root included), the draft
    // and verify times, and the accepted path length (drafted tokens the target accepted).
    void record(int32_t index, int32_t nodes, double draft_ms, double verify_ms, int32_t accepted);
    // Tokens that entered the context other than by a round (the prompt, a later turn, a restored snapshot): a
    // model drafter catches up with them too, so the next model round is a resume over them.
    void context_grew(int32_t n_tokens) { behind_ += std::max(n_tokens, 0); }
    // The model drafter caught up with the whole committed context outside a round (the prompt), `n_tokens` of
    // them in `ms`: a measure of what a token behind costs, and nothing is behind any more.
    void caught_up(int32_t n_tokens, double ms);
    // The most tokens the model drafter evaluates to catch up, however long the stretch (Drafter::catch_up_bound).
    void set_catch_up_bound(int32_t n_tokens) { catch_up_bound_ = std::max(n_tokens, 1); }

    // The n-gram-only choices (model drafter idle), which a session may measure by counterfactual rounds.
    const std::vector<int32_t> &shadow_choices() const { return shadow_choices_; }
    // A counterfactual round of n-gram-only choice `index`: its tree had `nodes` nodes (root included; 1: no match,
    // which says nothing, as in record()) and `accepted` of its tokens were what the session then emitted. Updates
    // that shape's tokens per round as a played round would, and nothing else (no time was spent on it).
    void record_shadow(int32_t index, int32_t nodes, int32_t accepted);
    // In the round just recorded, choice `index` merged a model tree with n-gram nodes: its model part alone had
    // `nodes` nodes (root included) and would have had `accepted` of them accepted. Updates the model tree's own
    // estimate (a chain's acceptance per depth) as a round of it would, and nothing else.
    void record_model_part(int32_t index, int32_t nodes, int32_t accepted);
    // A counterfactual round of the shapes that merge a chain with an n-gram share: at a root where the model drafter
    // drafted a chain of `chain_levels` levels (alone or merged) of which `chain_accepted` would have been accepted
    // alone, the n-gram-only choice `shadow_choice` proposed a tree of `shadow_nodes` nodes of which `shadow_accepted`
    // were then emitted. A chain of k levels drafts the first k of those (a greedy or coupled draft does not depend on
    // how deep it goes), so it would have had min(chain_accepted, k) accepted, known for every k when the chain
    // stopped short; merged with that share, the longer of the two paths, over at most k + shadow_nodes nodes. Each
    // such merged shape other than `played` (the round's own choice, recorded by record()) counts it as a round of
    // it; nothing else changes. Without it a merged shape's tokens rested on the few rounds it was played, and auto
    // went from one to another as their small samples rose and fell.
    void record_merged_shadow(int32_t shadow_choice, int32_t shadow_nodes, int32_t shadow_accepted, int32_t chain_levels,
                              int32_t chain_accepted, int32_t played);
    // In the round just recorded, choice `index` drafted a model tree other than a chain (alone or merged): the
    // draft's greedy path inside it (each node's best child, as a chain drafts it) was there for `levels` levels and
    // would have had `accepted` of them accepted. Updates the chains' acceptance per depth as a chain round would.
    // Without it, a tree played from the first rounds (its guess is high while the chains' acceptance rests on a
    // round or two) was played on and on: on held-out code a tree of 2,2,2,2 ran 20 rounds at 33 tok/s while the
    // chain of 3, never measured again, ran 42.
    void record_greedy_path(int32_t index, int32_t levels, int32_t accepted);

    // Expected tokens per millisecond of a choice under the current estimates (for tests and reports).
    double rate(int32_t index) const;
    double expected_tokens(int32_t index) const;
    double expected_ms(int32_t index) const;
    int32_t rounds() const { return rounds_; }
    int32_t plain_rounds() const { return plain_rounds_; }

    static constexpr double kPriorSlope = 0.15;  // verify(n) ~ verify(1) x (1 + 0.15 (n - 1)) until measured
    static constexpr int32_t kMaxDepth = 32;     // the deepest tree a session accepts
    static constexpr int32_t kFirstReach = 5;    // shapes of up to this many nodes (root included) may be played
                                                 // first; then up to twice the most nodes a round has verified
    // What learn() takes counts as at most this many rounds: a shape's tokens, a bucket of the verify curve (its
    // scale), the chains' tries at each depth, the draft fit.
    static constexpr double kCarryArm = 2.0, kCarryDepth = 6.0, kCarryDraft = 4.0, kCarryResume = 1.0;
    static constexpr double kCarryContext = 2.0;  // the verify curve serves contexts within this factor of its own

private:
    struct Arm {
        double tokens = 0, weight = 0;  // decayed tokens produced and rounds played (non-chain shapes)
        double nodes = 0, node_weight = 0;
        int32_t probe_after = 0;        // round from which it may be probed again
        int32_t backoff = 16;
        int32_t last_played = 0;        // round it was last chosen
        int32_t updated = 0;            // round its tokens were last recorded
    };
    struct Bucket {
        double n = 0, ms = 0, weight = 0;  // decayed sums
    };

    void refresh() const;  // the estimates' inputs, recomputed when a round was recorded since
    double verify_ms(double nodes) const;
    double prior_scale() const;  // this session's verify times against the learned curve's, where both measured
    // Bucket i of the verify curve: (mean nodes, ms) as this session measured it, else the learned curve's scaled by
    // `scale`; (0, 0) when neither has it.
    std::pair<double, double> curve_point(size_t i, double scale) const;
    double draft_ms(const TreeChoice &c) const;
    double resume_ms(const TreeChoice &c) const;  // a model shape's share of catching up after an idle stretch
    double chain_accept(int32_t depth) const;  // chains: acceptance at depth + 1 given depth was reached
    double chain_tokens(int32_t depth) const;
    double guess_tokens(int32_t index) const;
    double measured_tokens(int32_t index) const;  // 0 for a shape not played yet (chains: the pooled estimate)
    double expected_nodes(int32_t index) const;
    bool measured(int32_t index) const;  // its estimate rests on rounds it was played (or plain), not its guess
    bool is_chain(int32_t index) const { return !choices_[size_t(index)].shape.widths.empty() && choices_[size_t(index)].shape.is_chain() && choices_[size_t(index)].ngram_nodes == 0; }

    void update_arm(int32_t index, int32_t nodes, int32_t accepted);  // a round's tokens and nodes into its arm
    void update_depths(int32_t depth, int32_t accepted);  // a chain of `depth` levels, `accepted` of them accepted

    std::vector<TreeChoice> choices_;
    std::vector<int32_t> shadow_choices_;
    std::vector<Arm> arms_;
    std::vector<std::pair<int32_t, int32_t>> parts_;  // [i]: choice i's model tree alone, its n-gram share alone (-1: none)
    std::vector<std::vector<int32_t>> inside_;  // [i]: the choices whose trees choice i's tree holds
    std::vector<Bucket> buckets_;           // verify time by node count: bucket b holds n in (2^(b-1), 2^b]
    std::vector<double> depth_hit_, depth_try_;  // chains: decayed acceptances / attempts at depth d + 1
    std::vector<double> rates_;                       // next()'s scratch
    mutable std::vector<std::pair<double, double>> points_;  // the verify curve: (nodes, ms) per measured bucket
    mutable double draft_coef_[3] = {};                       // draft ms = c + a levels + b rows
    mutable double chain_accept_[kMaxDepth] = {};             // chains: acceptance at depth d + 1 given depth d
    mutable double chain_tokens_[kMaxDepth + 1] = {};         // chains: expected tokens per round of a chain of k levels
    double ls_[3][4] = {};                  // draft time ~ c + a levels + b rows: decayed normal equations [X'X | X'y]
    int32_t rounds_ = 0, plain_rounds_ = 0, draft_rounds_ = 0;
    int32_t max_nodes_seen_ = 1;            // the most nodes (root included) a recorded round verified
    int32_t next_probe_ = 0;                // no probe before this round
    int32_t next_stale_probe_ = 0;          // no probe of a long-unplayed shape before this round
    int32_t plain_until_ = 0;               // plain decoding without re-examining the choice before this round
    int32_t probe_ = -1;                    // the choice next() returned as a probe (-1: it returned the best)
    double probe_best_rate_ = 0;            // the best shape's rate when that probe was chosen
    double total_ms_ = 0, explore_ms_ = 0;  // time of every round; time probes lost against the best shape
    int32_t catch_up_bound_ = INT32_MAX;    // set_catch_up_bound()
    int32_t behind_ = 0;                    // tokens produced or appended since the last round that used the model
                                            // drafter (at first: the prompt, so the first model round is a resume)
    double resume_per_token_ = 0, resume_weight_ = 0;  // decayed: catch-up ms per token behind, and its rounds
    mutable bool dirty_ = true;             // a round was recorded since refresh()
    // learn(): an earlier session's verify curve (per bucket: mean nodes, ms; weight 0: none), for the buckets this
    // session has not measured, scaled by how this session's own buckets compare with it.
    std::vector<Bucket> prior_curve_;
    int32_t prior_max_nodes_ = 1;
    bool learned_ = false;
};

}  // namespace specula::internal
