// The model panel: which model the current task runs (file dialog, drag and drop, recent files), its draft or draft
// model, n-gram drafting, the draft tree, backend, threads and context; Load with a progress bar and Cancel; and what the
// loaded model is (architecture, parameters, tensor types, context, chat template, FIM tokens, backend and why not the
// one asked for).
#pragma once

#include "../engine/model_config.h"
#include "../engine/model_summary.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace demo {

class ModelPanel : public QWidget {
    Q_OBJECT
public:
    explicit ModelPanel(QWidget *parent = nullptr);

    void set_task_title(const QString &title);
    void set_config(const ModelConfig &config);
    ModelConfig config() const;
    void set_recent(const QStringList &paths);

    void set_loading(bool loading);
    void set_progress(float fraction);
    void show_summary(const ModelSummary &summary);
    void show_unloaded(const QString &why);

    // File choosers, also for the window's menu and drag and drop.
    void choose_model();
    void choose_draft();
    void set_model_path(const QString &path);
    void set_draft_path(const QString &path);

signals:
    void loadRequested();
    void cancelRequested();

private:
    QLabel *title_;
    QLineEdit *model_, *draft_, *tree_;
    QToolButton *recent_;
    QCheckBox *ngram_;
    QComboBox *backend_;
    QLabel *backend_state_;
    QSpinBox *threads_, *n_ctx_;
    QPushButton *load_, *cancel_;
    QProgressBar *progress_;
    QPlainTextEdit *info_;
};

}  // namespace demo
