#include "session/speculative_round.h"

#include "backend/backend_choice.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "core/timer.h"
#include "session/phase_hook.h"
#include "speculative/grammar_draft.h"
#include "speculative/longspec_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/vocab_compat.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace specula::internal {

SpeculativeRound::~SpeculativeRound() {
    try {
        remember();
    } catch (...) {
        // Out of memory while copying the tuner's knowledge: the next session learns from nothing, as before.
    }
}

void SpeculativeRound::attach(const SpeculativeConfig &config, const std::shared_ptr<const Model> &target_model, TargetRunner &runner,
                              ThreadPool &pool, int32_t n_tokens) {
    const Model &target = *target_model;
    require(!(config.longspec && config.draft_model), SPECULA_ERR_INVALID_ARGUMENT,
            "speculative: choose a LongSpec draft or an independent draft model, not both");
    require(config.ngram_nodes >= 0 && config.ngram_nodes <= 1024, SPECULA_ERR_INVALID_ARGUMENT,
            "speculative: n-gram nodes must be in [0, 1024]");
    require(config.shape.depth() >= 1 && config.shape.depth() <= 32 && config.shape.max_nodes() <= 4096,
            SPECULA_ERR_INVALID_ARGUMENT, "speculative: the tree shape must have 1 to 32 levels and at most 4096 nodes");
    if (config.longspec)
        require(config.longspec->target_ptr().get() == &target, SPECULA_ERR_INCOMPATIBLE,
                "speculative: the LongSpec draft was loaded for another model; load it with this session's model");
    const bool model_drafter = config.longspec || config.draft_model;
    std::unique_ptr<TreeTuner> tuner;
    if (config.auto_tree && (model_drafter || config.ngram))
        tuner = std::make_unique<TreeTuner>(model_drafter, config.shape_is_bound ? &config.shape : nullptr, config.ngram,
                                            config.ngram_nodes);
    const int32_t model_nodes = !model_drafter ? 0 : tuner ? tuner->max_model_nodes() : config.shape.max_nodes();
    const int32_t budget = 1 + model_nodes + (config.ngram ? config.ngram_nodes : 0);
    std::unique_ptr<Drafter> primary;
    if (config.longspec) primary = make_longspec_drafter(config.longspec, budget - 1, runner);
    if (config.draft_model) {
        check_draft_vocab(target, *config.draft_model);
        // On the target's backend when it can hold the draft model, else on the CPU with the session's threads.
        primary = make_model_drafter(config.draft_model, target, make_draft_model_runner(runner, config.draft_model, pool));
    }
    std::unique_ptr<Drafter> drafter;
    Drafter *ngram_raw = nullptr;
    if (config.ngram) {
        std::unique_ptr<Drafter> ngram = make_ngram_drafter(config.ngram_config);
        ngram_raw = ngram.get();
        drafter = primary ? make_merged_drafter(std::move(primary), std::move(ngram), 1 + model_nodes) : std::move(ngram);
    } else if (primary) {
        drafter = std::move(primary);
    } else if (config.grammar) {
        drafter = make_grammar_drafter();
    }
    remember();  // what the tuner replaced learned
    drafter_ = std::move(drafter);
    ngram_ = ngram_raw;
    shadows_.clear();
    shadow_ms_ = 0;
    shadow_skip_ = 0;
    tuner_ = std::move(tuner);
    if (tuner_ && drafter_) tuner_->set_catch_up_bound(drafter_->catch_up_bound());
    if (tuner_) tuner_->context_grew(n_tokens);
    // The tuner's memory is kept per target, drafter and what else changes the costs or the candidates.
    setup_ = TunerSetup{};
    recalled_ = false;
    context_ = n_tokens;
    if (tuner_) {
        setup_.target = target_model;
        setup_.target_id = target_model.get();
        if (config.longspec) {
            setup_.drafter = config.longspec;
            setup_.drafter_id = config.longspec.get();
        } else if (config.draft_model) {
            setup_.drafter = config.draft_model;
            setup_.drafter_id = config.draft_model.get();
        }
        const NgramConfig &g = config.ngram_config;
        settings_ = std::string(runner.backend()) + " threads " + std::to_string(pool.size()) + " kv " + std::to_string(int(runner.kv_type())) +
                    " ctx " + std::to_string(runner.n_ctx()) + (config.ngram ? " ngram " : " no-ngram ") + std::to_string(config.ngram_nodes) + " " +
                    std::to_string(g.lookup_min) + "," + std::to_string(g.lookup_max) + "," + std::to_string(g.max_chain) + "," +
                    std::to_string(g.table_n) + "," + std::to_string(g.table_topk) + "," + std::to_string(g.lag) +
                    (config.shape_is_bound ? " bound " + config.shape.to_string() : " ladder") +
                    (config.sampled_drafts == SampledDraftRule::kCoupled ? " coupled" : " leviathan");
        set_temperature(temperature_);
    }
    fixed_tree_ = TreeChoice{model_drafter ? config.shape : TreeShape{std::vector<int32_t>{}}, config.ngram ? config.ngram_nodes : 0};
    config_ = config;
    n_vocab_ = target.hparams().n_vocab;
    drop_ready();
}

