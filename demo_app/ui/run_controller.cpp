#include "run_controller.h"

#include "charts_panel.h"
#include "output_view.h"

#include <QMetaObject>
#include <ctime>

namespace demo {

namespace {
double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}
}  // namespace

RunController::RunController(Engine *engine, ChartsPanel *charts, QObject *parent)
    : QObject(parent), engine_(engine), charts_(charts) {
    qRegisterMetaType<demo::UiTiming>("demo::UiTiming");
    // The first tokens of a run are drawn as soon as they come (time to first token); after that the window takes what
    // has gathered at most kFrameMs apart, so that drawing costs a few percent of a core however fast tokens come.
    frame_timer_.setSingleShot(true);
    frame_timer_.setInterval(kFrameMs);
    connect(&frame_timer_, &QTimer::timeout, this, &RunController::drain);
    connect(engine_->stream(), &TokenStream::available, this, [this] {
        if (first_ms_ < 0) drain();
        else if (!frame_timer_.isActive()) frame_timer_.start();
    }, Qt::QueuedConnection);
    connect(engine_, &Engine::runStarted, this, [this](quint64 id, const QString &phase) {
        if (id != active_) return;
        drain();
        if (!phase.isEmpty()) {
            // A comparison's second run starts from a clean view.
            if (view_) view_->clear();
            charts_->reset();
            have_start_stats_ = false;
            first_ms_ = -1;
            timing_ = UiTiming{};
            emit status(phase == QStringLiteral("plain") ? tr("comparing: plain decoding (1/2)…") : tr("comparing: speculative decoding (2/2)…"));
        }
    });
    connect(engine_, &Engine::promptProgress, this, [this](quint64 id, int done, int total) {
        // Only a prompt that takes a while gets a progress line: redrawing the status bar during a short prompt's
        // evaluation would only delay the first token.
        if (id == active_ && total > 0 && clock_.elapsed() > 250)
            emit status(tr("evaluating the prompt: %1 of %2 tokens").arg(done).arg(total));
    });
    connect(engine_, &Engine::runFinished, this, [this](const RunResult &r) {
        if (r.id != active_) return;
        drain();
        UiTiming t = timing_;
        t.stream_ms = first_ms_ >= 0 ? last_ms_ - first_ms_ : 0;
        t.ui_cpu_ms = thread_cpu_ms() - cpu_at_start_ms_;
        charts_->finish(r.stats);
        end();
        emit finished(r, t);
    });
    connect(engine_, &Engine::compareFinished, this, [this](const CompareResult &r) {
        if (r.id != active_) return;
        drain();
        charts_->finish(r.speculative.stats);
        end();
        emit compared(r);
    });
    connect(engine_, &Engine::runFailed, this, [this](const EngineError &e) {
        if (e.id != active_) return;
        drain();
        end();
        emit failed(e);
    });
}

quint64 RunController::start(GenerateRequest request, OutputView *view, bool compare) {
    engine_->stream()->take();  // anything left from an earlier run
    request.id = next_id_++;
    active_ = request.id;
    task_ = request.task;
    view_ = view;
    if (view_) view_->clear();
    charts_->reset();
    have_start_stats_ = false;
    first_ms_ = -1;
    last_ms_ = 0;
    timing_ = UiTiming{};
    clock_.start();
    cpu_at_start_ms_ = thread_cpu_ms();
    emit started(task_);
    emit status(tr("running…"));
    if (compare)
        QMetaObject::invokeMethod(engine_, "compare", Qt::QueuedConnection, Q_ARG(demo::GenerateRequest, request));
    else
        QMetaObject::invokeMethod(engine_, "generate", Qt::QueuedConnection, Q_ARG(demo::GenerateRequest, request));
    return request.id;
}

void RunController::stop() {
    if (active_ != 0) engine_->cancel();
}

void RunController::drain() {
    StreamBatch batch = engine_->stream()->take();
    if (active_ == 0 || batch.run_id != active_) return;
    if (view_) view_->append(batch.tokens);
    const double now = double(clock_.nsecsElapsed()) / 1e6;
    int n = 0;
    for (const StreamedToken &t : batch.tokens) n += t.id != SPECULA_TOKEN_NULL ? 1 : 0;
    if (n > 0) {
        if (first_ms_ < 0) {
            first_ms_ = now;
            timing_.ttft_ms = now;
        }
        last_ms_ = now;
        timing_.tokens += n;
    }
    charts_->add(batch.tokens, batch.rounds);
    if (batch.has_start_stats) {
        run_start_stats_ = batch.start_stats;
        have_start_stats_ = true;
    }
    if (batch.has_stats && have_start_stats_) charts_->set_running_stats(run_start_stats_, batch.stats);
}

void RunController::end() {
    active_ = 0;
    emit idle();
}

}  // namespace demo
