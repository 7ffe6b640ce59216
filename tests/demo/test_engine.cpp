// The demo's engine thread with real models: loading (progress, cancel, errors that keep the previous model), generation
// streamed token by token and equal to plain greedy decoding with the trained draft attached, prefix reuse (only the new
// tail is evaluated, and the output equals a cold run), Stop, the comparison, and a prompt over the context.
#include "demo_test_support.h"
#include "engine/engine.h"
#include "engine/prefix_reuse.h"
#include "prompts/document_prompt.h"

#include <QSignalSpy>
#include <QtTest>

using namespace demo;
using namespace demo_test;

namespace {

ModelConfig bundled_config(bool with_draft = true) {
    ModelConfig c;
    c.model_path = bundled_model();
    c.draft_path = with_draft ? bundled_draft() : QString();
    c.ngram = false;
    c.threads = 2;
    return c;
}

PromptBuilder text_prompt(const QString &text) {
    return [text](const specula::Model &m, int) {
        BuiltPrompt p;
        p.tokens = tokenize_text(m, text, SPECULA_TOKENIZE_ADD_SPECIAL);
        return p;
    };
}

// The tokens plain greedy decoding gives on the public API, for comparison.
std::vector<int32_t> plain_greedy(const QString &model, const std::vector<int32_t> &prompt, int n) {
    const specula::Model m = load_model(model);
    specula::SessionOptions so;
    so.n_threads = 2;
    specula::Session s(m, so, specula::SamplerOptions::greedy());
    s.append_tokens(prompt);
    std::vector<int32_t> out;
    s.generate(specula::GenerateOptions(n), [&](const specula_token_event &ev) {
        if (ev.token != SPECULA_TOKEN_NULL) out.push_back(ev.token);
        return true;
    });
    return out;
}

struct Harness {
    EngineThread thread;
    Engine *e = thread.engine();

    bool load(Task t, const ModelConfig &c, ModelSummary *summary = nullptr, EngineError *error = nullptr) {
        QSignalSpy ok(e, &Engine::loaded), bad(e, &Engine::loadFailed);
        QMetaObject::invokeMethod(e, "load", Qt::QueuedConnection, Q_ARG(demo::Task, t), Q_ARG(demo::ModelConfig, c));
        if (!QTest::qWaitFor([&] { return ok.count() + bad.count() > 0; }, 30000)) return false;
        if (ok.count() > 0 && summary) *summary = ok.front().at(1).value<ModelSummary>();
        if (bad.count() > 0 && error) *error = bad.front().at(1).value<EngineError>();
        return ok.count() > 0;
    }

    // Runs a request; returns the result (or sets *error); tokens streamed are appended to *streamed.
    std::optional<RunResult> run(GenerateRequest r, EngineError *error = nullptr, std::vector<StreamedToken> *streamed = nullptr,
                                 const std::function<void()> &on_first_token = {}) {
        QSignalSpy ok(e, &Engine::runFinished), bad(e, &Engine::runFailed);
        QMetaObject::Connection c = QObject::connect(e->stream(), &TokenStream::available, e->stream(), [&] {
            StreamBatch b = e->stream()->take();
            if (streamed) streamed->insert(streamed->end(), b.tokens.begin(), b.tokens.end());
            if (on_first_token && !b.tokens.empty()) on_first_token();
        }, Qt::QueuedConnection);
        e->stream()->take();
        QMetaObject::invokeMethod(e, "generate", Qt::QueuedConnection, Q_ARG(demo::GenerateRequest, r));
        const bool done = QTest::qWaitFor([&] { return ok.count() + bad.count() > 0; }, 60000);
        QCoreApplication::processEvents();
        const StreamBatch rest = e->stream()->take();
        if (streamed) streamed->insert(streamed->end(), rest.tokens.begin(), rest.tokens.end());
        QObject::disconnect(c);
        if (!done) return std::nullopt;
        if (bad.count() > 0) {
            if (error) *error = bad.front().at(0).value<EngineError>();
            return std::nullopt;
        }
        return ok.front().at(0).value<RunResult>();
    }
};

}  // namespace

