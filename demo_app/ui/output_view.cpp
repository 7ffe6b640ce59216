#include "output_view.h"

#include <QApplication>
#include <QClipboard>
#include <QFile>
#include <QFileDialog>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QTextCursor>
#include <QPlainTextEdit>
#include <QVBoxLayout>

namespace demo {

namespace {
const QColor kDraftedColor(0xc8, 0xf0, 0xc8);  // light green: accepted from a draft
}

OutputView::OutputView(QWidget *parent) : QWidget(parent) {
    // A plain-text editor: its layout works block by block and only on what is visible, where a rich-text QTextEdit
    // lays out the whole document after every insertion (the cost grows with the output).
    edit_ = new QPlainTextEdit(this);
    edit_->setReadOnly(true);
    edit_->setObjectName(QStringLiteral("output"));
    edit_->setLineWrapMode(QPlainTextEdit::WidgetWidth);
    QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    edit_->setFont(mono);
    drafted_format_.setBackground(kDraftedColor);
    target_format_.setBackground(Qt::transparent);

    legend_ = new QLabel(this);
    legend_->setText(QStringLiteral("<span style='background:%1'>&nbsp;drafted and accepted&nbsp;</span>&nbsp; "
                                    "<span>&nbsp;from the target model&nbsp;</span>")
                         .arg(kDraftedColor.name()));
    status_ = new QLabel(this);
    status_->setObjectName(QStringLiteral("runStatus"));
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    status_->setWordWrap(true);
    copy_ = new QPushButton(tr("Copy"), this);
    save_ = new QPushButton(tr("Save…"), this);
    connect(copy_, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(text()); });
    connect(save_, &QPushButton::clicked, this, &OutputView::save);

    auto *bar = new QHBoxLayout;
    bar->addWidget(legend_);
    bar->addStretch();
    bar->addWidget(copy_);
    bar->addWidget(save_);
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(edit_, 1);
    layout->addLayout(bar);
    layout->addWidget(status_);
}

void OutputView::clear() {
    edit_->clear();
    utf8_.clear();
    n_tokens_ = n_drafted_ = 0;
    status_->clear();
}

void OutputView::append(const std::vector<StreamedToken> &tokens) {
    if (tokens.empty()) return;
    QTextCursor cursor(edit_->document());
    cursor.movePosition(QTextCursor::End);
    // One edit block per batch (one layout pass), and runs of tokens with the same flag as one insertion each.
    cursor.beginEditBlock();
    size_t i = 0;
    while (i < tokens.size()) {
        const bool drafted = tokens[i].drafted;
        QByteArray run;
        for (; i < tokens.size() && tokens[i].drafted == drafted; ++i) {
            run += tokens[i].text;
            if (tokens[i].id != SPECULA_TOKEN_NULL) {
                ++n_tokens_;
                if (drafted) ++n_drafted_;
            }
        }
        utf8_ += run;
        cursor.insertText(QString::fromUtf8(run), drafted ? drafted_format_ : target_format_);
    }
    cursor.endEditBlock();
    QScrollBar *sb = edit_->verticalScrollBar();
    sb->setValue(sb->maximum());
    emit appended();
}

void OutputView::set_status(const QString &text) { status_->setText(text); }

QString OutputView::text() const { return QString::fromUtf8(utf8_); }

void OutputView::save() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Save output"), QString(), tr("Text (*.txt);;All files (*)"));
    if (path.isEmpty()) return;
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(utf8_) != utf8_.size()) emit saveFailed(tr("cannot write %1: %2").arg(path, f.errorString()));
}

QString describe_run(const RunStats &s, const QString &drafter) {
    QString line = QStringLiteral("%1 tokens · first token %2 ms · %3 tok/s · prompt %4 tokens (built in %5 ms, %6 cached, "
                                  "%7 evaluated)")
                       .arg(s.generated)
                       .arg(s.ttft_ms, 0, 'f', 1)
                       .arg(s.decode_tokens_per_s(), 0, 'f', 1)
                       .arg(s.prompt_tokens)
                       .arg(s.build_ms, 0, 'f', 1)
                       .arg(s.cached_tokens)
                       .arg(s.evaluated_tokens);
    if (!drafter.isEmpty() && s.rounds > 0)
        line += QStringLiteral(" · %1: tau %2, %3 of %4 tokens drafted, draft %5 ms / verify %6 ms, drafter %7 KiB")
                    .arg(drafter)
                    .arg(s.tau(), 0, 'f', 2)
                    .arg(s.drafted_emitted)
                    .arg(s.generated)
                    .arg(s.draft_ms, 0, 'f', 1)
                    .arg(s.verify_ms, 0, 'f', 1)
                    .arg(double(s.drafter_bytes) / 1024.0, 0, 'f', 0);
    else if (drafter.isEmpty())
        line += QStringLiteral(" · plain decoding");
    return line;
}

}  // namespace demo
