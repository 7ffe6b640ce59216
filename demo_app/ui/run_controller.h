// Runs one request at a time on the engine for the window: gives it an id, clears the output view and the charts, moves
// streamed tokens from the engine into them, times what the user sees (request to first token on screen, and the rate
// tokens reach the screen), and reports the outcome. Stop cancels through the engine (specula_session_cancel).
#pragma once

#include "../engine/engine.h"

#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <QTimer>

namespace demo {

class ChartsPanel;
class OutputView;

// What the window measured of a run: from the request to the first token drawn, and from there to the last.
struct UiTiming {
    double ttft_ms = 0;
    double stream_ms = 0;
    int tokens = 0;
    double ui_cpu_ms = 0;  // CPU time the window's thread used from the request to the end of the run
    double tokens_per_s() const { return stream_ms > 0 && tokens > 1 ? (tokens - 1) * 1000.0 / stream_ms : 0; }
};

class RunController : public QObject {
    Q_OBJECT
public:
    RunController(Engine *engine, ChartsPanel *charts, QObject *parent = nullptr);

    // Starts a run (compare = false) or a comparison; the view shows its tokens. Returns the request id.
    quint64 start(GenerateRequest request, OutputView *view, bool compare);
    void stop();
    bool running() const { return active_ != 0; }
    Task task() const { return task_; }

signals:
    void started(demo::Task task);
    void status(const QString &text);
    void finished(const demo::RunResult &result, const demo::UiTiming &timing);
    void compared(const demo::CompareResult &result);
    void failed(const demo::EngineError &error);
    void idle();

private:
    void drain();
    void end();

    static constexpr int kFrameMs = 100;  // at most 10 redraws a second while tokens stream

    Engine *engine_;
    ChartsPanel *charts_;
    QTimer frame_timer_;
    QPointer<OutputView> view_;
    quint64 next_id_ = 1, active_ = 0;
    Task task_ = Task::Summarize;
    QElapsedTimer clock_;
    UiTiming timing_;
    double first_ms_ = -1, last_ms_ = 0;
    double cpu_at_start_ms_ = 0;
    specula_stats run_start_stats_{};
    bool have_start_stats_ = false;
};

}  // namespace demo

Q_DECLARE_METATYPE(demo::UiTiming)