void SpeculativeRound::set_temperature(float temperature) {
    if (tuner_ && recalled_ && temperature != temperature_) {
        // What was learned at the old temperature goes under it; the tuner goes on (its estimates follow).
        remember();
    }
    temperature_ = temperature;
    if (!tuner_) return;
    char t[32];
    std::snprintf(t, sizeof t, " T %.2f", temperature <= 0.0f ? 0.0 : double(temperature));
    setup_.settings = settings_ + t;
}

void SpeculativeRound::remember() {
    if (!tuner_ || tuner_->rounds() == 0 || setup_.target_id == nullptr) return;
    TunerMemory::process().store(setup_, tuner_->knowledge(context_));
}

int32_t SpeculativeRound::next_choice(TreeTuner::NgramProposal ngram, int32_t n_tokens) {
    if (!tuner_) return -1;
    context_ = n_tokens;
    if (!recalled_) {
        recalled_ = true;
        if (tuner_->rounds() == 0)
            if (const std::optional<TreeTuner::Knowledge> k = TunerMemory::process().find(setup_)) tuner_->learn(*k, n_tokens);
    } else if (tuner_->rounds() % kRememberEvery == 0) {
        remember();
    }
    return tuner_->next(ngram);
}

void SpeculativeRound::record_plain(int32_t choice, double ms) {
    tuner_->record(choice, 1, 0.0, ms, 0);
    ++stats_.rounds;
    ++stats_.plain_rounds;
    ++stats_.produced;
    stats_.verify_ms += ms;
    stats_.tree = "auto:plain";
}

TreeTuner::NgramProposal SpeculativeRound::shadow_draft(std::span<const int32_t> tokens, int32_t n_ctx) {
    using Proposal = TreeTuner::NgramProposal;
    round_shadows_ = shadows_.size();
    if (!tuner_ || ngram_ == nullptr || tokens.empty()) return Proposal::Unknown;
    if (shadow_skip_ > 0) {
        --shadow_skip_;
        return Proposal::Unknown;
    }
    const double t0 = now_ms();
    const int32_t n_past = int32_t(tokens.size()) - 1;
    Proposal proposal = Proposal::None;
    for (const int32_t c : tuner_->shadow_choices()) {
        const int32_t budget = std::min(1 + tuner_->choices()[size_t(c)].max_nodes(), n_ctx - n_past);
        if (budget <= 1) continue;
        if (shadows_.size() >= 64) {  // (settled within a few tokens: never reached)
            shadows_.erase(shadows_.begin());
            round_shadows_ = std::min(round_shadows_, shadows_.size());
        }
        Shadow sh;
        sh.choice = c;
        sh.root = size_t(n_past);
        if (!shadow_pool_.empty()) {
            sh.tree = std::move(shadow_pool_.back());
            shadow_pool_.pop_back();
        }
        sh.tree.reset(tokens.back());
        DraftRequest request;
        request.tokens = tokens;
        request.n_target_kv = n_past;
        request.shape = TreeShape{std::vector<int32_t>{}};
        request.node_budget = budget;
        ngram_->draft(request, sh.tree);
        if (sh.tree.size() > 1) {
            proposal = Proposal::Some;
            shadows_.push_back(std::move(sh));
        } else {
            shadow_pool_.push_back(std::move(sh.tree));
        }
    }
    // Bound the cost: a tiny model's decode step is a tenth of a millisecond, where a few lookups show.
    const double ms = now_ms() - t0;
    shadow_ms_ = shadow_ms_ > 0 ? 0.9 * shadow_ms_ + 0.1 * ms : ms;
    if (tuner_->rounds() > 0) shadow_skip_ = std::min(64, int32_t(shadow_ms_ / (0.02 * tuner_->expected_ms(0))));
    return proposal;
}

