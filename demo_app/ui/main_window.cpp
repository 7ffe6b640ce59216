#include "main_window.h"

#include "../app/default_models.h"
#include "../engine/tokenize_text.h"
#include "../prompts/code_context.h"
#include "charts_panel.h"
#include "code_editor.h"
#include "code_page.h"
#include "model_panel.h"
#include "output_view.h"
#include "summarize_page.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>

namespace demo {

quint64 resident_bytes() {
    QFile f(QStringLiteral("/proc/self/status"));
    if (!f.open(QIODevice::ReadOnly)) return 0;
    for (const QByteArray &line : f.readAll().split('\n'))
        if (line.startsWith("VmRSS:")) return line.mid(6).trimmed().split(' ').value(0).toULongLong() * 1024;
    return 0;
}

namespace {
QString task_title(Task t) { return t == Task::Summarize ? QObject::tr("Model for documents") : QObject::tr("Model for code"); }

specula::SamplerOptions sampler_for(double temperature, quint64 seed) {
    specula::SamplerOptions s;
    s.temperature = float(temperature);
    s.seed = seed;
    return s;
}
}  // namespace

MainWindow::MainWindow(QSettings &store, bool persist, QWidget *parent)
    : QMainWindow(parent), store_(store), settings_(store), persist_(persist) {
    setWindowTitle(tr("Specula demo: lossless speculative decoding"));
    setAcceptDrops(true);

    panel_ = new ModelPanel(this);
    panel_->setMinimumWidth(330);
    summarize_ = new SummarizePage(this);
    code_ = new CodePage(this);
    tabs_ = new QTabWidget(this);
    tabs_->addTab(summarize_, tr("Summarize a document"));
    tabs_->addTab(code_, tr("Complete code"));
    charts_ = new ChartsPanel(this);
    runs_ = new RunController(engine(), charts_, this);

    banner_ = new QLabel(this);
    banner_->setObjectName(QStringLiteral("errorBanner"));
    banner_->setWordWrap(true);
    banner_->setVisible(false);
    banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    dismiss_ = new QPushButton(tr("Dismiss"), this);
    dismiss_->setVisible(false);
    connect(dismiss_, &QPushButton::clicked, this, [this] {
        banner_->setVisible(false);
        dismiss_->setVisible(false);
    });
    auto *banner_row = new QHBoxLayout;
    banner_row->addWidget(banner_, 1);
    banner_row->addWidget(dismiss_);

    auto *vsplit = new QSplitter(Qt::Vertical, this);
    vsplit->addWidget(tabs_);
    vsplit->addWidget(charts_);
    vsplit->setStretchFactor(0, 3);
    vsplit->setStretchFactor(1, 1);
    auto *center = new QWidget(this);
    auto *center_layout = new QVBoxLayout(center);
    center_layout->setContentsMargins(0, 0, 0, 0);
    center_layout->addLayout(banner_row);
    center_layout->addWidget(vsplit, 1);
    auto *hsplit = new QSplitter(Qt::Horizontal, this);
    hsplit->addWidget(panel_);
    hsplit->addWidget(center);
    hsplit->setStretchFactor(1, 1);
    setCentralWidget(hsplit);

    memory_ = new QLabel(this);
    statusBar()->addPermanentWidget(memory_);
    memory_timer_ = new QTimer(this);
    memory_timer_->setInterval(1000);
    connect(memory_timer_, &QTimer::timeout, this, &MainWindow::update_memory);
    memory_timer_->start();
    update_memory();
    build_menus();

    // Settings: a first launch gets the bundled models.
    for (int t = 0; t < kTaskCount; ++t) configs_[t] = settings_.model_config(Task(t), default_model_config(Task(t)));
    const GenerationSettings gs = settings_.generation(Task::Summarize), gc = settings_.generation(Task::Complete);
    summarize_->set_generation(gs.n_predict, gs.temperature, gs.seed);
    code_->set_generation(gc.n_predict, gc.temperature);
    panel_->set_recent(settings_.recent_models());
    resize(1440, 920);
    if (persist_) restoreGeometry(settings_.bytes(QStringLiteral("window/geometry")));

    // The engine.
    Engine *e = engine();
    connect(e, &Engine::loadProgress, this, [this](Task task, float p) {
        if (task == current_task()) panel_->set_progress(p);
    });
    connect(e, &Engine::loaded, this, [this](Task task, const ModelSummary &s) {
        loading_[int(task)] = false;
        loaded_[int(task)] = s;
        loaded_config_[int(task)] = requested_[int(task)];
        if (persist_) {
            settings_.add_recent_model(s.path);
            panel_->set_recent(settings_.recent_models());
        }
        if (task == current_task()) {
            panel_->set_loading(false);
            panel_->show_summary(s);
        }
        statusBar()->showMessage(tr("loaded %1 (%2) for %3").arg(QFileInfo(s.path).fileName(), s.backend, QString::fromLatin1(task_key(task))), 5000);
        if (task == Task::Summarize) request_token_count();
        save_settings();
        update_memory();
        emit modelLoaded(task, s);
    });
    connect(e, &Engine::loadFailed, this, [this](Task task, const EngineError &err) {
        loading_[int(task)] = false;
        // The engine keeps the model it had: so does the window (and the panel shows that model's configuration again).
        if (loaded_[int(task)]) configs_[int(task)] = loaded_config_[int(task)];
        if (task == current_task()) {
            panel_->set_loading(false);
            if (loaded_[int(task)]) {
                panel_->set_config(configs_[int(task)]);
                panel_->show_summary(*loaded_[int(task)]);
            } else {
                panel_->set_progress(0);
                panel_->show_unloaded(err.message);
            }
        }
        if (err.status != SPECULA_ERR_CANCELLED) show_error(err.message);
        else statusBar()->showMessage(tr("loading cancelled"), 5000);
        emit modelLoadFailed(task, err.message);
    });
    connect(e, &Engine::tokensCounted, this, [this](quint64 id, int n, int n_ctx) {
        if (id != count_id_) return;
        summarize_->set_token_count(n, n_ctx, prompt_room(n_ctx, summarize_->n_predict()));
    });

    connect(runs_, &RunController::started, this, [this](Task) {
        summarize_->set_running(true);
        code_->set_running(true);
    });
    connect(runs_, &RunController::idle, this, [this] {
        summarize_->set_running(false);
        code_->set_running(false);
    });
    connect(runs_, &RunController::status, this, [this](const QString &s) { statusBar()->showMessage(s); });
    connect(runs_, &RunController::finished, this, &MainWindow::on_finished);
    connect(runs_, &RunController::compared, this, &MainWindow::on_compared);
    connect(runs_, &RunController::failed, this, &MainWindow::on_failed);

    // The panel and the pages.
    connect(panel_, &ModelPanel::loadRequested, this, [this] {
        configs_[int(current_task())] = panel_->config();
        load_task_model(current_task());
    });
    connect(panel_, &ModelPanel::cancelRequested, this, [this] { engine()->cancel(); });
    connect(tabs_, &QTabWidget::currentChanged, this, [this](int) {
        const Task t = current_task();
        show_task_in_panel(t);
        if (!loaded_[int(t)] && !loading_[int(t)] && !configs_[int(t)].model_path.isEmpty()) load_task_model(t);
    });
    connect(summarize_, &SummarizePage::summarizeRequested, this, [this] { summarize(Overflow::Refuse); });
    connect(summarize_, &SummarizePage::compareRequested, this, &MainWindow::compare);
    connect(summarize_, &SummarizePage::stopRequested, this, &MainWindow::stop);
    connect(summarize_, &SummarizePage::openFailed, this, &MainWindow::show_error);
    connect(summarize_->output(), &OutputView::saveFailed, this, &MainWindow::show_error);
    connect(code_->output(), &OutputView::saveFailed, this, &MainWindow::show_error);
    connect(code_, &CodePage::completeRequested, this, &MainWindow::complete);
    connect(code_, &CodePage::compareRequested, this, &MainWindow::compare);
    connect(code_, &CodePage::stopRequested, this, &MainWindow::stop);
    connect(code_, &CodePage::openFailed, this, &MainWindow::show_error);
    // The ghost text in the editor follows the stream five times a second (redrawing the editor is the costliest part of
    // a frame); the output view shows every frame, and the whole suggestion is shown when the run ends.
    ghost_timer_ = new QTimer(this);
    ghost_timer_->setSingleShot(true);
    ghost_timer_->setInterval(200);
    connect(ghost_timer_, &QTimer::timeout, this, [this] {
        if (runs_->running() && runs_->task() == Task::Complete) code_->show_suggestion(code_->output()->text());
    });
    connect(code_->output(), &OutputView::appended, this, [this] {
        if (runs_->running() && runs_->task() == Task::Complete && !ghost_timer_->isActive()) ghost_timer_->start();
    });
    connect(code_, &CodePage::indexed, this, [this](const RepoIndex &index) {
        if (!index.cancelled) settings_.set_value(QStringLiteral("code/repository"), index.root);
    });
    count_timer_ = new QTimer(this);
    count_timer_->setSingleShot(true);
    count_timer_->setInterval(300);
    connect(count_timer_, &QTimer::timeout, this, &MainWindow::request_token_count);
    connect(summarize_, &SummarizePage::documentChanged, count_timer_, qOverload<>(&QTimer::start));

    show_task_in_panel(Task::Summarize);
    summarize_->set_token_count(0, 0, 0);
}

MainWindow::~MainWindow() { runs_->stop(); }

void MainWindow::restore_session() {
    const QString document = settings_.value(QStringLiteral("summarize/document"));
    if (!document.isEmpty() && QFileInfo(document).isFile()) {
        QString ignored;
        summarize_->open_document(document, &ignored);
    }
    const QString repo = settings_.value(QStringLiteral("code/repository"));
    if (!repo.isEmpty() && QFileInfo(repo).isDir()) code_->open_repository(repo);
    if (!configs_[int(current_task())].model_path.isEmpty()) load_task_model(current_task());
}

Task MainWindow::current_task() const { return tabs_->currentIndex() == 1 ? Task::Complete : Task::Summarize; }

void MainWindow::set_task(Task task) { tabs_->setCurrentIndex(task == Task::Complete ? 1 : 0); }

void MainWindow::set_model_config(Task task, const ModelConfig &config) {
    configs_[int(task)] = config;
    if (task == current_task()) panel_->set_config(config);
    load_task_model(task);
}

void MainWindow::show_task_in_panel(Task task) {
    panel_->set_task_title(task_title(task));
    panel_->set_config(configs_[int(task)]);
    panel_->set_loading(loading_[int(task)]);
    if (loaded_[int(task)]) panel_->show_summary(*loaded_[int(task)]);
    else panel_->show_unloaded(configs_[int(task)].model_path.isEmpty() ? tr("No model chosen: open a GGUF file or drop one here.")
                                                                        : tr("Not loaded yet."));
}

void MainWindow::load_task_model(Task task) {
    if (runs_->running()) {
        show_error(tr("stop the running request before loading another model"));
        return;
    }
    loading_[int(task)] = true;
    requested_[int(task)] = configs_[int(task)];
    if (task == current_task()) {
        panel_->set_loading(true);
        panel_->show_unloaded(tr("Loading %1…").arg(configs_[int(task)].model_path));
    }
    save_settings();
    QMetaObject::invokeMethod(engine(), "load", Qt::QueuedConnection, Q_ARG(demo::Task, task),
                              Q_ARG(demo::ModelConfig, configs_[int(task)]));
}

void MainWindow::build_menus() {
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("Open &model…"), this, [this] { panel_->choose_model(); });
    file->addAction(tr("Open &draft…"), this, [this] { panel_->choose_draft(); });
    file->addAction(tr("Open d&ocument…"), this, [this] {
        set_task(Task::Summarize);
        summarize_->choose_document();
    });
    file->addAction(tr("Open &folder…"), this, [this] {
        set_task(Task::Complete);
        code_->choose_repository();
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    QMenu *run = menuBar()->addMenu(tr("&Run"));
    run->addAction(tr("&Summarize"), this, [this] { summarize(Overflow::Refuse); });
    run->addAction(tr("&Complete at the cursor"), this, &MainWindow::complete);
    run->addAction(tr("S&top"), QKeySequence(Qt::Key_Escape | Qt::ShiftModifier), this, &MainWindow::stop);
    run->addAction(tr("Co&mpare with and without speculation"), this, &MainWindow::compare);
    QMenu *help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About"), this, [this] {
        QMessageBox::about(this, tr("Specula demo"),
                           tr("<p>Specula %1: lossless speculative decoding of local GGUF models.</p>"
                              "<p>Tokens highlighted in green were drafted (by the LongSpec draft, a draft model or n-grams) and "
                              "accepted by the model; the others the model produced itself. Either way they are exactly what the "
                              "model alone would produce.</p>")
                               .arg(QString::fromStdString(specula::version())));
    });
}

