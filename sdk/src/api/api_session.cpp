// specula_session_*: creation, context edits, generation (push and pull), cancel and stats.
#include "handles.h"


using namespace specula::internal;

namespace {

SamplerConfig to_config(const specula_sampler_options *user) {
    specula_sampler_options defaults;
    specula_sampler_options_init(&defaults);
    const specula_sampler_options o = read_options(user, defaults, "sampler");
    SamplerConfig c;
    c.temperature = o.temperature;
    c.top_k = o.top_k;
    c.top_p = o.top_p;
    c.min_p = o.min_p;
    c.repeat_penalty = o.repeat_penalty;
    c.presence_penalty = o.presence_penalty;
    c.frequency_penalty = o.frequency_penalty;
    c.penalty_last_n = o.penalty_last_n;
    c.seed = o.seed;
    c.context_penalty = o.context_penalty;
    c.context_penalty_window = o.context_penalty_window;
    if (o.grammar != nullptr) {
        const size_t n = strnlen(o.grammar, kMaxGrammarBytes + 1);
        require_arg(n <= kMaxGrammarBytes, "sampler: the grammar is longer than 1 MiB");
        c.grammar.assign(o.grammar, n);
    }
    if (o.grammar_root != nullptr) c.grammar_root = o.grammar_root;
    c.draw = DrawRule(o.draw);  // out of range: sampler_config_problem below
    const std::string problem = sampler_config_problem(c);
    require_arg(problem.empty(), problem.c_str());
    return c;
}

GenerateConfig to_config(const specula_generate_options *user) {
    specula_generate_options defaults;
    specula_generate_options_init(&defaults);
    const specula_generate_options o = read_options(user, defaults, "opts");
    require_arg(o.n_stop_strings >= 0 && o.n_stop_strings <= 64, "opts: n_stop_strings must be in [0, 64]");
    require_arg(o.n_stop_strings == 0 || o.stop_strings != nullptr, "opts: stop_strings is NULL");
    require_arg(o.top_logits >= 0 && o.top_logits <= 64, "opts: top_logits must be in [0, 64]");
    require_arg(o.top_probs >= 0 && o.top_probs <= 64, "opts: top_probs must be in [0, 64]");
    GenerateConfig c;
    c.max_tokens = o.max_tokens;
    c.stop_at_eog = o.stop_at_eog != 0;
    c.top_logits = o.top_logits;
    c.top_probs = o.top_probs;
    for (int32_t i = 0; i < o.n_stop_strings; ++i) {
        require_arg(o.stop_strings[i] != nullptr, "opts: a stop string is NULL");
        c.stop_strings.emplace_back(o.stop_strings[i]);
    }
    return c;
}

// Fills a caller's event struct from a step result (pointers borrowed from `step`).
void fill_event(specula_token_event *ev, const StepResult &step, const specula_stats *stats) {
    specula_token_event full{};
    full.struct_size = ev->struct_size;
    full.token = step.token;
    full.text = step.text.c_str();
    full.text_len = step.text.size();
    full.n_top = int32_t(step.top_ids.size());
    full.top_ids = step.top_ids.empty() ? nullptr : step.top_ids.data();
    full.top_logits = step.top_logits.empty() ? nullptr : step.top_logits.data();
    full.drafted = step.drafted ? 1 : 0;
    full.stop = step.stop;
    full.stats = stats;
    full.logsumexp = step.logsumexp;
    full.token_logit = step.token_logit;
    full.n_top_probs = int32_t(step.top_prob_ids.size());
    full.top_prob_ids = step.top_prob_ids.empty() ? nullptr : step.top_prob_ids.data();
    full.top_probs = step.top_probs.empty() ? nullptr : step.top_probs.data();
    full.token_prob = step.token_prob;
    std::memcpy(ev, &full, std::min<size_t>(ev->struct_size, sizeof full));
}

}  // namespace