void SpeculativeRound::shadow_played(int32_t choice) {
    for (size_t i = round_shadows_; i < shadows_.size(); ++i)
        if (shadows_[i].choice == choice) {
            shadow_pool_.push_back(std::move(shadows_[i].tree));
            shadows_.erase(shadows_.begin() + std::ptrdiff_t(i));
            return;
        }
}

void SpeculativeRound::shadow_settle(std::span<const int32_t> tokens) {
    size_t kept = 0;
    for (size_t i = 0; i < shadows_.size(); ++i) {
        Shadow &sh = shadows_[i];
        // Walk the shadow tree along the tokens emitted after its root, as the verifier would have.
        int32_t node = 0, depth = 0;
        bool settled = false;
        for (;;) {
            const size_t at = sh.root + 1 + size_t(depth);
            if (at >= tokens.size()) break;  // not emitted yet
            const int32_t child = sh.tree.find_child(node, tokens[at]);
            if (child < 0) {
                settled = true;  // the emitted token is not in the tree: the path ends here
                break;
            }
            node = child;
            ++depth;
            if (sh.tree.is_leaf(node)) {
                settled = true;
                break;
            }
        }
        if (settled) {
            tuner_->record_shadow(sh.choice, sh.tree.size(), depth);
            for (const ChainRound &c : chains_)
                if (c.root == sh.root) tuner_->record_merged_shadow(sh.choice, sh.tree.size(), depth, c.levels, c.accepted, c.choice);
            shadow_pool_.push_back(std::move(sh.tree));
        } else {
            if (kept != i) shadows_[kept] = std::move(sh);
            ++kept;
        }
    }
    shadows_.resize(kept);
}