void MainWindow::save_settings() {
    if (!persist_) return;
    for (int t = 0; t < kTaskCount; ++t) settings_.set_model_config(Task(t), configs_[t]);
    settings_.set_generation(Task::Summarize, {summarize_->n_predict(), summarize_->temperature(), summarize_->seed()});
    settings_.set_generation(Task::Complete, {code_->n_predict(), code_->temperature(), 1});
    settings_.set_value(QStringLiteral("window/geometry"), saveGeometry());
    if (!summarize_->document_path().isEmpty()) settings_.set_value(QStringLiteral("summarize/document"), summarize_->document_path());
    settings_.sync();
}

void MainWindow::request_token_count() {
    if (!loaded_[int(Task::Summarize)]) return;
    ++count_id_;
    QMetaObject::invokeMethod(engine(), "countTokens", Qt::QueuedConnection, Q_ARG(demo::Task, Task::Summarize),
                              Q_ARG(QString, summarize_->instruction() + QStringLiteral("\n\n") + summarize_->document()),
                              Q_ARG(quint64, count_id_));
}

GenerateRequest MainWindow::make_request(Task task) const {
    GenerateRequest r;
    r.task = task;
    if (task == Task::Summarize) {
        r.n_predict = summarize_->n_predict();
        r.sampler = sampler_for(summarize_->temperature(), summarize_->seed());
    } else {
        r.n_predict = code_->n_predict();
        r.sampler = sampler_for(code_->temperature(), 1);
    }
    return r;
}

