#include "automation.h"

#include "../ui/code_editor.h"
#include "../ui/code_page.h"
#include "../ui/main_window.h"
#include "../ui/summarize_page.h"

#include "backend_option.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimer>
#include <cstdio>

namespace demo {

bool AutomationOptions::any() const {
    return has_task() || !model.isEmpty() || !draft.isEmpty() || ngram.has_value() || !tree.isEmpty() || !backend.isEmpty() ||
           threads >= 0 || n_ctx >= 0 || quit || print || !screenshot.isEmpty();
}

std::optional<AutomationOptions> parse_automation(const QStringList &arguments, QString *error, QString *help_text) {
    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral("Specula's desktop demo: summarize documents and complete code with lossless "
                                               "speculative decoding. With --summarize or --complete it runs that task in the "
                                               "window for tests and scripts."));
    p.addHelpOption();
    p.addVersionOption();
    const QCommandLineOption model({"m", "model"}, "GGUF model of the task.", "FILE");
    const QCommandLineOption draft("draft", "LongSpec draft or draft model ('none': no draft).", "FILE");
    const QCommandLineOption ngram("ngram", "n-gram drafting: on or off.", "on|off");
    const QCommandLineOption tree("tree", "Draft tree widths, e.g. 1,1,1,1.", "WIDTHS");
    const QCommandLineOption backend("backend", "auto (CUDA, then Vulkan, then CPU), cpu, cuda or vulkan.", "NAME");
    const QCommandLineOption threads({"t", "threads"}, "Compute threads (0 = auto).", "N");
    const QCommandLineOption ctx({"c", "ctx-size"}, "Context size (0 = the model's default).", "N");
    const QCommandLineOption summarize("summarize", "Summarize this document.", "FILE");
    const QCommandLineOption complete("complete", "Complete code at LINE:COLUMN (1-based) of RELATIVE_FILE in REPO_DIR.",
                                      "REPO_DIR:RELATIVE_FILE:LINE:COLUMN");
    const QCommandLineOption temp("temp", "Temperature (0 = greedy).", "T");
    const QCommandLineOption n({"n", "n-predict"}, "Tokens to generate at most.", "N");
    const QCommandLineOption seed("seed", "Sampling seed.", "N");
    const QCommandLineOption screenshot("screenshot", "Save a screenshot of the window once the generation is shown.", "OUT.png");
    const QCommandLineOption print("print", "Write the generated text to stdout once the window shows it.");
    const QCommandLineOption quit("quit", "Exit when done: status 0 on success, else non-zero with the error on stderr.");
    const QCommandLineOption compare("compare", "Run the request without and with speculation (greedy) and compare.");
    const QCommandLineOption long_doc("long-document", "A document longer than the context: head-tail (keep its ends) or refuse.",
                                      "POLICY", "refuse");
    const QCommandLineOption dump_prompt("dump-prompt", "Write the prompt's token ids (comma-separated) to FILE.", "FILE");
    const QCommandLineOption report("report", "Write timings and counters of the run as JSON to FILE.", "FILE");
    p.addOptions({model, draft, ngram, tree, backend, threads, ctx, summarize, complete, temp, n, seed, screenshot, print, quit,
                  compare, long_doc, dump_prompt, report});
    if (!p.parse(arguments)) {
        *error = p.errorText();
        return std::nullopt;
    }
    if (p.isSet(QStringLiteral("help")) || p.isSet(QStringLiteral("version"))) {
        *help_text = p.isSet(QStringLiteral("help")) ? p.helpText()
                                                     : QStringLiteral("specula-demo %1\n").arg(QCoreApplication::applicationVersion());
        return std::nullopt;
    }
    if (!p.positionalArguments().isEmpty()) {
        *error = QStringLiteral("unexpected argument '%1'").arg(p.positionalArguments().front());
        return std::nullopt;
    }
    AutomationOptions o;
    auto to_int = [&](const QCommandLineOption &opt, int lo, int hi, int &out) {
        if (!p.isSet(opt)) return true;
        bool ok = false;
        const int v = p.value(opt).toInt(&ok);
        if (!ok || v < lo || v > hi) {
            *error = QStringLiteral("--%1: '%2' is not a number in [%3, %4]").arg(opt.names().last(), p.value(opt)).arg(lo).arg(hi);
            return false;
        }
        out = v;
        return true;
    };
    // A value that must be one of a few words (an unset option passes with its default).
    auto one_of = [&](const QCommandLineOption &opt, const QStringList &allowed) {
        if (!p.isSet(opt) || allowed.contains(p.value(opt))) return true;
        *error = QStringLiteral("--%1: expected %2").arg(opt.names().last(), allowed.join(QStringLiteral(" or ")));
        return false;
    };
    if (!one_of(ngram, {"on", "off"}) || !one_of(backend, {"auto", "cpu", "cuda", "vulkan"}) || !one_of(long_doc, {"head-tail", "refuse"}))
        return std::nullopt;
    o.model = p.value(model);
    o.draft = p.value(draft);
    if (p.isSet(ngram)) o.ngram = p.value(ngram) == QStringLiteral("on");
    o.tree = p.value(tree);
    o.backend = p.value(backend);
    if (!to_int(threads, 0, 512, o.threads) || !to_int(ctx, 0, 1 << 22, o.n_ctx) || !to_int(n, 1, 1 << 20, o.n_predict))
        return std::nullopt;
    o.summarize = p.value(summarize);
    if (p.isSet(complete)) {
        // REPO_DIR:RELATIVE_FILE:LINE:COLUMN, split from the right (a directory may contain ':').
        QStringList parts = p.value(complete).split(':');
        bool ok_line = false, ok_col = false;
        if (parts.size() >= 4) {
            o.column = parts.takeLast().toInt(&ok_col);
            o.line = parts.takeLast().toInt(&ok_line);
            o.file = parts.takeLast();
            o.repo = parts.join(':');
        }
        if (!ok_line || !ok_col || o.line < 1 || o.column < 1 || o.repo.isEmpty() || o.file.isEmpty()) {
            *error = QStringLiteral("--complete: expected REPO_DIR:RELATIVE_FILE:LINE:COLUMN with LINE and COLUMN from 1");
            return std::nullopt;
        }
    }
    if (!o.summarize.isEmpty() && !o.repo.isEmpty()) {
        *error = QStringLiteral("--summarize and --complete: give one task");
        return std::nullopt;
    }
    if (p.isSet(temp)) {
        bool ok = false;
        const double t = p.value(temp).toDouble(&ok);
        if (!ok || t < 0 || t > 10) {
            *error = QStringLiteral("--temp: expected a number in [0, 10]");
            return std::nullopt;
        }
        o.temperature = t;
    }
    if (p.isSet(seed)) {
        bool ok = false;
        o.seed = p.value(seed).toULongLong(&ok);
        if (!ok) {
            *error = QStringLiteral("--seed: expected a non-negative integer");
            return std::nullopt;
        }
    }
    o.head_tail = p.value(long_doc) == QStringLiteral("head-tail");
    o.screenshot = p.value(screenshot);
    o.dump_prompt = p.value(dump_prompt);
    o.report = p.value(report);
    o.print = p.isSet(print);
    o.quit = p.isSet(quit);
    o.compare = p.isSet(compare);
    if ((o.print || o.compare || !o.dump_prompt.isEmpty() || !o.report.isEmpty()) && !o.has_task()) {
        *error = QStringLiteral("--print, --compare, --dump-prompt and --report need --summarize or --complete");
        return std::nullopt;
    }
    return o;
}

