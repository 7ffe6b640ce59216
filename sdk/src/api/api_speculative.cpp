// specula_draft_* and specula_session_set_speculative: LongSpec draft files, and attaching drafters to a session.
#include "handles.h"

#include <specula/specula_experimental.h>

#include "speculative/longspec_draft_file.h"
#include "speculative/ngram_drafter.h"
#include "speculative/tree_shape.h"

using namespace specula::internal;

namespace {

const LongSpecDraft *get(const specula_draft *d) { return d ? d->draft.get() : nullptr; }

// The core's SpeculativeConfig from a caller's options (validated here as far as the options alone allow;
// the session checks the rest: the draft's target, the draft model's vocabulary).
SpeculativeConfig to_config(const specula_speculative_options *user) {
    specula_speculative_options defaults;
    specula_speculative_options_init(&defaults);
    const specula_speculative_options o = read_options(user, defaults, "opts");
    SpeculativeConfig c;
    if (user == nullptr) return c;  // detach
    require_arg(o.draft == nullptr || get(o.draft) != nullptr, "opts->draft is not a loaded draft");
    require_arg(o.draft_model == nullptr || o.draft_model->model != nullptr, "opts->draft_model is not a loaded model");
    require_arg(o.draft == nullptr || o.draft_model == nullptr,
                "opts: choose a LongSpec draft or an independent draft model, not both");
    require_arg(o.draft_model == nullptr || !o.draft_model->model->vocab_only(),
                "opts->draft_model was loaded vocab-only: it has no weights to run");
    require_arg(o.ngram == 0 || o.ngram == 1, "opts->ngram must be 0 or 1");
    require_arg(o.grammar == 0 || o.grammar == 1, "opts->grammar must be 0 or 1");
    require_arg(o.n_tree_levels >= 0 && o.n_tree_levels <= 32, "opts->n_tree_levels must be in [0, 32]");
    require_arg(o.n_tree_levels == 0 || o.tree_widths != nullptr, "opts->tree_widths is NULL but n_tree_levels > 0");
    if (o.tree_widths != nullptr && o.n_tree_levels > 0) {
        c.shape.widths.assign(o.tree_widths, o.tree_widths + o.n_tree_levels);
        for (int32_t i = 0; i < o.n_tree_levels; ++i)
            require_arg(o.tree_widths[i] >= 1 && o.tree_widths[i] <= 256,
                        ("opts->tree_widths[" + std::to_string(i) + "] = " + std::to_string(o.tree_widths[i]) +
                         " is outside [1, 256]").c_str());
    }
    require_arg(o.ngram_nodes >= 0 && o.ngram_nodes <= 1024, "opts->ngram_nodes must be in [0, 1024]");
    require_arg(o.ngram_lookup_min >= 1 && o.ngram_lookup_max >= o.ngram_lookup_min && o.ngram_lookup_max <= 64,
                "opts: ngram_lookup_min and ngram_lookup_max must satisfy 1 <= min <= max <= 64");
    require_arg(o.ngram_max_chain >= 0 && o.ngram_max_chain <= 1024, "opts->ngram_max_chain must be in [0, 1024]");
    require_arg(o.ngram_table_topk >= 0 && o.ngram_table_topk <= 1024, "opts->ngram_table_topk must be in [0, 1024]");
    require_arg(o.ngram_table_topk == 0 || (o.ngram_table_n >= 2 && o.ngram_table_n <= 64),
                "opts->ngram_table_n must be in [2, 64]");
    require_arg(o.ngram_lag >= 0, "opts->ngram_lag must be >= 0");
    require_arg(o.tree_mode >= SPECULA_TREE_DEFAULT && o.tree_mode <= SPECULA_TREE_FIXED,
                "opts->tree_mode must be a specula_tree_mode (0 default, 1 auto, 2 fixed)");
    require_arg(o.sampled_drafts == SPECULA_SAMPLED_DRAFTS_COUPLED || o.sampled_drafts == SPECULA_SAMPLED_DRAFTS_LEVIATHAN,
                "opts->sampled_drafts must be a specula_sampled_drafts (0 coupled, 1 Leviathan)");
    c.sampled_drafts = o.sampled_drafts == SPECULA_SAMPLED_DRAFTS_LEVIATHAN ? SampledDraftRule::kLeviathan : SampledDraftRule::kCoupled;
    const bool widths_given = o.tree_widths != nullptr && o.n_tree_levels > 0;
    c.auto_tree = o.tree_mode == SPECULA_TREE_AUTO || (o.tree_mode == SPECULA_TREE_DEFAULT && !widths_given);
    c.shape_is_bound = widths_given;

    if (o.draft != nullptr) c.longspec = o.draft->draft;
    if (o.draft_model != nullptr) c.draft_model = o.draft_model->model;
    c.ngram = o.ngram != 0;
    c.grammar = o.grammar != 0;
    c.ngram_nodes = o.ngram_nodes;
    c.ngram_config.lookup_min = o.ngram_lookup_min;
    c.ngram_config.lookup_max = o.ngram_lookup_max;
    c.ngram_config.max_chain = o.ngram_max_chain;
    c.ngram_config.table_n = o.ngram_table_n;
    c.ngram_config.table_topk = o.ngram_table_topk;
    c.ngram_config.lag = o.ngram_lag;
    return c;
}

}  // namespace