bool MainWindow::ready_for(Task task) {
    if (runs_->running()) return false;
    if (!loaded_[int(task)]) {
        show_error(task == Task::Summarize ? tr("no model is loaded for documents: load one in the panel on the left")
                                           : tr("no model is loaded for code: load one in the panel on the left"));
        return false;
    }
    set_task(task);
    return true;
}

std::optional<GenerateRequest> MainWindow::summarize_request(Overflow overflow) {
    if (!ready_for(Task::Summarize)) return std::nullopt;
    GenerateRequest r = make_request(Task::Summarize);
    DocumentPromptOptions o;
    o.instruction = summarize_->instruction();
    o.n_predict = r.n_predict;
    o.overflow = overflow;
    const QString document = summarize_->document();
    if (document.trimmed().isEmpty()) {
        show_error(tr("the document is empty: paste or open one"));
        return std::nullopt;
    }
    r.build = [document, o](const specula::Model &m, int n_ctx) { return build_document_prompt(m, n_ctx, document, o); };
    summarize_->set_prompt_note(QString());
    save_settings();
    return r;
}

std::optional<GenerateRequest> MainWindow::complete_request() {
    if (!ready_for(Task::Complete)) return std::nullopt;
    GenerateRequest r = make_request(Task::Complete);
    const RepoIndex index = code_->index();
    RankInputs in = code_->rank_inputs();
    if (in.current_path.isEmpty()) in.current_path = QStringLiteral("untitled");
    const int line = code_->editor()->cursor_line(), column = code_->editor()->cursor_column(), n_predict = r.n_predict;
    // Runs on the engine thread, with copies of the index and the editor's state.
    r.build = [index, in, line, column, n_predict](const specula::Model &m, int n_ctx) {
        auto count = [&m](const QString &t) { return int(tokenize_text(m, t).size()); };
        ContextBudget budget;
        budget.extra_tokens = std::min(budget.extra_tokens, n_ctx / 4);
        const CodeContext ctx = assemble_code_context(index, in, line, column, count, budget);
        const CompletionPrompt p = completion_prompt(m, ctx, n_ctx, n_predict);
        BuiltPrompt out;
        out.tokens = p.tokens;
        out.note = p.form;
        for (auto it = ctx.extra.crbegin(); it != ctx.extra.crend(); ++it) {
            QString why;
            for (const RankedFile &rf : ctx.ranked)
                if (rf.path == it->path) why = rf.reasons.join(QStringLiteral(", "));
            out.context << QStringLiteral("%1: %2 tokens (%3)").arg(it->path).arg(it->tokens).arg(why);
        }
        if (out.context.isEmpty()) out.context << QObject::tr("(no related files: the current file alone)");
        return out;
    };
    code_->show_suggestion(QString());
    save_settings();
    return r;
}

