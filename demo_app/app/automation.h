// Automation of the demo for tests and scripts: the executable's flags load a model, run one task in the real window,
// and report. `specula-demo --summarize FILE` or `--complete REPO_DIR:RELATIVE_FILE:LINE:COLUMN` (1-based, as editors
// show them), with --model/--draft/--temp/-n, --screenshot OUT.png (saved once the generation has finished and is on
// screen), --print (the generated text to stdout), --quit (exit when done: 0 on success, else non-zero with the error on
// stderr). More for measurements: --dump-prompt FILE (the prompt's token ids), --report FILE (timings and counters as
// JSON), --compare (run the request without and with speculation), --long-document head-tail|refuse.
#pragma once

#include "../engine/model_config.h"
#include "../ui/run_controller.h"

#include <QObject>
#include <QString>
#include <optional>

namespace demo {

class MainWindow;

struct AutomationOptions {
    QString model, draft;              // draft "none": no draft
    std::optional<bool> ngram;
    QString tree, backend;
    int threads = -1, n_ctx = -1;
    QString summarize;                 // a document file
    QString repo, file;                // --complete
    int line = 0, column = 0;          // 1-based
    std::optional<double> temperature;
    int n_predict = -1;
    std::optional<quint64> seed;
    QString screenshot, dump_prompt, report;
    bool print = false, quit = false, compare = false;
    bool head_tail = false;            // --long-document head-tail

    bool has_task() const { return !summarize.isEmpty() || !repo.isEmpty(); }
    bool any() const;                  // any automation flag: settings are then left alone
};

// Parses the application's arguments (argv as QStringList); nullopt and *error for bad flags, *help_text on --help.
std::optional<AutomationOptions> parse_automation(const QStringList &arguments, QString *error, QString *help_text);

class Automation : public QObject {
    Q_OBJECT
public:
    Automation(MainWindow *window, AutomationOptions options);
    void start();

private:
    void model_ready();
    void succeed(const QByteArray &text, const QJsonObject &report, const std::vector<int32_t> &prompt);
    void fail(const QString &message);
    bool save_screenshot(QString *error);
    void leave(int code);

    MainWindow *window_;
    AutomationOptions o_;
    Task task_ = Task::Summarize;
    bool done_ = false;
    bool started_ = false;  // the task was started (once, on the first load of its model)
};

}  // namespace demo