extern "C" {

specula_status specula_draft_load(const char *path, specula_model *target, specula_draft **out, specula_error **err) {
    return guarded(err, [&] {
        require_arg(out != nullptr, "out is NULL");
        *out = nullptr;
        require_arg(path != nullptr, "path is NULL");
        require_arg(target != nullptr && target->model != nullptr, "target is NULL");
        require_arg(!target->model->vocab_only(), "the target was loaded vocab-only: it has no weights to run");
        auto handle = std::make_unique<specula_draft>();
        handle->draft = LongSpecDraft::load(path, target->model);
        *out = handle.release();
    });
}

specula_draft *specula_draft_retain(specula_draft *draft) {
    if (draft != nullptr) draft->handle_refs.fetch_add(1, std::memory_order_relaxed);
    return draft;
}

void specula_draft_destroy(specula_draft *draft) {
    if (draft != nullptr && draft->handle_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete draft;
}

int32_t specula_draft_window(const specula_draft *draft) { return get(draft) ? get(draft)->config().window : 0; }
uint64_t specula_draft_n_params(const specula_draft *draft) { return get(draft) ? get(draft)->n_params() : 0; }

specula_status specula_draft_write_random(const specula_model *target, const char *path, uint64_t seed, int32_t window,
                                          specula_error **err) {
    return guarded(err, [&] {
        require_arg(target != nullptr && target->model != nullptr, "target is NULL");
        require_arg(path != nullptr, "path is NULL");
        require_arg(!target->model->vocab_only(), "the target was loaded vocab-only: it has no weights");
        require_arg(window >= 0, "window must be >= 0 (0 = 512)");
        RandomDraftOptions options;
        options.seed = seed;
        options.window = window == 0 ? 512 : window;
        write_random_longspec_draft(*target->model, path, options);
    });
}

void specula_speculative_options_init_sized(specula_speculative_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_speculative_options *opts) {
        // Not from a SpeculativeConfig: its TreeShape allocates, and a bad_alloc out of this void function unwound into
        // the C caller (found by tests/alloc). SpeculativeConfig's defaults: no n-gram drafting, kDefaultNgramNodes.
        const NgramConfig d;
        opts->ngram = 0;
        opts->tree_widths = nullptr;  // = SpeculativeConfig::shape ([4, 16, 16, 16, 16])
        opts->n_tree_levels = 0;
        opts->ngram_nodes = kDefaultNgramNodes;
        opts->ngram_lookup_min = d.lookup_min;
        opts->ngram_lookup_max = d.lookup_max;
        opts->ngram_max_chain = d.max_chain;
        opts->ngram_table_n = d.table_n;
        opts->ngram_table_topk = d.table_topk;
        opts->ngram_lag = d.lag;
        opts->tree_mode = SPECULA_TREE_DEFAULT;
        opts->sampled_drafts = SPECULA_SAMPLED_DRAFTS_COUPLED;
        opts->grammar = 0;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at grammar.
void (specula_speculative_options_init)(specula_speculative_options *opts) { specula_speculative_options_init_sized(opts, SPECULA_OPTIONS_END(specula_speculative_options, grammar)); }

specula_status specula_session_set_speculative(specula_session *session, const specula_speculative_options *opts,
                                               specula_error **err) {
    return guarded(err, [&] {
        Session &s = session_of(session);
        s.set_speculative(to_config(opts));
    });
}

const char *specula_session_drafter_name(const specula_session *session) {
    return session != nullptr && session->session != nullptr ? session->session->drafter_name() : "";
}

const char *specula_session_tree_shape(const specula_session *session) {
    if (session == nullptr || session->session == nullptr) return nullptr;
    const Session &s = *session->session;
    return s.speculative() ? s.speculative_stats().tree.c_str() : "";
}

int32_t specula_session_accepted_at_depth(const specula_session *session, int32_t *counts, int32_t capacity) {
    return guarded_value<int32_t>(0, [&] {
        if (session == nullptr || session->session == nullptr) return int32_t(0);
        const std::vector<int32_t> &depths = session->session->speculative_stats().accepted_at_depth;
        if (counts != nullptr)
            for (int32_t d = 0; d < capacity && size_t(d) < depths.size(); ++d) counts[d] = depths[size_t(d)];
        return int32_t(depths.size());
    });
}

specula_status specula_session_draft_logits(specula_session *session, float *logits, size_t capacity, specula_error **err) {
    return guarded(err, [&] {
        Session &s = session_of(session);
        require_arg(logits != nullptr, "logits is NULL");
        const size_t n_vocab = size_t(s.model().hparams().n_vocab);
        require(capacity >= n_vocab, SPECULA_ERR_BUFFER_TOO_SMALL,
                "draft logits: capacity " + std::to_string(capacity) + " is below n_vocab " + std::to_string(n_vocab));
        if (!s.draft_logits(logits)) throw Error(SPECULA_ERR_CANCELLED, "draft logits: cancelled");
    });
}

}  // extern "C"