void MainWindow::summarize(Overflow overflow) {
    if (const auto r = summarize_request(overflow)) runs_->start(*r, summarize_->output(), false);
}

void MainWindow::complete() {
    if (const auto r = complete_request()) runs_->start(*r, code_->output(), false);
}

void MainWindow::compare() {
    // The page's request, run by the engine twice (plain, then speculative) in fresh sessions. A document too long for
    // the context is compared on its head and tail.
    if (current_task() == Task::Summarize) {
        if (const auto r = summarize_request(Overflow::HeadTail)) runs_->start(*r, summarize_->output(), true);
    } else if (const auto r = complete_request()) {
        runs_->start(*r, code_->output(), true);
    }
}

void MainWindow::stop() { runs_->stop(); }

void MainWindow::on_finished(const RunResult &r, const UiTiming &t) {
    OutputView *view = r.task == Task::Summarize ? summarize_->output() : code_->output();
    QString line = describe_run(r.stats, r.drafter);
    line += tr(" · on screen: first token %1 ms, %2 tok/s · stop: %3")
                .arg(t.ttft_ms, 0, 'f', 1)
                .arg(t.tokens_per_s(), 0, 'f', 1)
                .arg(QString::fromUtf8(specula_stop_reason_string(r.stop)));
    view->set_status(line);
    if (r.task == Task::Summarize) {
        summarize_->set_prompt_note(r.note);
    } else {
        code_->show_suggestion(QString::fromUtf8(r.text));
        code_->show_context(r.context, r.stats.cached_tokens, r.stats.prompt_tokens, r.note);
    }
    statusBar()->showMessage(r.stop == SPECULA_STOP_CANCELLED ? tr("stopped") : tr("done"), 5000);
    update_memory();
    emit runDone(r, t);
}

