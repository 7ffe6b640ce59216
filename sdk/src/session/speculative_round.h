// A session's speculative decoding (docs/speculative.md): the drafters the target's backend made, the tree tuner
// (--tree auto), one round's buffers (tree, mask, positions, the verifier's rows), the queue of a round's tokens not
// emitted yet, and the speculative counters. The Session owns the context, the target's runner and the sampler and
// calls run() when its queue is empty; a round leaves the target's cache holding exactly the committed tokens.
#pragma once

#include "backend/target_runner.h"
#include "sampling/sampler.h"
#include "session/target_logits.h"
#include "speculative/draft_tree.h"
#include "speculative/drafter.h"
#include "speculative/grammar_draft.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/ngram_drafter.h"
#include "speculative/tree_shape.h"
#include "speculative/tree_sampling_plan.h"
#include "speculative/tree_tuner.h"
#include "speculative/tuner_memory.h"
#include "speculative/verifier.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace specula::internal {

class Model;
class ThreadPool;

// The default n-gram share of a tree (specula_speculative_options_init reads it without making a SpeculativeConfig).
inline constexpr int32_t kDefaultNgramNodes = 16;

// Speculative decoding for a session: which drafter(s) and what tree. With none of longspec / draft_model /
// ngram set, generation is plain autoregressive.
struct SpeculativeConfig {
    std::shared_ptr<const LongSpecDraft> longspec;  // a LongSpec draft loaded for this session's model
    std::shared_ptr<const Model> draft_model;       // an independent draft model (vocabulary must match)
    bool ngram = false;                             // n-gram drafting (alone, or merged into the tree above)
    // The grammar drafts alone: with no other drafter, each round drafts the text the session's grammar forces
    // (grammar_draft.h). With other drafters the forced text is merged into their trees whether set or not.
    bool grammar = false;
    NgramConfig ngram_config;
    TreeShape shape;            // beam widths per level for the model drafters; [4,16,16,16,16] by default
    int32_t ngram_nodes = kDefaultNgramNodes;  // nodes reserved for n-gram candidates (alone: the whole tree budget)
    // Auto: each round drafts the tree a TreeTuner (speculative/tree_tuner.h) expects to give the most tokens per
    // second, plain decoding included; `ngram_nodes` bounds the n-gram share and, when shape_is_bound, `shape`
    // bounds the model drafter's shapes (else the tuner's built-in ladder). Otherwise every round drafts `shape`.
    bool auto_tree = false;
    bool shape_is_bound = true;
    // Chains drafted by sampling (T > 0): coupled to the target's own draws (the default: a seed fixes the text
    // whatever the drafter, tree or tuner does), or Leviathan's accept/reject rule (exact in distribution; the
    // text depends on the drafts). verifier.h.
    SampledDraftRule sampled_drafts = SampledDraftRule::kCoupled;
    // With kLeviathan. Only kExact is lossless; tests set kTargetResample to show the statistical test catches a
    // biased verifier.
    ResidualRule residual_rule = ResidualRule::kExact;
};

// Speculative counters since the session began.
struct SpeculativeStats {
    int32_t rounds = 0, drafted = 0, accepted = 0, produced = 0;
    int32_t plain_rounds = 0;  // rounds that drafted nothing (auto: no tree paid)
    double draft_ms = 0, verify_ms = 0;
    std::string tree;          // the last round's tree (TreeChoice::to_string), "auto:" first when auto
    std::vector<int32_t> accepted_at_depth;  // [d]: rounds whose accepted path reached depth d + 1
    int32_t device_verified = 0;              // rounds the target's backend verified on its device
    // Under a grammar (speculative/grammar_draft.h): nodes it drafted, those accepted, drafted nodes it dropped.
    int32_t grammar_drafted = 0, grammar_accepted = 0, grammar_pruned = 0;
};

class SpeculativeRound {
public:
    // One token of a round: drafted and accepted (its keys/values are committed already) or the bonus.
    struct Ready {
        int32_t token;
        bool accepted;
    };

    // Attaches the drafters of `config` (or, empty, detaches them), made by the target's runner on its backend
    // (a draft model that does not fit there runs on the CPU on `pool`). n_tokens: the context's length now.
    // Throws Error(INCOMPATIBLE) for a draft made for another model or a draft model with another vocabulary,
    // Error(INVALID_ARGUMENT) for conflicting choices; then nothing changes.
    void attach(const SpeculativeConfig &config, const std::shared_ptr<const Model> &target, TargetRunner &runner, ThreadPool &pool,
                int32_t n_tokens);
    SpeculativeRound() = default;
    SpeculativeRound(const SpeculativeRound &) = delete;
    SpeculativeRound &operator=(const SpeculativeRound &) = delete;
    ~SpeculativeRound();  // puts back what the tuner learned (speculative/tuner_memory.h)
    // The sampler's temperature (its acceptance differs from greedy's): part of the setup the tuner's memory is
    // kept under.
    void set_temperature(float temperature);
    bool attached() const { return drafter_ != nullptr; }
    Drafter *drafter() const { return drafter_.get(); }
    TreeTuner *tuner() const { return tuner_.get(); }
    const SpeculativeConfig &config() const { return config_; }
    const SpeculativeStats &stats() const { return stats_; }

