// The code page: a repository folder indexed in the background (progress, .gitignore, size limits, binary files skipped),
// its files, an editor with syntax highlighting where Ctrl+Space asks for a completion at the cursor and Tab accepts it,
// the context that went into the prompt (related files and why), "N tokens cached" from prefix reuse, and the streamed
// completion.
#pragma once

#include "../prompts/code_context.h"
#include "../repo/repo_index.h"

#include <QFutureWatcher>
#include <QWidget>

class QDoubleSpinBox;
class QLabel;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace demo {

class CodeEditor;
class OutputView;

class CodePage : public QWidget {
    Q_OBJECT
public:
    explicit CodePage(QWidget *parent = nullptr);
    ~CodePage() override;

    OutputView *output() const { return output_; }
    CodeEditor *editor() const { return editor_; }
    const RepoIndex &index() const { return index_; }

    void choose_repository();
    void open_repository(const QString &root);    // indexes in the background; indexed() when done
    bool open_file(const QString &relative_path, QString *error);
    RankInputs rank_inputs() const;

    int n_predict() const;
    double temperature() const;
    void set_generation(int n_predict, double temperature);

    void set_running(bool running);
    void show_suggestion(const QString &text);     // the ghost text at the cursor
    void show_context(const QStringList &lines, int cached_tokens, int prompt_tokens, const QString &form);

signals:
    void indexed(const demo::RepoIndex &index);
    void completeRequested();
    void compareRequested();
    void stopRequested();
    void openFailed(const QString &message);

private:
    QPushButton *open_, *cancel_index_, *complete_, *accept_, *stop_, *compare_;
    QLabel *repo_, *cached_;
    QProgressBar *index_progress_;
    QListWidget *files_, *context_;
    CodeEditor *editor_;
    OutputView *output_;
    QSpinBox *n_predict_;
    QDoubleSpinBox *temperature_;

    QFutureWatcher<RepoIndex> watcher_;
    RepoIndex index_;
    QString current_;
    QStringList recent_;  // opened or edited in the editor, most recent first
};

}  // namespace demo
