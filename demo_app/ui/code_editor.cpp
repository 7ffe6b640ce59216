#include "code_editor.h"

#include "syntax_highlighter.h"

#include <QFontDatabase>
#include <QKeyEvent>
#include <QPainter>
#include <QTextBlock>

namespace demo {

namespace {
class LineNumbers : public QWidget {
public:
    explicit LineNumbers(CodeEditor *editor) : QWidget(editor), editor_(editor) {}
    QSize sizeHint() const override { return QSize(editor_->line_number_width(), 0); }

protected:
    void paintEvent(QPaintEvent *event) override { editor_->paint_line_numbers(event); }

private:
    CodeEditor *editor_;
};
}  // namespace

CodeEditor::CodeEditor(QWidget *parent) : QPlainTextEdit(parent) {
    setObjectName(QStringLiteral("codeEditor"));
    QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    setFont(mono);
    setLineWrapMode(QPlainTextEdit::NoWrap);
    setTabStopDistance(fontMetrics().horizontalAdvance(QLatin1Char(' ')) * 4);
    highlighter_ = new SyntaxHighlighter(document());
    line_numbers_ = new LineNumbers(this);
    connect(this, &QPlainTextEdit::blockCountChanged, this, &CodeEditor::update_margins);
    connect(this, &QPlainTextEdit::updateRequest, this, [this](const QRect &rect, int dy) {
        if (dy != 0)
            line_numbers_->scroll(0, dy);
        else
            line_numbers_->update(0, rect.y(), line_numbers_->width(), rect.height());
    });
    connect(this, &QPlainTextEdit::cursorPositionChanged, this, [this] {
        if (!suggestion_.isEmpty() && textCursor().position() != suggestion_position_) {
            set_suggestion(QString());
            emit suggestionDismissed();
        }
    });
    update_margins();
}

void CodeEditor::set_language(const QString &language) { highlighter_->set_language(language); }

void CodeEditor::set_suggestion(const QString &text) {
    suggestion_ = text;
    suggestion_position_ = text.isEmpty() ? -1 : textCursor().position();
    viewport()->update();
}

bool CodeEditor::accept_suggestion() {
    if (suggestion_.isEmpty()) return false;
    const QString text = suggestion_;
    suggestion_.clear();
    suggestion_position_ = -1;
    textCursor().insertText(text);
    viewport()->update();
    return true;
}

int CodeEditor::cursor_line() const { return textCursor().blockNumber(); }
int CodeEditor::cursor_column() const { return textCursor().positionInBlock(); }

void CodeEditor::set_cursor(int line, int column) {
    const QTextBlock block = document()->findBlockByNumber(std::clamp(line, 0, document()->blockCount() - 1));
    QTextCursor c(block);
    c.setPosition(block.position() + std::clamp(column, 0, block.length() - 1));
    setTextCursor(c);
    centerCursor();
}

void CodeEditor::keyPressEvent(QKeyEvent *event) {
    if (event->key() == Qt::Key_Space && (event->modifiers() & Qt::ControlModifier)) {
        emit completionRequested();
        return;
    }
    if (!suggestion_.isEmpty()) {
        if (event->key() == Qt::Key_Tab && event->modifiers() == Qt::NoModifier) {
            accept_suggestion();
            return;
        }
        if (event->key() == Qt::Key_Escape) {
            set_suggestion(QString());
            emit suggestionDismissed();
            return;
        }
    }
    QPlainTextEdit::keyPressEvent(event);
}

void CodeEditor::paintEvent(QPaintEvent *event) {
    QPlainTextEdit::paintEvent(event);
    if (suggestion_.isEmpty()) return;
    // The suggestion's first line continues the cursor's line; the others are drawn below it on the editor's background,
    // over the text they will push down once accepted.
    QPainter p(viewport());
    p.setFont(font());
    const QRect cursor = cursorRect();
    const QFontMetrics fm(font());
    const QStringList lines = suggestion_.split('\n');
    const int left = int(blockBoundingGeometry(textCursor().block()).translated(contentOffset()).left()) + int(document()->documentMargin());
    const QColor ghost(0x80, 0x80, 0x80);
    for (int i = 0; i < lines.size(); ++i) {
        const int x = i == 0 ? cursor.left() : left;
        const int y = cursor.top() + i * fm.lineSpacing();
        if (i > 0) p.fillRect(QRect(0, y, viewport()->width(), fm.lineSpacing()), palette().base());
        p.setPen(ghost);
        p.drawText(QPoint(x, y + fm.ascent()), lines[i]);
    }
}

void CodeEditor::resizeEvent(QResizeEvent *event) {
    QPlainTextEdit::resizeEvent(event);
    const QRect cr = contentsRect();
    line_numbers_->setGeometry(QRect(cr.left(), cr.top(), line_number_width(), cr.height()));
}

int CodeEditor::line_number_width() const {
    int digits = 1;
    for (int max = std::max(1, blockCount()); max >= 10; max /= 10) ++digits;
    return 8 + fontMetrics().horizontalAdvance(QLatin1Char('9')) * std::max(3, digits);
}

void CodeEditor::update_margins() { setViewportMargins(line_number_width(), 0, 0, 0); }

void CodeEditor::paint_line_numbers(QPaintEvent *event) {
    QPainter p(line_numbers_);
    p.fillRect(event->rect(), palette().alternateBase());
    QTextBlock block = firstVisibleBlock();
    int top = int(blockBoundingGeometry(block).translated(contentOffset()).top());
    int bottom = top + int(blockBoundingRect(block).height());
    p.setPen(QColor(0x90, 0x90, 0x90));
    while (block.isValid() && top <= event->rect().bottom()) {
        if (block.isVisible() && bottom >= event->rect().top())
            p.drawText(0, top, line_numbers_->width() - 4, fontMetrics().height(), Qt::AlignRight, QString::number(block.blockNumber() + 1));
        block = block.next();
        top = bottom;
        bottom = top + int(blockBoundingRect(block).height());
    }
}

}  // namespace demo