// One speculative round. The context ends with a pending token (the root); every earlier token is evaluated.
//  1. the drafter proposes a tree under the root, within the node budget and the room left in the context;
//  2. the target evaluates root + tree in one pass with hybrid tree attention (tree slots follow the context);
//  3. the verifier walks the tree with the session's sampler (exact: see verifier.h);
//  4. the accepted path's keys/values are moved, in every layer, to the slots right after the root, so the
//     cache holds exactly the committed tokens again. (LongSpec's reference moves only the last layer and
//     re-feeds the accepted tokens next round; on the CPU a copy of a few rows per layer is cheaper than
//     recomputing them, and the cache never holds stale rows.)
// The accepted tokens and the bonus token are queued and emitted one per step by the session.
bool SpeculativeRound::run(int32_t choice, std::vector<int32_t> &tokens, TargetRunner &runner, Sampler &sampler, int32_t n_ctx,
                           TargetLogits &logits) {
    const int32_t n_vocab = n_vocab_;
    const int32_t n_past = int32_t(tokens.size()) - 1;
    drop_ready();
    tree_.reset(tokens.back());
    grammar_forced_.clear();
    // The round's tree: the tuner's choice (auto), or the configured one.
    const TreeChoice &round = tuner_ ? tuner_->choices()[size_t(choice)] : fixed_tree_;
    const int32_t budget = std::min(1 + round.max_nodes(), n_ctx - n_past);
    at_phase(Phase::Draft);
    const double t0 = now_ms();
    if (budget > 1) {
        DraftRequest request;
        request.tokens = tokens;
        request.n_target_kv = n_past;
        request.shape = round.shape;
        request.node_budget = budget;
        request.sampler = sampler.greedy() ? nullptr : &sampler;
        // Only a chain is drafted by sampling (build_beam_tree): other shapes need no keys. Under llama.cpp's draws
        // always coupled: the Leviathan rule's own uniforms would move the generator off llama.cpp's sequence.
        const bool coupled = config_.sampled_drafts == SampledDraftRule::kCoupled || sampler.config().draw == DrawRule::LlamaCpp;
        if (!sampler.greedy() && coupled && !round.shape.widths.empty() && round.shape.is_chain())
            request.draw_keys = sampler.peek_keys(size_t(round.shape.depth()));
        request.history_window = sampler.history_window();
        if (sampler.has_logit_processing())
            request.process_logits = [&sampler, n_vocab](float *logits, std::span<const int32_t> history) {
                sampler.process_logits(logits, n_vocab, history);
            };
        drafter_->draft(request, tree_);
        require(tree_.size() <= budget, SPECULA_ERR_INTERNAL, "speculative: the drafter exceeded its node budget");
    }
    // Under a grammar: drop what it rejects, add what it forces (within the context's room, 16 tokens a round), in
    // a drafting round, or in every round when the grammar drafts alone.
    if (sampler.has_grammar() && (budget > 1 || (config_.grammar && n_ctx - n_past > 1))) {
        const GrammarDraftCounts g = shape_tree_by_grammar(tree_, sampler, n_ctx - n_past, 32, 16, grammar_forced_, &grammar_spellings_);
        stats_.grammar_pruned += g.pruned;
        stats_.grammar_drafted += g.forced;
    }
    const double t1 = now_ms();
    const int32_t n_nodes = tree_.size();
    positions_.resize(size_t(n_nodes));
    for (int32_t i = 0; i < n_nodes; ++i) positions_[size_t(i)] = n_past + tree_.depth(i);
    tree_.ancestor_mask(mask_);
    // The target's logits stay on its device (eval_tree(..., nullptr)); a backend that can walks the tree there
    // and returns the accepted nodes, else the host verifier fetches the rows it visits (at most depth + 1).
    at_phase(Phase::Verify);
    if (!runner.eval_tree(tree_.tokens().data(), n_nodes, n_past, 0, positions_.data(), mask_.data(), nullptr)) return false;
    at_phase(Phase::Accept);
    logits.begin_round(runner, n_nodes);
    // The grammar's state after the root, before the verifier's draws move anything: what the round's tokens are
    // learned from.
    std::optional<GrammarMatcher> grammar_before;
    if (sampler.has_grammar() && sampler.grammar_state() != nullptr) grammar_before = *sampler.grammar_state();
    VerifyOutcome outcome;
    const bool on_device = runner.capabilities().verifies_trees_on_device && plan_tree_sampling(tree_, sampler, tokens, n_vocab, plan_) &&
                           runner.verify_tree_on_device(plan_, outcome);
    if (on_device) {
        // The walk drew one token per visited node, with plan_.keys: move the generator as far.
        if (!sampler.greedy()) sampler.skip_draws(outcome.path.size() + 1);
        ++stats_.device_verified;
    } else {
        outcome = verify_tree(
            tree_, [&](int32_t node) { return logits.node_row(node); }, n_vocab, sampler, tokens, config_.residual_rule);
    }
    path_.assign(1, 0);
    path_.insert(path_.end(), outcome.path.begin(), outcome.path.end());
    logits.set_path(path_);
    runner.commit_tree_path(n_past, path_.data(), int32_t(path_.size()));
    at_phase(Phase::Commit);

    for (int32_t node : outcome.path) {
        ready_.push_back({tree_.token(node), true});
        if (sampler.has_grammar() && size_t(node) < grammar_forced_.size() && grammar_forced_[size_t(node)]) ++stats_.grammar_accepted;
    }
    ready_.push_back({outcome.bonus, false});
    if (grammar_before) {
        committed_.clear();
        for (int32_t node : outcome.path) committed_.push_back(tree_.token(node));
        committed_.push_back(outcome.bonus);
        grammar_spellings_.learn(*grammar_before, sampler, committed_);
    }

    const double t2 = now_ms();
    if (tuner_) {
        tuner_->record(choice, n_nodes, t1 - t0, t2 - t1, int32_t(outcome.path.size()));
        // A round of the model's tree merged with n-gram nodes: how deep the model's tree alone would have been
        // accepted (the emitted tokens do not depend on the tree: verifier.h), walked along the round's emitted
        // tokens within the model's nodes. --tree auto learns that tree's acceptance from these rounds too, rather
        // than only by playing it; without it, a chain merged with a few n-gram nodes (each costing verification)
        // was played throughout where the chain alone ran faster. (A grammar may renumber the tree: not counted.)
        const int32_t m = drafter_->model_part_size();
        const bool merged = !round.shape.widths.empty() && round.ngram_nodes > 0 && m > 1;
        int32_t model_depth = int32_t(outcome.path.size());  // the model's tree alone, a chain round: the path
        // The round's emitted tokens: the accepted path, then the bonus.
        const auto emitted = [&](size_t i) { return i < outcome.path.size() ? tree_.token(outcome.path[i]) : outcome.bonus; };
        if (merged && !sampler.has_grammar()) {
            int32_t node = 0, depth = 0;
            for (size_t i = 0; i <= outcome.path.size(); ++i) {
                const int32_t child = tree_.find_child(node, emitted(i));
                if (child < 0 || child >= m) break;
                node = child;
                ++depth;
            }
            tuner_->record_model_part(choice, m, depth);
            model_depth = depth;
        }
        // What a chain drafted here tells the shapes that merge it with n-grams, once this root's shadows settle.
        if (!round.shape.widths.empty() && round.shape.is_chain() && !sampler.has_grammar() && (merged || round.ngram_nodes == 0)) {
            if (chains_.size() >= 8) chains_.erase(chains_.begin());
            chains_.push_back({size_t(n_past), (merged ? m : n_nodes) - 1, model_depth, choice});
        }
        // A model tree other than a chain: how deep the draft's greedy path in it (each node's first child) would
        // have been accepted, for the chains' estimates (TreeTuner::record_greedy_path). Greedy only: a sampled
        // chain draws its tokens, a tree's nodes do not say what it would have drawn.
        if (!round.shape.widths.empty() && !round.shape.is_chain() && sampler.greedy() && !sampler.has_grammar()) {
            const int32_t model_end = m > 0 ? m : n_nodes;
            int32_t node = 0, levels = 0, accepted = 0;
            for (;;) {
                const int32_t best = tree_.first_child(node);
                if (best < 0 || best >= model_end) break;
                ++levels;
                if (tree_.token(best) != emitted(size_t(accepted))) break;
                ++accepted;
                node = best;
            }
            tuner_->record_greedy_path(choice, levels, accepted);
        }
    }

    SpeculativeStats &st = stats_;
    ++st.rounds;
    if (n_nodes == 1) ++st.plain_rounds;
    st.tree = (tuner_ ? "auto:" : "") + round.to_string();
    st.drafted += n_nodes - 1;
    st.accepted += int32_t(outcome.path.size());
    st.produced += int32_t(outcome.path.size()) + 1;
    if (st.accepted_at_depth.size() < outcome.path.size()) st.accepted_at_depth.resize(outcome.path.size(), 0);
    for (size_t d = 0; d < outcome.path.size(); ++d) ++st.accepted_at_depth[d];
    st.draft_ms += t1 - t0;
    st.verify_ms += t2 - t1;
    return true;
}

void SpeculativeRound::restore(std::vector<Ready> ready, SpeculativeStats stats) {
    shadows_.clear();
    stats_ = std::move(stats);
    ready_ = std::move(ready);
    next_ = 0;
}

}  // namespace specula::internal