extern "C" {

void specula_session_options_init_sized(specula_session_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_session_options *opts) {
        opts->n_batch = 64;
        opts->backend = SPECULA_BACKEND_AUTO;
        opts->device = 0;
        opts->allow_fallback = 1;
        opts->context_policy = SPECULA_CONTEXT_STOP;
        opts->n_keep = ContextShift{}.keep;
        opts->n_discard = 0;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at n_discard.
void (specula_session_options_init)(specula_session_options *opts) { specula_session_options_init_sized(opts, SPECULA_OPTIONS_END(specula_session_options, n_discard)); }

void specula_sampler_options_init_sized(specula_sampler_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_sampler_options *opts) {
        const SamplerConfig d;
        opts->temperature = d.temperature;
        opts->top_k = d.top_k;
        opts->top_p = d.top_p;
        opts->min_p = d.min_p;
        opts->repeat_penalty = d.repeat_penalty;
        opts->presence_penalty = d.presence_penalty;
        opts->frequency_penalty = d.frequency_penalty;
        opts->penalty_last_n = d.penalty_last_n;
        opts->seed = d.seed;
        opts->context_penalty = d.context_penalty;
        opts->context_penalty_window = d.context_penalty_window;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at draw.
void (specula_sampler_options_init)(specula_sampler_options *opts) { specula_sampler_options_init_sized(opts, SPECULA_OPTIONS_END(specula_sampler_options, draw)); }

void specula_generate_options_init_sized(specula_generate_options *opts, size_t struct_size) {
    init_options_sized(opts, struct_size, [](specula_generate_options *opts) {
        opts->max_tokens = 256;
        opts->stop_at_eog = 1;
    });
}

// The function that applications built against the headers up to 0.16 call: their struct ends at top_probs.
void (specula_generate_options_init)(specula_generate_options *opts) { specula_generate_options_init_sized(opts, SPECULA_OPTIONS_END(specula_generate_options, top_probs)); }

const char *specula_stop_reason_string(specula_stop_reason reason) {
    switch (c_enum_value(reason)) {
    case SPECULA_STOP_NONE: return "none";
    case SPECULA_STOP_MAX_TOKENS: return "max_tokens";
    case SPECULA_STOP_EOS: return "eos";
    case SPECULA_STOP_STOP_STRING: return "stop_string";
    case SPECULA_STOP_CANCELLED: return "cancelled";
    case SPECULA_STOP_CONTEXT_FULL: return "context_full";
    case SPECULA_STOP_CALLBACK: return "callback";
    }
    return "unknown";
}

specula_status specula_session_create(specula_model *model, const specula_session_options *opts, const specula_sampler_options *sampler,
                                      specula_session **out, specula_error **err) {
    return guarded(err, [&] {
        require_arg(out != nullptr, "out is NULL");
        *out = nullptr;
        require_arg(model != nullptr && model->model != nullptr, "model is NULL");
        require_arg(!model->model->vocab_only(), "the model was loaded vocab-only: it has no weights to run");
        specula_session_options defaults;
        specula_session_options_init(&defaults);
        const specula_session_options o = read_options(opts, defaults, "opts");
        SessionConfig config;
        config.n_ctx = o.n_ctx;
        config.n_threads = o.n_threads;
        config.n_batch = o.n_batch == 0 ? 64 : o.n_batch;
        require_arg(o.backend >= SPECULA_BACKEND_AUTO && o.backend <= SPECULA_BACKEND_VULKAN, "opts->backend is not a specula_backend value");
        config.backend.kind = o.backend == SPECULA_BACKEND_CPU      ? BackendKind::Cpu
                              : o.backend == SPECULA_BACKEND_CUDA   ? BackendKind::Cuda
                              : o.backend == SPECULA_BACKEND_VULKAN ? BackendKind::Vulkan
                                                                    : BackendKind::Auto;
        config.backend.device = o.device;
        config.backend.allow_fallback = o.allow_fallback != 0;
        require_arg(o.kv_type >= SPECULA_KV_DEFAULT && o.kv_type <= SPECULA_KV_Q8_0, "opts->kv_type is not a specula_kv_type value");
        if (o.kv_type != SPECULA_KV_DEFAULT)
            config.backend.kv_type = o.kv_type == SPECULA_KV_F32 ? KvType::F32 : o.kv_type == SPECULA_KV_F16 ? KvType::F16 : KvType::Q8_0;
        require_arg(o.context_policy == SPECULA_CONTEXT_STOP || o.context_policy == SPECULA_CONTEXT_SHIFT,
                    "opts->context_policy is not a specula_context_policy value");
        config.shift.enabled = o.context_policy == SPECULA_CONTEXT_SHIFT;
        config.shift.keep = o.n_keep;
        config.shift.discard = o.n_discard;
        auto handle = std::make_unique<specula_session>();
        handle->session = std::make_unique<Session>(model->model, config, to_config(sampler));
        *out = handle.release();
    });
}

void specula_session_destroy(specula_session *session) { delete session; }

specula_status specula_session_set_sampler(specula_session *session, const specula_sampler_options *sampler, specula_error **err) {
    return guarded(err, [&] { session_of(session).set_sampler(to_config(sampler)); });
}

specula_status specula_session_append_text(specula_session *session, const char *text, size_t len, int32_t flags, specula_error **err) {
    return guarded(err, [&] {
        require_arg(text != nullptr || len == 0, "text is NULL");
        session_of(session).append_text(std::string_view(text ? text : "", len), (flags & SPECULA_TOKENIZE_ADD_SPECIAL) != 0,
                                 (flags & SPECULA_TOKENIZE_PARSE_SPECIAL) != 0);
    });
}

specula_status specula_session_append_tokens(specula_session *session, const int32_t *tokens, size_t n_tokens, specula_error **err) {
    return guarded(err, [&] {
        require_arg(tokens != nullptr || n_tokens == 0, "tokens is NULL");
        session_of(session).append_tokens(tokens, n_tokens);
    });
}

specula_status specula_session_rewind(specula_session *session, int32_t n_tokens, specula_error **err) {
    return guarded(err, [&] { session_of(session).rewind(n_tokens); });
}

int32_t specula_session_n_ctx(const specula_session *s) { return s && s->session ? s->session->n_ctx() : 0; }
const char *specula_session_backend(const specula_session *s) { return s && s->session ? s->session->backend() : ""; }
const char *specula_session_backend_note(const specula_session *s) { return s && s->session ? s->session->backend_note().c_str() : ""; }
int32_t specula_session_n_tokens(const specula_session *s) { return s && s->session ? int32_t(s->session->tokens().size()) : 0; }

specula_status specula_session_tokens(const specula_session *session, int32_t *tokens, size_t capacity, size_t *n_tokens, specula_error **err) {
    return guarded(err, [&] {
        require_arg(n_tokens != nullptr, "n_tokens is NULL");
        const std::vector<int32_t> &ids = session_of(const_cast<specula_session *>(session)).tokens();
        *n_tokens = ids.size();
        if (ids.size() > capacity) throw Error(SPECULA_ERR_BUFFER_TOO_SMALL, "token buffer of " + std::to_string(capacity) + " is too small for " + std::to_string(ids.size()));
        require_arg(tokens != nullptr || ids.empty(), "tokens is NULL");
        std::copy(ids.begin(), ids.end(), tokens);
    });
}

specula_status specula_session_evaluate(specula_session *session, specula_error **err) {
    return guarded(err, [&] {
        if (!session_of(session).evaluate()) throw Error(SPECULA_ERR_CANCELLED, "evaluation cancelled");
    });
}

specula_status specula_session_generate(specula_session *session, const specula_generate_options *opts, specula_token_fn on_token,
                                        void *user_data, specula_stop_reason *stop_reason, specula_error **err) {
    if (stop_reason != nullptr) *stop_reason = SPECULA_STOP_NONE;
    specula_status result = SPECULA_OK;
    const specula_status status = guarded(err, [&] {
        Session &s = session_of(session);
        s.configure_run(to_config(opts));
        s.begin_run();
        StepResult &step = session->last_step;
        for (;;) {
            result = s.step(step);
            const bool produced = step.token != SPECULA_TOKEN_NULL;
            if ((produced || !step.text.empty()) && on_token != nullptr) {
                session->last_stats = s.stats();
                specula_token_event ev{};
                ev.struct_size = sizeof ev;
                fill_event(&ev, step, &session->last_stats);
                if (on_token(&ev, user_data) == 0 && step.stop == SPECULA_STOP_NONE) step.stop = SPECULA_STOP_CALLBACK;
            }
            if (step.stop != SPECULA_STOP_NONE) break;
        }
        if (stop_reason != nullptr) *stop_reason = step.stop;
        if (result != SPECULA_OK) {
            throw Error(result, result == SPECULA_ERR_CANCELLED ? "generation cancelled" : "the context is full (n_ctx " + std::to_string(s.n_ctx()) + ")");
        }
    });
    return status;
}

specula_status specula_session_next(specula_session *session, const specula_generate_options *opts, specula_token_event *event,
                                    specula_error **err) {
    return guarded(err, [&] {
        require_arg(event != nullptr && event->struct_size >= sizeof(uint32_t), "event is NULL or its struct_size is unset");
        Session &s = session_of(session);
        s.configure_run(to_config(opts));
        const specula_status result = s.step(session->last_step);
        session->last_stats = s.stats();
        fill_event(event, session->last_step, &session->last_stats);
        if (result != SPECULA_OK)
            throw Error(result, result == SPECULA_ERR_CANCELLED ? "generation cancelled" : "the context is full (n_ctx " + std::to_string(s.n_ctx()) + ")");
    });
}

void specula_session_cancel(specula_session *session) {
    if (session != nullptr && session->session != nullptr) session->session->cancel();
}

specula_status specula_session_stats(const specula_session *session, specula_stats *stats, specula_error **err) {
    return guarded(err, [&] {
        require_arg(stats != nullptr && stats->struct_size >= sizeof(uint32_t), "stats is NULL or its struct_size is unset");
        const specula_stats full = session_of(const_cast<specula_session *>(session)).stats();
        const uint32_t size = stats->struct_size;
        std::memcpy(stats, &full, std::min<size_t>(size, sizeof full));
        stats->struct_size = size;
    });
}

const float *specula_session_logits(const specula_session *session) {
    return session && session->session ? session->session->logits() : nullptr;
}

}  // extern "C"