Automation::Automation(MainWindow *window, AutomationOptions options) : window_(window), o_(std::move(options)) {
    task_ = o_.repo.isEmpty() ? Task::Summarize : Task::Complete;
}

void Automation::start() {
    connect(window_, &MainWindow::modelLoadFailed, this, [this](Task t, const QString &message) {
        if (t == task_) fail(message);
    });
    connect(window_, &MainWindow::runError, this, [this](const EngineError &e) { fail(e.message); });
    connect(window_, &MainWindow::runDone, this, [this](const RunResult &r, const UiTiming &t) {
        QJsonObject rep;
        rep["task"] = QString::fromLatin1(task_key(r.task));
        rep["stop"] = QString::fromUtf8(specula_stop_reason_string(r.stop));
        rep["drafter"] = r.drafter;
        rep["prompt_tokens"] = r.stats.prompt_tokens;
        rep["cached_tokens"] = r.stats.cached_tokens;
        rep["evaluated_tokens"] = r.stats.evaluated_tokens;
        rep["generated"] = r.stats.generated;
        rep["drafted_emitted"] = r.stats.drafted_emitted;
        rep["rounds"] = r.stats.rounds;
        rep["tau"] = r.stats.tau();
        rep["engine_ttft_ms"] = r.stats.ttft_ms;
        rep["prompt_build_ms"] = r.stats.build_ms;
        rep["engine_total_ms"] = r.stats.total_ms;
        rep["prompt_ms"] = r.stats.prompt_ms;
        rep["decode_ms"] = r.stats.decode_ms;
        rep["decode_tokens_per_s"] = r.stats.decode_tokens_per_s();
        rep["ui_ttft_ms"] = t.ttft_ms;
        rep["ui_stream_ms"] = t.stream_ms;
        rep["ui_tokens"] = t.tokens;
        rep["ui_tokens_per_s"] = t.tokens_per_s();
        rep["ui_thread_cpu_ms"] = t.ui_cpu_ms;
        rep["resident_bytes"] = double(resident_bytes());
        rep["prompt_form"] = r.note;
        succeed(r.text, rep, r.prompt);
    });
    connect(window_, &MainWindow::compareDone, this, [this](const CompareResult &r) {
        QJsonObject rep;
        rep["task"] = QString::fromLatin1(task_key(r.task));
        rep["identical"] = r.identical;
        rep["speedup"] = r.speedup();
        rep["plain_tokens_per_s"] = r.plain.stats.decode_tokens_per_s();
        rep["speculative_tokens_per_s"] = r.speculative.stats.decode_tokens_per_s();
        rep["tau"] = r.speculative.stats.tau();
        rep["drafter"] = r.speculative.drafter;
        rep["generated"] = r.speculative.stats.generated;
        rep["drafted_emitted"] = r.speculative.stats.drafted_emitted;
        rep["resident_bytes"] = double(resident_bytes());
        if (!r.identical) {
            fail(QStringLiteral("the outputs without and with speculation differ"));
            return;
        }
        succeed(r.speculative.text, rep, r.speculative.prompt);
    });

    if (!o_.has_task()) return;
    // The task's model: the window's configuration for it with the flags applied. A --model without --draft runs without
    // the default draft (which belongs to the default model).
    ModelConfig c = window_->model_config(task_);
    if (!o_.model.isEmpty()) {
        c.model_path = QFileInfo(o_.model).absoluteFilePath();
        c.draft_path.clear();
    }
    if (!o_.draft.isEmpty()) c.draft_path = o_.draft == QStringLiteral("none") ? QString() : QFileInfo(o_.draft).absoluteFilePath();
    if (o_.ngram) c.ngram = *o_.ngram;
    if (!o_.tree.isEmpty()) c.tree = o_.tree;
    if (!o_.backend.isEmpty())
        c.backend = specula_apps::backend_from_name(o_.backend.toStdString());
    if (o_.threads >= 0) c.threads = o_.threads;
    if (o_.n_ctx >= 0) c.n_ctx = o_.n_ctx;

    if (task_ == Task::Summarize) {
        SummarizePage *page = window_->summarize_page();
        QString error;
        if (!page->open_document(o_.summarize, &error)) {
            fail(error);
            return;
        }
        page->set_generation(o_.n_predict > 0 ? o_.n_predict : page->n_predict(), o_.temperature.value_or(page->temperature()),
                             o_.seed.value_or(page->seed()));
    } else {
        CodePage *page = window_->code_page();
        page->set_generation(o_.n_predict > 0 ? o_.n_predict : page->n_predict(), o_.temperature.value_or(page->temperature()));
    }
    connect(window_, &MainWindow::modelLoaded, this, [this](Task t) {
        if (t == task_ && !started_) {
            started_ = true;
            model_ready();
        }
    });
    window_->set_model_config(task_, c);  // loads it; then the tab (which would otherwise load the stored configuration)
    window_->set_task(task_);
}

