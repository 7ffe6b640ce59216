#include "summarize_page.h"

#include "generation_controls.h"
#include "output_view.h"

#include <QDoubleSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QStringDecoder>
#include <QVBoxLayout>

namespace demo {

SummarizePage::SummarizePage(QWidget *parent) : QWidget(parent) {
    setAcceptDrops(true);
    auto *open = new QPushButton(tr("Open document…"), this);
    instruction_ = new QLineEdit(QStringLiteral("Summarize the following document."), this);
    instruction_->setToolTip(tr("The instruction placed before the document"));
    tokens_ = new QLabel(this);
    tokens_->setObjectName(QStringLiteral("documentTokens"));
    document_ = new QPlainTextEdit(this);
    document_->setObjectName(QStringLiteral("document"));
    document_->setPlaceholderText(tr("Paste a document here, open one, or drop a file"));
    document_->setAcceptDrops(false);  // the page takes the drop: a file is opened, not pasted as a path

    n_predict_ = make_token_limit_spin(this);
    temperature_ = make_temperature_spin(this);
    seed_ = new QSpinBox(this);
    seed_->setRange(0, 1 << 30);
    seed_->setPrefix(tr("seed "));
    summarize_ = new QPushButton(tr("Summarize"), this);
    summarize_->setObjectName(QStringLiteral("summarizeButton"));
    summarize_->setDefault(true);
    stop_ = new QPushButton(tr("Stop"), this);
    stop_->setEnabled(false);
    compare_ = new QPushButton(tr("Compare"), this);
    compare_->setToolTip(tr("Run the same request greedy without and with speculation: the speedup, and whether both give the "
                            "same tokens"));
    note_ = new QLabel(this);
    note_->setWordWrap(true);
    note_->setObjectName(QStringLiteral("promptNote"));

    output_ = new OutputView(this);

    auto *top = new QHBoxLayout;
    top->addWidget(open);
    top->addWidget(instruction_, 1);
    auto *left = new QWidget(this);
    auto *left_layout = new QVBoxLayout(left);
    left_layout->setContentsMargins(0, 0, 0, 0);
    left_layout->addLayout(top);
    left_layout->addWidget(document_, 1);
    left_layout->addWidget(tokens_);
    auto *split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(left);
    split->addWidget(output_);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);

    auto *controls = new QHBoxLayout;
    controls->addWidget(n_predict_);
    controls->addWidget(temperature_);
    controls->addWidget(seed_);
    controls->addStretch();
    controls->addWidget(summarize_);
    controls->addWidget(stop_);
    controls->addWidget(compare_);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(split, 1);
    layout->addWidget(note_);
    layout->addLayout(controls);

    connect(open, &QPushButton::clicked, this, &SummarizePage::choose_document);
    connect(summarize_, &QPushButton::clicked, this, &SummarizePage::summarizeRequested);
    connect(compare_, &QPushButton::clicked, this, &SummarizePage::compareRequested);
    connect(stop_, &QPushButton::clicked, this, &SummarizePage::stopRequested);
    connect(document_, &QPlainTextEdit::textChanged, this, &SummarizePage::documentChanged);
    connect(instruction_, &QLineEdit::textChanged, this, &SummarizePage::documentChanged);
    connect(n_predict_, &QSpinBox::valueChanged, this, &SummarizePage::documentChanged);  // the room for the prompt changes
}

QString SummarizePage::document() const { return document_->toPlainText(); }
QString SummarizePage::instruction() const { return instruction_->text(); }

bool SummarizePage::open_document(const QString &path, QString *error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        *error = tr("cannot open %1: %2").arg(path, f.errorString());
        return false;
    }
    const QByteArray bytes = f.read(64LL * 1024 * 1024);
    QStringDecoder utf8(QStringDecoder::Utf8);
    const QString text = utf8.decode(bytes);
    if (utf8.hasError() || bytes.contains('\0')) {
        *error = tr("%1 is not UTF-8 text").arg(path);
        return false;
    }
    path_ = path;
    document_->setPlainText(text);
    return true;
}

void SummarizePage::choose_document() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a document"), QFileInfo(path_).absolutePath(),
                                                      tr("Text, Markdown and source (*.txt *.md *.markdown *.rst *.py *.c *.h *.cpp "
                                                         "*.hpp *.js *.ts *.rs *.go *.java);;All files (*)"));
    if (path.isEmpty()) return;
    QString error;
    if (!open_document(path, &error)) emit openFailed(error);
}

int SummarizePage::n_predict() const { return n_predict_->value(); }
double SummarizePage::temperature() const { return temperature_->value(); }
quint64 SummarizePage::seed() const { return quint64(seed_->value()); }

void SummarizePage::set_generation(int n_predict, double temperature, quint64 seed) {
    n_predict_->setValue(n_predict);
    temperature_->setValue(temperature);
    seed_->setValue(int(std::min<quint64>(seed, quint64(seed_->maximum()))));
}

void SummarizePage::set_token_count(int n_tokens, int n_ctx, int room) {
    if (n_ctx <= 0) {
        tokens_->setText(tr("document: %1 characters (load a model to count tokens)").arg(document_->toPlainText().size()));
        return;
    }
    QString text = tr("document: %1 tokens · context %2 tokens, room for the prompt %3").arg(n_tokens).arg(n_ctx).arg(room);
    if (n_tokens > room) text += tr(" · too long: Summarize will ask to keep its head and tail");
    tokens_->setText(text);
    tokens_->setStyleSheet(n_tokens > room ? QStringLiteral("color: #a05000") : QString());
}

void SummarizePage::set_running(bool running) {
    summarize_->setEnabled(!running);
    compare_->setEnabled(!running);
    stop_->setEnabled(running);
}

void SummarizePage::set_prompt_note(const QString &note) { note_->setText(note); }

void SummarizePage::dragEnterEvent(QDragEnterEvent *event) {
    // A dropped model goes to the window (which loads it): only other files are taken here, as documents.
    const QList<QUrl> urls = event->mimeData()->urls();
    if (!urls.isEmpty() && urls.front().isLocalFile() && !urls.front().toLocalFile().endsWith(QStringLiteral(".gguf"), Qt::CaseInsensitive))
        event->acceptProposedAction();
    else
        event->ignore();
}

void SummarizePage::dropEvent(QDropEvent *event) {
    const QList<QUrl> urls = event->mimeData()->urls();
    if (urls.isEmpty() || !urls.front().isLocalFile()) return;
    const QString path = urls.front().toLocalFile();
    QString error;
    if (!open_document(path, &error)) emit openFailed(error);
    event->acceptProposedAction();
}

}  // namespace demo