void MainWindow::on_compared(const CompareResult &r) {
    OutputView *view = r.task == Task::Summarize ? summarize_->output() : code_->output();
    const QString verdict = r.identical ? tr("identical outputs (lossless)") : tr("OUTPUTS DIFFER: please report this");
    view->set_status(tr("plain %1 tok/s · speculative %2 tok/s (%3, tau %4) · speedup %5x · %6")
                         .arg(r.plain.stats.decode_tokens_per_s(), 0, 'f', 1)
                         .arg(r.speculative.stats.decode_tokens_per_s(), 0, 'f', 1)
                         .arg(r.speculative.drafter)
                         .arg(r.speculative.stats.tau(), 0, 'f', 2)
                         .arg(r.speedup(), 0, 'f', 2)
                         .arg(verdict));
    statusBar()->showMessage(tr("compared: speedup %1x, %2").arg(r.speedup(), 0, 'f', 2).arg(verdict));
    if (r.task == Task::Summarize)
        summarize_->set_prompt_note(r.speculative.note);  // a document compared on its head and tail says so
    else
        code_->show_context(r.speculative.context, r.speculative.stats.cached_tokens, r.speculative.stats.prompt_tokens, r.speculative.note);
    update_memory();
    emit compareDone(r);
}

void MainWindow::on_failed(const EngineError &e) {
    if (e.too_long && e.task == Task::Summarize && persist_) {
        const auto answer = QMessageBox::question(
            this, tr("The document does not fit"),
            tr("%1\n\nKeep the document's beginning and end and leave out its middle?").arg(e.message),
            QMessageBox::Yes | QMessageBox::No, QMessageBox::Yes);
        if (answer == QMessageBox::Yes) {
            summarize(Overflow::HeadTail);
            return;
        }
    }
    if (e.status == SPECULA_ERR_CANCELLED) statusBar()->showMessage(tr("stopped"), 5000);
    else show_error(e.message);
    emit runError(e);
}

void MainWindow::show_error(const QString &message) {
    last_error_ = message;
    banner_->setText(message);
    banner_->setStyleSheet(QStringLiteral("background: #fde2e1; color: #8a1f11; padding: 6px; border: 1px solid #e0a39e"));
    banner_->setVisible(true);
    dismiss_->setVisible(true);
    statusBar()->showMessage(tr("error: %1").arg(message), 10000);
}

void MainWindow::update_memory() {
    memory_->setText(tr("resident memory %1").arg(QLocale::c().formattedDataSize(qint64(resident_bytes()), 1, QLocale::DataSizeTraditionalFormat)));
}

void MainWindow::closeEvent(QCloseEvent *event) {
    runs_->stop();
    save_settings();
    event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent *event) {
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent *event) {
    const QList<QUrl> urls = event->mimeData()->urls();
    if (urls.isEmpty() || !urls.front().isLocalFile()) return;
    open_dropped(urls.front().toLocalFile());
    event->acceptProposedAction();
}

void MainWindow::open_dropped(const QString &path) {
    const QFileInfo info(path);
    if (info.isDir()) {
        set_task(Task::Complete);
        code_->open_repository(path);
    } else if (path.endsWith(QStringLiteral(".gguf"), Qt::CaseInsensitive)) {
        panel_->set_model_path(path);
    } else {
        set_task(Task::Summarize);
        QString error;
        if (!summarize_->open_document(path, &error)) show_error(error);
    }
}

}  // namespace demo