    // The tree of the next round: the tuner's choice (auto), or -1 for the configured tree. Call with an empty
    // queue only; n_tokens: the context's length. Before its first round the tuner starts from what the last
    // session of the same setup learned, and every so many rounds it puts back what it knows.
    int32_t next_choice(TreeTuner::NgramProposal ngram, int32_t n_tokens);
    // Whether the choice drafts nothing: the session then decodes plainly and reports it with record_plain().
    bool plain(int32_t choice) const { return choice >= 0 && tuner_->choices()[size_t(choice)].plain(); }
    void record_plain(int32_t choice, double ms);

    // Counterfactual n-gram rounds (TreeTuner::record_shadow). Before a round is chosen (the context `tokens` ends
    // with its root), shadow_draft() drafts each n-gram-only choice of the tuner into a shadow tree, unless that
    // would cost more than ~2% of the time plain decoding takes (then only every so many rounds), and says whether
    // the n-grams proposed anything there (Unknown when it skipped: the choice's hint); shadow_played() then drops
    // the shadow of the choice the round plays (its round reports it). After each emitted token, shadow_settle()
    // reports the shadows the emitted tokens decide. shadow_clear() forgets them (the context was cut or
    // shifted). Nothing here changes a token.
    TreeTuner::NgramProposal shadow_draft(std::span<const int32_t> tokens, int32_t n_ctx);
    void shadow_played(int32_t choice);
    void shadow_settle(std::span<const int32_t> tokens);
    void shadow_clear() {
        shadows_.clear();
        chains_.clear();
    }

    // One round (see speculative_round.cpp) over the context `tokens`, whose last token is pending (the root) and
    // every earlier one evaluated in the runner's cache. Fills the queue with the accepted tokens and the bonus
    // token. False when cancelled during verification (nothing is queued; the cache holds the committed tokens).
    // The tree's rows and the verified path go to `logits` (the session's: target_logits.h); queue entry i was
    // sampled from its path row i.
    bool run(int32_t choice, std::vector<int32_t> &tokens, TargetRunner &runner, Sampler &sampler, int32_t n_ctx, TargetLogits &logits);

    // The queue: the round's tokens not emitted yet (entry i was sampled from the round's path row i).
    bool has_ready() const { return next_ < ready_.size(); }
    size_t next_index() const { return next_; }
    Ready take() { return ready_[next_++]; }
    void drop_ready() {
        ready_.clear();
        next_ = 0;
    }

    // Snapshots: the entries not emitted yet, and putting a saved queue and the counters back (its rows go to the
    // session's TargetLogits).
    std::vector<Ready> pending() const { return {ready_.begin() + ptrdiff_t(std::min(next_, ready_.size())), ready_.end()}; }
    void restore(std::vector<Ready> ready, SpeculativeStats stats);

private:
    struct Shadow {
        int32_t choice = 0;
        size_t root = 0;  // the root's index in the context
        DraftTree tree;
    };

    std::unique_ptr<Drafter> drafter_;
    Drafter *ngram_ = nullptr;  // the n-gram drafter (inside drafter_), for shadow rounds
    SpeculativeConfig config_;
    std::unique_ptr<TreeTuner> tuner_;  // auto: chooses each round's tree
    // The tuner's memory (tuner_memory.h): its setup (the settings without the temperature in settings_), whether
    // the tuner took the entry yet, the sampler's temperature and the context at the last choice.
    void remember();
    static constexpr int32_t kRememberEvery = 16;  // rounds
    TunerSetup setup_;
    std::string settings_;
    bool recalled_ = false;
    float temperature_ = 0.0f;
    int32_t context_ = 0;
    TreeChoice fixed_tree_;             // otherwise every round's tree
    // One round's buffers, reused.
    DraftTree tree_;
    std::vector<uint8_t> mask_;
    std::vector<uint8_t> grammar_forced_;  // per node of the round's tree: drafted by the grammar
    GrammarSpellings grammar_spellings_;   // how the model spelled forced text so far (learned from committed tokens)
    std::vector<int32_t> committed_;       // scratch: a round's accepted tokens and its bonus token
    std::vector<int32_t> positions_, path_;  // path_: the root (0), then the accepted nodes
    TreeSamplingPlan plan_;                  // what a device verification gets (tree_sampling_plan.h)
    int32_t n_vocab_ = 0;
    std::vector<Ready> ready_;
    size_t next_ = 0;
    SpeculativeStats stats_;
    // A round that drafted a chain (alone or merged): at which root, its levels and how many of them the emitted
    // tokens accepted. A shadow settled at that root then also measures each chain merged with its n-gram share
    // (TreeTuner::record_merged_shadow).
    struct ChainRound {
        size_t root = 0;
        int32_t levels = 0, accepted = 0, choice = 0;
    };
    std::vector<ChainRound> chains_;  // the last few, oldest first
    std::vector<Shadow> shadows_;  // pending, oldest first
    size_t round_shadows_ = 0;     // where the shadows of the round being chosen start in shadows_
    std::vector<DraftTree> shadow_pool_;  // settled shadows' trees, reused
    double shadow_ms_ = 0;                 // decayed: drafting one round's shadows (against the tuner's plain round)
    int32_t shadow_skip_ = 0;              // rounds to pass before the next shadows (their cost bound)
};

}  // namespace specula::internal