// The request goes once the window has drawn what it just opened (a file's syntax highlighting, the first paint of the
// window): as a user's would, and so that start-up drawing does not overlap the timed request.
constexpr int kSettleMs = 300;

void Automation::model_ready() {
    if (task_ == Task::Summarize) {
        QTimer::singleShot(kSettleMs, this, [this] {
            if (o_.compare) window_->compare();
            else window_->summarize(o_.head_tail ? Overflow::HeadTail : Overflow::Refuse);
        });
        return;
    }
    CodePage *page = window_->code_page();
    connect(page, &CodePage::indexed, this, [this, page](const RepoIndex &index) {
        if (index.cancelled) {
            fail(QStringLiteral("indexing %1 was cancelled").arg(o_.repo));
            return;
        }
        QString error;
        if (!page->open_file(o_.file, &error)) {
            fail(error);
            return;
        }
        page->editor()->set_cursor(o_.line - 1, o_.column - 1);
        QTimer::singleShot(kSettleMs, this, [this] {
            if (o_.compare) window_->compare();
            else window_->complete();
        });
    }, Qt::SingleShotConnection);
    page->open_repository(o_.repo);
}

bool Automation::save_screenshot(QString *error) {
    if (o_.screenshot.isEmpty()) return true;
    window_->repaint();
    const QPixmap shot = window_->grab();
    if (shot.isNull() || !shot.save(o_.screenshot, "PNG")) {
        *error = QStringLiteral("cannot save the screenshot to %1").arg(o_.screenshot);
        return false;
    }
    return true;
}

