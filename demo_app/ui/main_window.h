// The demo's window: the model panel of the current task on the left, the Summarize and Code pages in the middle, the
// live charts below, an error banner above. Every SDK call runs on the engine thread (engine.h); the window only sends
// requests and shows what comes back, so it stays responsive during loads and generation and Stop works at any time.
#pragma once

#include "../app/settings.h"
#include "../engine/engine.h"
#include "../prompts/document_prompt.h"
#include "run_controller.h"

#include <QMainWindow>
#include <QSettings>
#include <array>
#include <optional>

class QLabel;
class QPushButton;
class QTabWidget;
class QTimer;

namespace demo {

class ChartsPanel;
class CodePage;
class ModelPanel;
class SummarizePage;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // persist = false: nothing is written to the settings (automation runs leave the user's settings alone).
    MainWindow(QSettings &store, bool persist, QWidget *parent = nullptr);
    ~MainWindow() override;

    Task current_task() const;
    void set_task(Task task);
    // Replaces a task's configuration (automation's --model/--draft) and loads it.
    void set_model_config(Task task, const ModelConfig &config);
    ModelConfig model_config(Task task) const { return configs_[int(task)]; }
    // An interactive launch: load the current task's model, reopen the last document and repository.
    void restore_session();
    void load_task_model(Task task);
    bool model_loaded(Task task) const { return loaded_[int(task)].has_value(); }

    SummarizePage *summarize_page() const { return summarize_; }
    CodePage *code_page() const { return code_; }
    Engine *engine() const { return engine_thread_.engine(); }

    // The actions behind the buttons (also for automation).
    void summarize(Overflow overflow);
    void complete();
    void compare();
    void stop();

    void show_error(const QString &message);
    // What a file dropped on the window does: a folder is indexed for code, a .gguf loaded as the current task's model,
    // anything else opened as the document to summarize.
    void open_dropped(const QString &path);
    QString last_error() const { return last_error_; }

signals:
    void modelLoaded(demo::Task task, const demo::ModelSummary &summary);
    void modelLoadFailed(demo::Task task, const QString &message);
    void runDone(const demo::RunResult &result, const demo::UiTiming &timing);
    void compareDone(const demo::CompareResult &result);
    void runError(const demo::EngineError &error);

protected:
    void closeEvent(QCloseEvent *event) override;
    void dragEnterEvent(QDragEnterEvent *event) override;
    void dropEvent(QDropEvent *event) override;

private:
    void build_menus();
    void show_task_in_panel(Task task);
    void save_settings();
    void request_token_count();
    GenerateRequest make_request(Task task) const;
    bool ready_for(Task task);  // no run going and the task's model loaded (else says why); switches to the task
    std::optional<GenerateRequest> summarize_request(Overflow overflow);
    std::optional<GenerateRequest> complete_request();
    void on_finished(const RunResult &r, const UiTiming &t);
    void on_compared(const CompareResult &r);
    void on_failed(const EngineError &e);
    void update_memory();

    QSettings &store_;
    Settings settings_;
    bool persist_;
    mutable EngineThread engine_thread_;
    RunController *runs_;
    ModelPanel *panel_;
    QTabWidget *tabs_;
    SummarizePage *summarize_;
    CodePage *code_;
    ChartsPanel *charts_;
    QLabel *banner_, *memory_;
    QPushButton *dismiss_;
    QTimer *count_timer_, *memory_timer_, *ghost_timer_;
    std::array<ModelConfig, kTaskCount> configs_;
    std::array<std::optional<ModelSummary>, kTaskCount> loaded_;  // what the engine has loaded for each task
    std::array<ModelConfig, kTaskCount> loaded_config_;           // ... with this configuration
    std::array<ModelConfig, kTaskCount> requested_;               // the configuration of the load under way
    std::array<bool, kTaskCount> loading_{};
    quint64 count_id_ = 0;
    QString last_error_;
};

// Resident memory of this process in bytes (VmRSS), 0 when unknown.
quint64 resident_bytes();

}  // namespace demo
