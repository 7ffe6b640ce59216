// Syntax highlighting for the code editor: keywords, strings, comments and numbers of Python and the C family (C, C++,
// JavaScript/TypeScript, Rust, Go, Java, C#), with block comments and Python's triple-quoted strings across lines.
#pragma once

#include <QRegularExpression>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>

namespace demo {

class SyntaxHighlighter : public QSyntaxHighlighter {
    Q_OBJECT
public:
    explicit SyntaxHighlighter(QTextDocument *document);
    // "python", "c", "cpp", "javascript", ... (imports.h language_of); anything else is left plain.
    void set_language(const QString &language);

protected:
    void highlightBlock(const QString &text) override;

private:
    struct Rule {
        QRegularExpression pattern;
        QTextCharFormat format;
    };
    QString language_;
    QList<Rule> rules_;
    QTextCharFormat comment_, string_;
};

}  // namespace demo