void Automation::succeed(const QByteArray &text, const QJsonObject &report, const std::vector<int32_t> &prompt) {
    if (done_) return;
    done_ = true;
    // Let the window draw the last tokens and the stats first: what is printed and captured is what the window shows.
    QTimer::singleShot(100, this, [this, text, report, prompt] {
        QApplication::processEvents();
        QString error;
        if (!save_screenshot(&error)) {
            done_ = false;
            fail(error);
            return;
        }
        if (!o_.dump_prompt.isEmpty()) {
            QFile f(o_.dump_prompt);
            QStringList ids;
            for (int32_t t : prompt) ids << QString::number(t);
            if (!f.open(QIODevice::WriteOnly) || f.write(ids.join(',').toUtf8() + '\n') < 0) {
                done_ = false;
                fail(QStringLiteral("cannot write %1").arg(o_.dump_prompt));
                return;
            }
        }
        if (!o_.report.isEmpty()) {
            QFile f(o_.report);
            if (!f.open(QIODevice::WriteOnly) || f.write(QJsonDocument(report).toJson()) < 0) {
                done_ = false;
                fail(QStringLiteral("cannot write %1").arg(o_.report));
                return;
            }
        }
        if (o_.print) {
            std::fwrite(text.constData(), 1, size_t(text.size()), stdout);
            std::fflush(stdout);
        }
        if (o_.quit) leave(0);
    });
}

void Automation::fail(const QString &message) {
    if (done_) return;
    done_ = true;
    std::fprintf(stderr, "specula-demo: error: %s\n", message.toUtf8().constData());
    QTimer::singleShot(100, this, [this] {
        QString ignored;
        save_screenshot(&ignored);  // the error banner, for whoever looks
        if (o_.quit) leave(1);
    });
}

void Automation::leave(int code) {
    window_->close();
    QApplication::exit(code);
}

}  // namespace demo
