// The code editor of the completion page: a plain-text editor with line numbers, syntax highlighting and an inline
// suggestion drawn as grey "ghost" text at the cursor while it streams in. Ctrl+Space asks for a completion, Tab accepts
// the suggestion, Esc (or typing, or moving the cursor) dismisses it.
#pragma once

#include <QPlainTextEdit>

namespace demo {

class SyntaxHighlighter;

class CodeEditor : public QPlainTextEdit {
    Q_OBJECT
public:
    explicit CodeEditor(QWidget *parent = nullptr);

    void set_language(const QString &language);
    // The suggestion shown at the cursor (replaces what was shown); "" hides it.
    void set_suggestion(const QString &text);
    QString suggestion() const { return suggestion_; }
    bool accept_suggestion();  // inserts it at the cursor; false when there was none
    // 0-based line and column (in characters) of the cursor, and the reverse.
    int cursor_line() const;
    int cursor_column() const;
    void set_cursor(int line, int column);

    int line_number_width() const;
    void paint_line_numbers(QPaintEvent *event);

signals:
    void completionRequested();
    void suggestionDismissed();

protected:
    void keyPressEvent(QKeyEvent *event) override;
    void paintEvent(QPaintEvent *event) override;
    void resizeEvent(QResizeEvent *event) override;

private:
    void update_margins();

    QWidget *line_numbers_;
    SyntaxHighlighter *highlighter_;
    QString suggestion_;
    int suggestion_position_ = -1;  // cursor position the suggestion belongs to
};

}  // namespace demo
