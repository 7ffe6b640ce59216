#include "engine.h"

#include "prefix_reuse.h"
#include "tokenize_text.h"
#include "tree_widths.h"

#include <algorithm>
#include <chrono>

namespace demo {

namespace {

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Evaluated in chunks so that a long document shows its progress and Stop lands between chunks. A multiple of the
// session's batch (64 tokens): the same forward passes as one evaluation.
constexpr int kPromptChunk = 256;

// The SDK's message with what was being done in front ("cannot load draft 'x': ...").
specula::Error with_context(const specula::Error &e, const QString &what) {
    return specula::Error(e.status(), (what + ": ").toStdString() + e.what());
}

}  // namespace

void register_engine_types() {
    qRegisterMetaType<demo::Task>("demo::Task");
    qRegisterMetaType<demo::ModelConfig>("demo::ModelConfig");
    qRegisterMetaType<demo::ModelSummary>("demo::ModelSummary");
    qRegisterMetaType<demo::GenerateRequest>("demo::GenerateRequest");
    qRegisterMetaType<demo::RunResult>("demo::RunResult");
    qRegisterMetaType<demo::CompareResult>("demo::CompareResult");
    qRegisterMetaType<demo::EngineError>("demo::EngineError");
}

Engine::Engine(QObject *parent) : QObject(parent) { register_engine_types(); }

Engine::~Engine() { set_active(nullptr); }

void Engine::cancel() {
    cancel_load_.store(true);
    std::lock_guard<std::mutex> lock(active_mutex_);
    if (active_ != nullptr) active_->cancel();
}

void Engine::set_active(specula::Session *session) {
    std::lock_guard<std::mutex> lock(active_mutex_);
    active_ = session;
}

bool Engine::has_drafters(const Slot &slot) const { return slot.draft || slot.draft_model || slot.config.ngram; }

void Engine::attach_drafters(Slot &slot, specula::Session &session, bool on) {
    if (on && has_drafters(slot)) {
        specula::SpeculativeOptions so;
        so.draft = slot.draft ? &slot.draft : nullptr;
        so.draft_model = slot.draft_model ? &slot.draft_model : nullptr;
        so.ngram = slot.config.ngram;
        if (so.draft != nullptr || so.draft_model != nullptr) so.tree = slot.tree;
        so.ngram_nodes = kDefaultNgramNodes;
        session.set_speculative(so);
    } else {
        session.clear_speculative();
    }
}

void Engine::load(Task task, const ModelConfig &config) {
    cancel_load_.store(false);
    Slot fresh;
    fresh.config = config;
    try {
        if (config.model_path.isEmpty())
            throw specula::Error(SPECULA_ERR_INVALID_ARGUMENT, "no model chosen: open a GGUF file");
        float last = -1.0f;
        specula::ModelOptions mo;
        mo.progress = [&](float p) {
            if (p - last >= 0.02f || p >= 1.0f) {  // about 50 updates: enough for a progress bar
                last = p;
                emit loadProgress(task, p);
            }
            return !cancel_load_.load();
        };
        try {
            fresh.model = specula::Model::load(config.model_path.toStdString(), mo);
        } catch (const specula::Error &e) {
            if (e.status() == SPECULA_ERR_CANCELLED) throw specula::Error(e.status(), "loading cancelled");
            throw with_context(e, QStringLiteral("cannot load model '%1'").arg(config.model_path));
        }

        if (!config.draft_path.isEmpty()) {
            // A LongSpec draft or a whole small model: the file says which. A draft loader refuses a model with FORMAT,
            // so that is the one status that sends the file to the model loader.
            const std::string draft_path = config.draft_path.toStdString();
            try {
                fresh.draft = specula::Draft::load(draft_path, fresh.model);
            } catch (const specula::Error &e) {
                if (e.status() != SPECULA_ERR_FORMAT)
                    throw with_context(e, QStringLiteral("cannot use draft '%1'").arg(config.draft_path));
                try {
                    fresh.draft_model = specula::Model::load(draft_path);
                } catch (const specula::Error &) {
                    throw with_context(e, QStringLiteral("cannot use draft '%1'").arg(config.draft_path));
                }
            }
        }
        if (cancel_load_.load()) throw specula::Error(SPECULA_ERR_CANCELLED, "loading cancelled");

        try {
            fresh.tree = specula_apps::parse_tree_widths(config.tree.isEmpty() ? kDefaultTree : config.tree.toStdString(), "tree");
        } catch (const std::invalid_argument &e) {
            throw specula::Error(SPECULA_ERR_INVALID_ARGUMENT, e.what());
        }
        fresh.session_options.n_ctx = config.n_ctx;
        fresh.session_options.n_threads = config.threads;
        fresh.session_options.backend = config.backend;
        fresh.session_options.allow_fallback = 1;
        try {
            fresh.session = std::make_unique<specula::Session>(fresh.model, fresh.session_options, specula::SamplerOptions::greedy());
        } catch (const specula::Error &e) {
            throw with_context(e, QStringLiteral("cannot create a session"));
        }
        try {
            attach_drafters(fresh, *fresh.session, true);
        } catch (const specula::Error &e) {
            throw with_context(e, QStringLiteral("cannot use draft '%1'").arg(config.draft_path));
        }

        fresh.summary = summarize_model(fresh.model, config.model_path);
        fresh.summary.n_ctx = fresh.session->n_ctx();
        fresh.summary.backend = QString::fromStdString(fresh.session->backend());
        fresh.summary.backend_note = QString::fromStdString(fresh.session->backend_note());
        fresh.summary.drafter = QString::fromStdString(fresh.session->drafter_name());
        if (fresh.draft) {
            fresh.summary.draft_kind = QStringLiteral("LongSpec draft (window %1)").arg(fresh.draft.window());
            fresh.summary.draft_params = fresh.draft.n_params();
        } else if (fresh.draft_model) {
            fresh.summary.draft_kind = QStringLiteral("draft model (%1)").arg(QString::fromStdString(fresh.draft_model.arch()));
            fresh.summary.draft_params = fresh.draft_model.n_params();
        }
    } catch (const specula::Error &e) {
        EngineError err;
        err.task = task;
        err.status = e.status();
        err.message = QString::fromUtf8(e.what());
        emit loadFailed(task, err);  // the slot keeps the model it had
        return;
    } catch (const std::exception &e) {
        EngineError err;
        err.task = task;
        err.status = SPECULA_ERR_INTERNAL;
        err.message = QString::fromUtf8(e.what());
        emit loadFailed(task, err);
        return;
    }
    slots_[int(task)] = std::move(fresh);
    emit loaded(task, slots_[int(task)].summary);
}

EngineError Engine::error_of(const GenerateRequest &r, const std::exception &e) const {
    EngineError err;
    err.id = r.id;
    err.task = r.task;
    err.message = QString::fromUtf8(e.what());
    if (const auto *se = dynamic_cast<const specula::Error *>(&e)) {
        err.status = se->status();
    } else if (const auto *pr = dynamic_cast<const PromptRefused *>(&e)) {
        err.status = pr->kind == PromptRefused::Kind::TooLong ? SPECULA_ERR_CONTEXT_FULL : SPECULA_ERR_UNSUPPORTED;
        err.too_long = pr->kind == PromptRefused::Kind::TooLong;
        err.n_tokens = pr->n_tokens;
        err.n_room = pr->n_room;
    } else if (dynamic_cast<const std::bad_alloc *>(&e) != nullptr) {
        err.status = SPECULA_ERR_OUT_OF_MEMORY;
        err.message = QStringLiteral("out of memory");
    }
    return err;
}

RunResult Engine::run_on(Slot &slot, specula::Session &s, const GenerateRequest &r, const BuiltPrompt &p, bool reuse,
                         double t0) {
    RunResult res;
    res.id = r.id;
    res.task = r.task;
    res.prompt = p.tokens;
    res.note = p.note;
    res.context = p.context;
    if (p.tokens.empty()) throw specula::Error(SPECULA_ERR_INVALID_ARGUMENT, "the prompt is empty");
    if (int(p.tokens.size()) >= s.n_ctx())
        throw specula::Error(SPECULA_ERR_CONTEXT_FULL, QStringLiteral("the prompt has %1 tokens and the context holds %2: "
                                                                      "raise the context size or shorten the input")
                                                           .arg(p.tokens.size()).arg(s.n_ctx()).toStdString());

    // Drafters are attached (or detached) only when the request wants otherwise than the session has: attaching resets
    // their state.
    const bool speculate = r.speculative && has_drafters(slot);
    if (speculate == s.drafter_name().empty()) attach_drafters(slot, s, speculate);
    s.set_sampler(r.sampler);

    const PrefixPlan plan = plan_prefix_reuse(s.tokens(), p.tokens, reuse);
    s.rewind(plan.keep);
    // A Stop that came after the previous run had ended is still pending in the session: evaluate() takes it (and
    // evaluates the kept prefix's last token again when its logits went with the rewind, which generate would do).
    try {
        s.evaluate();
    } catch (const specula::Error &e) {
        if (e.status() != SPECULA_ERR_CANCELLED) throw;
    }
    const specula_stats before = s.stats();
    RoundTracker rounds;
    rounds.reset(before);
    stream_.begin(r.id, before);
    set_active(&s);
    struct ClearActive {
        Engine *engine;
        ~ClearActive() { engine->set_active(nullptr); }
    } clear_active{this};

    res.drafter = QString::fromStdString(s.drafter_name());
    res.stop = SPECULA_STOP_NONE;
    double ttft_ms = -1;      // what the run measures itself, beside the session's counters
    int drafted_emitted = 0;
    for (size_t i = size_t(plan.keep); i < p.tokens.size();) {
        const size_t n = std::min<size_t>(kPromptChunk, p.tokens.size() - i);
        s.append_tokens(p.tokens.data() + i, n);
        i += n;
        if (i < p.tokens.size()) {  // the last chunk is evaluated by generate, as the CLI's whole prompt is
            try {
                s.evaluate();
            } catch (const specula::Error &e) {
                if (e.status() != SPECULA_ERR_CANCELLED) throw;
                res.stop = SPECULA_STOP_CANCELLED;
                break;
            }
        }
        emit promptProgress(r.id, int(i) - plan.keep, plan.evaluate);
    }

    if (res.stop == SPECULA_STOP_NONE) {
        specula::GenerateOptions go(r.n_predict);
        res.stop = s.generate(go, [&](const specula_token_event &ev) {
            const double t = now_ms() - t0;
            RoundSample round;
            if (ev.stats != nullptr && rounds.update(*ev.stats, t, round)) stream_.push_round(r.id, round);
            if (ev.token == SPECULA_TOKEN_NULL && ev.text_len == 0) return true;
            if (ttft_ms < 0 && ev.token != SPECULA_TOKEN_NULL) ttft_ms = t;
            StreamedToken tok;
            tok.id = ev.token;
            tok.text = QByteArray(ev.text, qsizetype(ev.text_len));
            tok.drafted = ev.drafted != 0;
            tok.t_ms = t;
            res.text += tok.text;
            if (ev.token != SPECULA_TOKEN_NULL) {
                res.generated.push_back(ev.token);
                if (tok.drafted) ++drafted_emitted;
            }
            stream_.push(r.id, std::move(tok), ev.stats);
            return true;
        });
    }
    res.stats = stats_between(before, s.stats());
    res.stats.ttft_ms = std::max(0.0, ttft_ms);
    res.stats.drafted_emitted = drafted_emitted;
    res.stats.prompt_tokens = int(p.tokens.size());
    res.stats.cached_tokens = plan.keep;
    res.stats.total_ms = now_ms() - t0;
    return res;
}

void Engine::generate(const GenerateRequest &r) {
    const double t0 = now_ms();
    emit runStarted(r.id, QString());
    try {
        Slot &slot = slots_[int(r.task)];
        if (!slot.session) throw specula::Error(SPECULA_ERR_INVALID_ARGUMENT, "no model is loaded for this task");
        const BuiltPrompt prompt = r.build(slot.model, slot.session->n_ctx());
        const double build_ms = now_ms() - t0;
        RunResult res = run_on(slot, *slot.session, r, prompt, r.reuse_prefix, t0);
        res.stats.build_ms = build_ms;
        emit runFinished(res);
    } catch (const std::exception &e) {
        emit runFailed(error_of(r, e));
    }
}

void Engine::compare(const GenerateRequest &r) {
    try {
        Slot &slot = slots_[int(r.task)];
        if (!slot.session) throw specula::Error(SPECULA_ERR_INVALID_ARGUMENT, "no model is loaded for this task");
        if (!has_drafters(slot))
            throw specula::Error(SPECULA_ERR_INVALID_ARGUMENT, "nothing to compare: choose a draft or turn n-gram drafting on");
        const BuiltPrompt prompt = r.build(slot.model, slot.session->n_ctx());
        CompareResult cr;
        cr.id = r.id;
        cr.task = r.task;
        for (const bool spec : {false, true}) {
            emit runStarted(r.id, spec ? QStringLiteral("speculative") : QStringLiteral("plain"));
            GenerateRequest one = r;
            one.speculative = spec;
            one.sampler = specula::SamplerOptions::greedy();
            specula::Session session(slot.model, slot.session_options, one.sampler);
            RunResult res = run_on(slot, session, one, prompt, false, now_ms());
            if (res.stop == SPECULA_STOP_CANCELLED) throw specula::Error(SPECULA_ERR_CANCELLED, "comparison stopped");
            (spec ? cr.speculative : cr.plain) = std::move(res);
        }
        cr.identical = cr.plain.generated == cr.speculative.generated;
        emit compareFinished(cr);
    } catch (const std::exception &e) {
        emit runFailed(error_of(r, e));
    }
}

void Engine::countTokens(Task task, const QString &text, quint64 id) {
    const Slot &slot = slots_[int(task)];
    if (!slot.model) {
        emit tokensCounted(id, 0, 0);
        return;
    }
    try {
        const size_t n = tokenize_text(slot.model, text).size();
        emit tokensCounted(id, int(n), slot.session ? slot.session->n_ctx() : 0);
    } catch (const std::exception &) {
        emit tokensCounted(id, 0, 0);
    }
}

EngineThread::EngineThread() : engine_(new Engine) {
    thread_.setObjectName(QStringLiteral("specula-engine"));
    engine_->moveToThread(&thread_);
    QObject::connect(&thread_, &QThread::finished, engine_, &QObject::deleteLater);
    thread_.start();
}

EngineThread::~EngineThread() {
    engine_->cancel();
    thread_.quit();
    thread_.wait();
}

}  // namespace demo
