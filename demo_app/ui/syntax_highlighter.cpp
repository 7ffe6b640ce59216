#include "syntax_highlighter.h"

namespace demo {

namespace {
enum BlockState { kNormal = 0, kBlockComment = 1, kTripleDouble = 2, kTripleSingle = 3 };

QString keyword_pattern(const QStringList &words) { return QStringLiteral("\\b(?:") + words.join('|') + QStringLiteral(")\\b"); }
}  // namespace

SyntaxHighlighter::SyntaxHighlighter(QTextDocument *document) : QSyntaxHighlighter(document) {
    comment_.setForeground(QColor(0x6a, 0x73, 0x7d));
    comment_.setFontItalic(true);
    string_.setForeground(QColor(0x0a, 0x7a, 0x2f));
}

void SyntaxHighlighter::set_language(const QString &language) {
    language_ = language;
    rules_.clear();
    QTextCharFormat keyword, number, builtin;
    keyword.setForeground(QColor(0xa6, 0x26, 0xa4));
    keyword.setFontWeight(QFont::Bold);
    number.setForeground(QColor(0x98, 0x68, 0x01));
    builtin.setForeground(QColor(0x40, 0x78, 0xf2));

    QStringList words;
    if (language == QStringLiteral("python")) {
        words = {"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
                 "except", "False", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "None",
                 "nonlocal", "not", "or", "pass", "raise", "return", "True", "try", "while", "with", "yield", "match", "case"};
        rules_.push_back({QRegularExpression(keyword_pattern({"self", "cls", "print", "len", "range", "isinstance", "super"})), builtin});
    } else if (QStringList{"c", "cpp", "javascript", "typescript", "rust", "go", "java", "csharp"}.contains(language)) {
        words = {"auto", "break", "case", "catch", "class", "const", "constexpr", "continue", "default", "delete", "do",
                 "else", "enum", "export", "extern", "false", "fn", "for", "func", "function", "if", "impl", "import",
                 "inline", "let", "match", "mod", "mut", "namespace", "new", "nullptr", "null", "package", "private",
                 "protected", "pub", "public", "return", "static", "struct", "switch", "template", "this", "throw", "true",
                 "try", "type", "typedef", "typename", "union", "use", "using", "var", "virtual", "void", "while", "int",
                 "char", "bool", "float", "double", "long", "unsigned", "signed", "short", "size_t", "interface", "async", "await"};
        QTextCharFormat pre;
        pre.setForeground(QColor(0x98, 0x68, 0x01));
        rules_.push_back({QRegularExpression(QStringLiteral("^\\s*#\\s*\\w+")), pre});
    }
    if (!words.isEmpty()) rules_.push_back({QRegularExpression(keyword_pattern(words)), keyword});
    rules_.push_back({QRegularExpression(QStringLiteral("\\b(?:0[xX][0-9a-fA-F_]+|\\d[\\d_]*(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)\\b")), number});
    rehighlight();
}

void SyntaxHighlighter::highlightBlock(const QString &text) {
    setCurrentBlockState(kNormal);
    if (language_.isEmpty() || language_ == QStringLiteral("text") || language_ == QStringLiteral("markdown")) return;
    for (const Rule &r : rules_)
        for (auto it = r.pattern.globalMatch(text); it.hasNext();) {
            const QRegularExpressionMatch m = it.next();
            setFormat(int(m.capturedStart()), int(m.capturedLength()), r.format);
        }

    const bool python = language_ == QStringLiteral("python");
    int i = 0;
    const int n = int(text.size());
    // Continue a construct opened on an earlier line.
    auto close_at = [&](int from, const QString &closer) { return int(text.indexOf(closer, from)); };
    const int prev = previousBlockState() < 0 ? kNormal : previousBlockState();
    if (prev != kNormal) {
        const QString closer = prev == kBlockComment ? QStringLiteral("*/") : prev == kTripleDouble ? QStringLiteral("\"\"\"") : QStringLiteral("'''");
        const int end = close_at(0, closer);
        const QTextCharFormat &f = prev == kBlockComment ? comment_ : string_;
        if (end < 0) {
            setFormat(0, n, f);
            setCurrentBlockState(prev);
            return;
        }
        setFormat(0, end + int(closer.size()), f);
        i = end + int(closer.size());
    }
    while (i < n) {
        const QChar c = text[i];
        if (python && (text.mid(i, 3) == QStringLiteral("\"\"\"") || text.mid(i, 3) == QStringLiteral("'''"))) {
            const QString q = text.mid(i, 3);
            const int end = close_at(i + 3, q);
            if (end < 0) {
                setFormat(i, n - i, string_);
                setCurrentBlockState(q[0] == '"' ? kTripleDouble : kTripleSingle);
                return;
            }
            setFormat(i, end + 3 - i, string_);
            i = end + 3;
        } else if (c == '"' || c == '\'' || (!python && c == '`')) {
            int j = i + 1;
            while (j < n && text[j] != c) j += text[j] == '\\' ? 2 : 1;
            setFormat(i, std::min(j + 1, n) - i, string_);
            i = j + 1;
        } else if ((python && c == '#') || (!python && text.mid(i, 2) == QStringLiteral("//"))) {
            setFormat(i, n - i, comment_);
            return;
        } else if (!python && text.mid(i, 2) == QStringLiteral("/*")) {
            const int end = close_at(i + 2, QStringLiteral("*/"));
            if (end < 0) {
                setFormat(i, n - i, comment_);
                setCurrentBlockState(kBlockComment);
                return;
            }
            setFormat(i, end + 2 - i, comment_);
            i = end + 2;
        } else {
            ++i;
        }
    }
}

}  // namespace demo
