// The demo's engine: every SDK call that can take time runs here, on one worker thread, so the window never blocks.
// It owns one model slot per task (model, draft or draft model, and a session kept between requests for prefix reuse).
//
// Call the slots through queued connections (EngineThread does); cancel() is the exception: any thread may call it, and it
// stops a load (through the SDK's progress callback) or a run (specula_session_cancel) at the next step boundary.
// Tokens go out through stream() as they come; everything else through the signals below. Failures are reported with the
// SDK's status and message and leave the engine usable: a load that fails keeps the model that was there.
#pragma once

#include "model_config.h"
#include "model_summary.h"
#include "run_types.h"
#include "token_stream.h"

#include <specula/specula.hpp>

#include <QObject>
#include <QThread>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>

namespace demo {

class Engine : public QObject {
    Q_OBJECT
public:
    explicit Engine(QObject *parent = nullptr);
    ~Engine() override;

    TokenStream *stream() { return &stream_; }

    // Thread-safe: stops the running load or run of any task.
    void cancel();

public slots:
    void load(demo::Task task, const demo::ModelConfig &config);
    void generate(const demo::GenerateRequest &request);
    // The same request without and with speculation, greedy, each in a new session: the measured speedup, and whether
    // the two outputs are the same tokens (they must be: speculation is lossless).
    void compare(const demo::GenerateRequest &request);
    // Tokens of text for the task's model (0 when none is loaded); answered by tokensCounted.
    void countTokens(demo::Task task, const QString &text, quint64 id);

signals:
    void loadProgress(demo::Task task, float fraction);
    void loaded(demo::Task task, const demo::ModelSummary &summary);
    void loadFailed(demo::Task task, const demo::EngineError &error);
    void runStarted(quint64 id, const QString &phase);           // phase: "" for a run, "plain" / "speculative" in compare
    void promptProgress(quint64 id, int done, int total);          // prompt tokens evaluated so far
    void runFinished(const demo::RunResult &result);
    void compareFinished(const demo::CompareResult &result);
    void runFailed(const demo::EngineError &error);
    void tokensCounted(quint64 id, int n_tokens, int n_ctx);

private:
    struct Slot {
        ModelConfig config;
        specula::Model model;
        specula::Draft draft;          // a LongSpec draft, or
        specula::Model draft_model;    // an independent draft model
        std::vector<int32_t> tree;
        specula::SessionOptions session_options;
        std::unique_ptr<specula::Session> session;
        ModelSummary summary;
    };

    void attach_drafters(Slot &slot, specula::Session &session, bool on);
    bool has_drafters(const Slot &slot) const;
    // One run on `session`; the caller handles errors. reuse: keep the shared prefix of the session's context.
    RunResult run_on(Slot &slot, specula::Session &session, const GenerateRequest &request, const BuiltPrompt &prompt,
                     bool reuse, double t_request_ms);
    void set_active(specula::Session *session);
    EngineError error_of(const GenerateRequest &r, const std::exception &e) const;

    std::array<Slot, kTaskCount> slots_;
    TokenStream stream_;
    std::mutex active_mutex_;                  // guards active_: cancel() must not touch a session being destroyed
    specula::Session *active_ = nullptr;
    std::atomic<bool> cancel_load_{false};
};

// The engine on its own thread, for the window: owns both, stops the thread on destruction.
class EngineThread {
public:
    EngineThread();
    ~EngineThread();
    Engine *engine() { return engine_; }

private:
    QThread thread_;
    Engine *engine_;
};

void register_engine_types();

}  // namespace demo
