#include "code_page.h"

#include "code_editor.h"
#include "generation_controls.h"
#include "output_view.h"

#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QProgressBar>
#include <QPromise>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBlock>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

namespace demo {

CodePage::CodePage(QWidget *parent) : QWidget(parent) {
    qRegisterMetaType<demo::RepoIndex>("demo::RepoIndex");
    open_ = new QPushButton(tr("Open folder…"), this);
    repo_ = new QLabel(tr("no repository: open a folder"), this);
    repo_->setObjectName(QStringLiteral("repoSummary"));
    index_progress_ = new QProgressBar(this);
    index_progress_->setRange(0, 0);
    index_progress_->setVisible(false);
    index_progress_->setMaximumWidth(200);
    cancel_index_ = new QPushButton(tr("Cancel"), this);
    cancel_index_->setVisible(false);

    files_ = new QListWidget(this);
    files_->setObjectName(QStringLiteral("repoFiles"));
    editor_ = new CodeEditor(this);
    output_ = new OutputView(this);
    context_ = new QListWidget(this);
    context_->setObjectName(QStringLiteral("contextFiles"));
    cached_ = new QLabel(this);
    cached_->setObjectName(QStringLiteral("cachedTokens"));
    cached_->setWordWrap(true);

    n_predict_ = make_token_limit_spin(this);
    temperature_ = make_temperature_spin(this);
    complete_ = new QPushButton(tr("Complete (Ctrl+Space)"), this);
    complete_->setObjectName(QStringLiteral("completeButton"));
    accept_ = new QPushButton(tr("Accept (Tab)"), this);
    accept_->setEnabled(false);
    stop_ = new QPushButton(tr("Stop"), this);
    stop_->setEnabled(false);
    compare_ = new QPushButton(tr("Compare"), this);

    auto *top = new QHBoxLayout;
    top->addWidget(open_);
    top->addWidget(repo_, 1);
    top->addWidget(index_progress_);
    top->addWidget(cancel_index_);

    auto *right = new QWidget(this);
    auto *right_layout = new QVBoxLayout(right);
    right_layout->setContentsMargins(0, 0, 0, 0);
    right_layout->addWidget(new QLabel(tr("Completion"), right));
    right_layout->addWidget(output_, 3);
    right_layout->addWidget(new QLabel(tr("Context of the last request"), right));
    right_layout->addWidget(context_, 2);
    right_layout->addWidget(cached_);

    auto *split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(files_);
    split->addWidget(editor_);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 2);

    auto *controls = new QHBoxLayout;
    controls->addWidget(n_predict_);
    controls->addWidget(temperature_);
    controls->addStretch();
    controls->addWidget(complete_);
    controls->addWidget(accept_);
    controls->addWidget(stop_);
    controls->addWidget(compare_);

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(split, 1);
    layout->addLayout(controls);

    connect(open_, &QPushButton::clicked, this, &CodePage::choose_repository);
    connect(cancel_index_, &QPushButton::clicked, this, [this] { watcher_.cancel(); });
    connect(complete_, &QPushButton::clicked, this, &CodePage::completeRequested);
    connect(editor_, &CodeEditor::completionRequested, this, &CodePage::completeRequested);
    connect(accept_, &QPushButton::clicked, this, [this] {
        editor_->accept_suggestion();
        editor_->setFocus();
    });
    connect(editor_, &CodeEditor::suggestionDismissed, this, [this] { accept_->setEnabled(false); });
    connect(stop_, &QPushButton::clicked, this, &CodePage::stopRequested);
    connect(compare_, &QPushButton::clicked, this, &CodePage::compareRequested);
    connect(files_, &QListWidget::itemActivated, this, [this](QListWidgetItem *item) {
        QString error;
        if (!open_file(item->text(), &error)) emit openFailed(error);
    });
    connect(editor_, &QPlainTextEdit::textChanged, this, [this] {
        if (!current_.isEmpty() && (recent_.isEmpty() || recent_.front() != current_)) {
            recent_.removeAll(current_);
            recent_.prepend(current_);
        }
    });
    connect(&watcher_, &QFutureWatcher<RepoIndex>::progressValueChanged, this, [this](int scanned) {
        index_progress_->setFormat(tr("%1 files").arg(scanned));
        repo_->setText(tr("indexing %1: %2 files looked at…").arg(index_.root).arg(scanned));
    });
    connect(&watcher_, &QFutureWatcher<RepoIndex>::finished, this, [this] {
        index_progress_->setVisible(false);
        cancel_index_->setVisible(false);
        open_->setEnabled(true);
        if (watcher_.isCanceled() || watcher_.future().resultCount() == 0) {
            repo_->setText(tr("indexing %1 cancelled").arg(index_.root));
            index_.cancelled = true;
            emit indexed(index_);
            return;
        }
        index_ = watcher_.result();
        files_->clear();
        for (const IndexedFile &f : index_.files) files_->addItem(f.path);
        repo_->setText(tr("%1: %2").arg(index_.root, index_.summary()));
        emit indexed(index_);
    });
}