class TestEngine : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { register_engine_types(); }

    void loading_reports_progress_and_what_the_model_is() {
        Harness h;
        QSignalSpy progress(h.e, &Engine::loadProgress);
        ModelSummary s;
        QVERIFY(h.load(Task::Summarize, bundled_config(), &s));
        QVERIFY(progress.count() >= 2);
        QCOMPARE(progress.back().at(1).toFloat(), 1.0f);
        QCOMPARE(s.arch, QStringLiteral("llama"));
        QCOMPARE(s.n_layer, 5);
        QCOMPARE(s.n_vocab, 512);
        QVERIFY(s.n_params > 250000 && s.n_params < 300000);
        QCOMPARE(s.tensor_types.size(), 1);
        QCOMPARE(s.tensor_types.front().type, QStringLiteral("F32"));
        QVERIFY(!s.has_chat_template);
        QVERIFY(!s.has_fim);
        QCOMPARE(s.backend, QStringLiteral("cpu"));
        QCOMPARE(s.drafter, QStringLiteral("longspec"));
        QVERIFY(s.draft_kind.startsWith(QStringLiteral("LongSpec draft")));
        QVERIFY(s.describe().contains(QStringLiteral("chat template: none")));
    }

    void a_load_can_be_cancelled_and_the_engine_stays_usable() {
        Harness h;
        // Cancel from the first progress report (on the engine thread): the SDK's progress callback then stops the load.
        QObject::connect(h.e, &Engine::loadProgress, h.e, [&h](Task, float p) { if (p < 1.0f) h.e->cancel(); }, Qt::DirectConnection);
        EngineError err;
        QVERIFY(!h.load(Task::Summarize, bundled_config(), nullptr, &err));
        QCOMPARE(err.status, SPECULA_ERR_CANCELLED);
        QObject::disconnect(h.e, &Engine::loadProgress, h.e, nullptr);
        QVERIFY(h.load(Task::Summarize, bundled_config()));
    }

    void load_errors_are_reported_and_keep_the_model_that_was_there() {
        Harness h;
        QVERIFY(h.load(Task::Summarize, bundled_config()));
        EngineError err;
        ModelConfig missing = bundled_config();
        missing.model_path = QStringLiteral("/nonexistent/model.gguf");
        QVERIFY(!h.load(Task::Summarize, missing, nullptr, &err));
        QCOMPARE(err.status, SPECULA_ERR_IO);
        QVERIFY(err.message.contains(QStringLiteral("/nonexistent/model.gguf")));

        QTemporaryDir dir;
        QFile junk(dir.filePath(QStringLiteral("junk.gguf")));
        QVERIFY(junk.open(QIODevice::WriteOnly));
        junk.write("this is not a GGUF file at all, just text");
        junk.close();
        ModelConfig bad = bundled_config();
        bad.model_path = junk.fileName();
        QVERIFY(!h.load(Task::Summarize, bad, nullptr, &err));
        QCOMPARE(err.status, SPECULA_ERR_FORMAT);

        ModelConfig wrong_draft = bundled_config();
        wrong_draft.draft_path = code_draft();  // trained for code-7m
        QVERIFY(!h.load(Task::Summarize, wrong_draft, nullptr, &err));
        QCOMPARE(err.status, SPECULA_ERR_INCOMPATIBLE);
        QVERIFY(err.message.contains(QStringLiteral("cannot use draft")));

        ModelConfig bad_tree = bundled_config();
        bad_tree.tree = QStringLiteral("1,0");
        QVERIFY(!h.load(Task::Summarize, bad_tree, nullptr, &err));
        QCOMPARE(err.status, SPECULA_ERR_INVALID_ARGUMENT);

        // The model loaded first still answers.
        GenerateRequest r;
        r.task = Task::Summarize;
        r.build = text_prompt(QStringLiteral("Once upon a time"));
        r.n_predict = 8;
        const auto res = h.run(r);
        QVERIFY(res.has_value());
        QCOMPARE(int(res->generated.size()), 8);
    }

    void a_draft_model_is_told_apart_from_a_longspec_draft() {
        const QString draft_model = shared_fixture(QStringLiteral("models/stories260K-L3.gguf"));
        if (draft_model.isEmpty()) QSKIP("../shared/fixtures/models/stories260K-L3.gguf is missing");
        Harness h;
        ModelConfig c = bundled_config();
        c.draft_path = draft_model;
        ModelSummary s;
        QVERIFY(h.load(Task::Summarize, c, &s));
        QVERIFY(s.draft_kind.startsWith(QStringLiteral("draft model")));
        QCOMPARE(s.drafter, QStringLiteral("draft-model"));
    }

    void streamed_tokens_with_the_trained_draft_are_plain_greedy_decoding() {
        Harness h;
        QVERIFY(h.load(Task::Summarize, bundled_config()));
        GenerateRequest r;
        r.task = Task::Summarize;
        r.build = text_prompt(QStringLiteral("Once upon a time, there was a little girl named Lily."));
        r.n_predict = 120;
        std::vector<StreamedToken> streamed;
        const auto res = h.run(r, nullptr, &streamed);
        QVERIFY(res.has_value());
        QCOMPARE(res->drafter, QStringLiteral("longspec"));
        QCOMPARE(res->generated, plain_greedy(bundled_model(), res->prompt, 120));
        QByteArray text;
        int drafted = 0, tokens = 0;
        for (const StreamedToken &t : streamed) {
            text += t.text;
            if (t.id != SPECULA_TOKEN_NULL) ++tokens;
            if (t.drafted) ++drafted;
        }
        QCOMPARE(tokens, 120);
        QCOMPARE(text, res->text);
        QCOMPARE(drafted, res->stats.drafted_emitted);
        QVERIFY(drafted > 0);  // the trained draft's tokens are accepted
        QVERIFY(res->stats.rounds > 0);
        QCOMPARE(res->stats.generated, 120);
        QVERIFY(res->stats.ttft_ms > 0);
    }

    void a_second_request_evaluates_only_what_changed() {
        Harness h;
        QVERIFY(h.load(Task::Complete, bundled_config()));
        const QString base = QStringLiteral("Once upon a time, there was a little girl named Lily. She loved to play outside. ");
        GenerateRequest r;
        r.task = Task::Complete;
        r.n_predict = 16;
        r.build = text_prompt(base + QStringLiteral("One day"));
        const auto first = h.run(r);
        QVERIFY(first.has_value());
        QCOMPARE(first->stats.cached_tokens, 0);

        r.build = text_prompt(base + QStringLiteral("The next morning"));
        const auto second = h.run(r);
        QVERIFY(second.has_value());
        const specula::Model m = load_model(bundled_model());
        const int common = common_prefix(tokenize_text(m, base + QStringLiteral("One day"), SPECULA_TOKENIZE_ADD_SPECIAL), second->prompt);
        QVERIFY(common > 20);
        QCOMPARE(second->stats.cached_tokens, common);
        QVERIFY(second->stats.evaluated_tokens <= int(second->prompt.size()) - common + 1);
        QVERIFY(second->stats.evaluated_tokens < int(second->prompt.size()) / 2);

        // The same request cold gives the same tokens.
        r.reuse_prefix = false;
        const auto cold = h.run(r);
        QVERIFY(cold.has_value());
        QCOMPARE(cold->stats.cached_tokens, 0);
        QCOMPARE(cold->generated, second->generated);
        QCOMPARE(cold->generated, plain_greedy(bundled_model(), cold->prompt, 16));

        // The very same prompt again: all of it cached.
        r.reuse_prefix = true;
        const auto again = h.run(r);
        QVERIFY(again.has_value());
        QCOMPARE(again->stats.cached_tokens, int(again->prompt.size()));
        QCOMPARE(again->generated, cold->generated);
    }

    void stop_cancels_a_running_generation_and_the_next_run_is_not_cancelled() {
        Harness h;
        QVERIFY(h.load(Task::Summarize, bundled_config(false)));
        GenerateRequest r;
        r.task = Task::Summarize;
        r.build = text_prompt(QStringLiteral("Once upon a time"));
        r.n_predict = -1;  // until the context is full: 2048 tokens, unless stopped
        const auto res = h.run(r, nullptr, nullptr, [&h] { h.e->cancel(); });
        QVERIFY(res.has_value());
        QCOMPARE(res->stop, SPECULA_STOP_CANCELLED);
        QVERIFY(res->stats.generated < 2000);
        // A Stop that arrives when nothing runs must not cancel the next run.
        h.e->cancel();
        r.n_predict = 10;
        const auto next = h.run(r);
        QVERIFY(next.has_value());
        QCOMPARE(next->stop, SPECULA_STOP_MAX_TOKENS);
        QCOMPARE(int(next->generated.size()), 10);
    }

    void compare_runs_both_ways_and_finds_them_identical() {
        Harness h;
        QVERIFY(h.load(Task::Summarize, bundled_config()));
        GenerateRequest r;
        r.task = Task::Summarize;
        r.build = text_prompt(QStringLiteral("Once upon a time, there was a big dog."));
        r.n_predict = 64;
        QSignalSpy done(h.e, &Engine::compareFinished), failed(h.e, &Engine::runFailed);
        QMetaObject::invokeMethod(h.e, "compare", Qt::QueuedConnection, Q_ARG(demo::GenerateRequest, r));
        QVERIFY(QTest::qWaitFor([&] { return done.count() + failed.count() > 0; }, 60000));
        QCOMPARE(failed.count(), 0);
        const CompareResult c = done.front().at(0).value<CompareResult>();
        QVERIFY(c.identical);
        QCOMPARE(int(c.plain.generated.size()), 64);
        QCOMPARE(c.plain.generated, c.speculative.generated);
        QVERIFY(c.plain.drafter.isEmpty());
        QCOMPARE(c.speculative.drafter, QStringLiteral("longspec"));
        QVERIFY(c.speculative.stats.rounds > 0);
        QVERIFY(c.speedup() > 0);
    }

    void a_prompt_over_the_context_is_an_error_not_a_crash() {
        Harness h;
        ModelConfig c = bundled_config();
        c.n_ctx = 64;
        QVERIFY(h.load(Task::Summarize, c));
        GenerateRequest r;
        r.task = Task::Summarize;
        r.build = [](const specula::Model &m, int n_ctx) {
            BuiltPrompt p;
            p.tokens.assign(size_t(n_ctx), m.token_bos());
            return p;
        };
        EngineError err;
        QVERIFY(!h.run(r, &err).has_value());
        QCOMPARE(err.status, SPECULA_ERR_CONTEXT_FULL);
        QVERIFY(err.message.contains(QStringLiteral("64")));
        // A document prompt under the refuse policy names both sizes.
        DocumentPromptOptions o;
        o.n_predict = 16;
        const QString doc = QString(QStringLiteral("Lily and Max played in the park. ")).repeated(40);
        r.build = [doc, o](const specula::Model &m, int n_ctx) { return build_document_prompt(m, n_ctx, doc, o); };
        QVERIFY(!h.run(r, &err).has_value());
        QVERIFY(err.too_long);
        QCOMPARE(err.n_room, 48);
        // No model for the other task.
        r.task = Task::Complete;
        QVERIFY(!h.run(r, &err).has_value());
        QCOMPARE(err.status, SPECULA_ERR_INVALID_ARGUMENT);
    }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "test_engine.moc"