CodePage::~CodePage() {
    watcher_.cancel();
    watcher_.waitForFinished();
}

void CodePage::choose_repository() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a repository folder"), index_.root);
    if (!dir.isEmpty()) open_repository(dir);
}

void CodePage::open_repository(const QString &root) {
    watcher_.cancel();
    watcher_.waitForFinished();
    index_ = RepoIndex{};
    index_.root = root;
    files_->clear();
    current_.clear();
    recent_.clear();
    index_progress_->setVisible(true);
    cancel_index_->setVisible(true);
    open_->setEnabled(false);
    repo_->setText(tr("indexing %1…").arg(root));
    const IndexRules rules;
    watcher_.setFuture(QtConcurrent::run([root, rules](QPromise<RepoIndex> &promise) {
        RepoIndex index = index_repository(root, rules, [&promise](int scanned, int) {
            promise.setProgressValue(scanned);
            return !promise.isCanceled();
        });
        if (!promise.isCanceled()) promise.addResult(std::move(index));
    }));
}

bool CodePage::open_file(const QString &relative_path, QString *error) {
    if (index_.find(relative_path) == nullptr) {
        *error = tr("%1 is not an indexed file of %2").arg(relative_path, index_.root);
        return false;
    }
    const QString text = read_text_file(index_.root, relative_path);
    current_ = relative_path;
    editor_->set_language(index_.find(relative_path)->language);
    editor_->setPlainText(text);
    recent_.removeAll(relative_path);
    recent_.prepend(relative_path);
    const QList<QListWidgetItem *> items = files_->findItems(relative_path, Qt::MatchExactly);
    if (!items.isEmpty()) files_->setCurrentItem(items.front());
    return true;
}

RankInputs CodePage::rank_inputs() const {
    RankInputs in;
    in.current_path = current_;
    in.current_text = editor_->toPlainText();
    in.recent = recent_;
    in.recent.removeAll(current_);
    return in;
}

int CodePage::n_predict() const { return n_predict_->value(); }
double CodePage::temperature() const { return temperature_->value(); }

void CodePage::set_generation(int n_predict, double temperature) {
    n_predict_->setValue(n_predict);
    temperature_->setValue(temperature);
}

void CodePage::set_running(bool running) {
    complete_->setEnabled(!running);
    compare_->setEnabled(!running);
    stop_->setEnabled(running);
}

void CodePage::show_suggestion(const QString &text) {
    const QString shown = suggestion_at_cursor(editor_->textCursor().block().text(), text);
    editor_->set_suggestion(shown);
    accept_->setEnabled(!shown.isEmpty());
}

void CodePage::show_context(const QStringList &lines, int cached_tokens, int prompt_tokens, const QString &form) {
    context_->clear();
    context_->addItems(lines);
    cached_->setText(tr("%1 tokens cached of %2 in the prompt (%3 evaluated) · prompt form: %4")
                         .arg(cached_tokens)
                         .arg(prompt_tokens)
                         .arg(prompt_tokens - cached_tokens)
                         .arg(form));
}

}  // namespace demo
