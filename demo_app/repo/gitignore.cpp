#include "gitignore.h"

#include <QStringList>

namespace demo {

namespace {

// The class "[...]" starting at pattern[i] as a regex class, or "" when it does not close (then "[" is literal).
QString bracket_class(const QString &p, qsizetype &i) {
    qsizetype j = i + 1;
    QString out = QStringLiteral("[");
    bool negated = false;
    if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
        out += '^';
        negated = true;
        ++j;
    }
    const qsizetype first = j;
    for (; j < p.size(); ++j) {
        const QChar c = p[j];
        if (c == ']' && j > first) {
            i = j;
            // A negated class does not match "/" in a path pattern (git's wildmatch with WM_PATHNAME).
            return out + (negated ? QStringLiteral("/]") : QStringLiteral("]"));
        }
        if (c == '\\' && j + 1 < p.size()) {
            out += '\\';
            out += p[++j];
        } else if (c == '[' && j + 1 < p.size() && p[j + 1] == ':') {
            // POSIX classes [:alpha:] and the like.
            const qsizetype end = p.indexOf(QStringLiteral(":]"), j + 2);
            if (end < 0) return QString();
            const QString name = p.mid(j + 2, end - j - 2);
            static const QList<QPair<QString, QString>> classes = {
                {"alnum", "a-zA-Z0-9"}, {"alpha", "a-zA-Z"}, {"blank", " \\t"}, {"cntrl", "\\x00-\\x1f\\x7f"},
                {"digit", "0-9"},       {"graph", "!-~"},    {"lower", "a-z"},  {"print", " -~"},
                {"punct", "!-/:-@\\[-`{-~"}, {"space", " \\t\\n\\r\\f\\v"}, {"upper", "A-Z"}, {"xdigit", "0-9a-fA-F"}};
            bool known = false;
            for (const auto &[k, v] : classes)
                if (k == name) {
                    out += v;
                    known = true;
                }
            if (!known) return QString();
            j = end + 1;
        } else if (c == '-') {
            out += '-';
        } else {
            out += QRegularExpression::escape(QString(c));
        }
    }
    return QString();
}

}  // namespace

QString gitignore_pattern_regex(const QString &pattern) {
    QString re;
    const qsizetype n = pattern.size();
    for (qsizetype i = 0; i < n; ++i) {
        const QChar c = pattern[i];
        if (c == '*') {
            const bool double_star = i + 1 < n && pattern[i + 1] == '*';
            const bool at_segment_start = i == 0 || pattern[i - 1] == '/';
            if (double_star && at_segment_start && (i + 2 == n || pattern[i + 2] == '/')) {
                if (i + 2 == n) {
                    re += QStringLiteral(".*");  // "a/**": everything inside a (the "/" before is already in re)
                } else {
                    re += QStringLiteral("(?:.*/)?");  // "**/x", "a/**/b": zero or more folders
                    ++i;                              // the "/" after "**" is part of the group
                }
                ++i;
            } else {
                while (i + 1 < n && pattern[i + 1] == '*') ++i;  // other runs of "*" are one "*"
                re += QStringLiteral("[^/]*");
            }
        } else if (c == '?') {
            re += QStringLiteral("[^/]");
        } else if (c == '[') {
            qsizetype j = i;
            const QString cls = bracket_class(pattern, j);
            if (cls.isEmpty()) {
                re += QStringLiteral("\\[");
            } else {
                re += cls;
                i = j;
            }
        } else if (c == '\\' && i + 1 < n) {
            re += QRegularExpression::escape(QString(pattern[++i]));
        } else {
            re += QRegularExpression::escape(QString(c));
        }
    }
    return re;
}

void GitIgnore::add_rules(const QString &base, const QString &file_text) {
    const QStringList lines = file_text.split('\n');
    for (QString line : lines) {
        if (line.endsWith('\r')) line.chop(1);
        // Trailing spaces are dropped unless escaped with a backslash.
        while (line.endsWith(' ') && !line.endsWith(QStringLiteral("\\ "))) line.chop(1);
        if (line.isEmpty() || line.startsWith('#')) continue;
        Rule rule;
        rule.base = base;
        if (line.startsWith('!')) {
            rule.negate = true;
            line.remove(0, 1);
        } else if (line.startsWith(QStringLiteral("\\!")) || line.startsWith(QStringLiteral("\\#"))) {
            line.remove(0, 1);
        }
        if (line.endsWith('/')) {
            rule.dir_only = true;
            line.chop(1);
        }
        if (line.isEmpty()) continue;
        // A "/" at the start or in the middle anchors the pattern to the file's folder; otherwise it matches a name at
        // any depth below it.
        const bool anchored = line.contains('/');
        if (line.startsWith('/')) line.remove(0, 1);
        const QString body = gitignore_pattern_regex(line);
        rule.regex = QRegularExpression(QStringLiteral("\\A") + (anchored ? QString() : QStringLiteral("(?:.*/)?")) + body +
                                        QStringLiteral("\\z"));
        if (!rule.regex.isValid()) continue;  // a pattern git would not match anything with either
        rules_.push_back(std::move(rule));
    }
}

bool GitIgnore::ignored(const QString &path, bool is_dir) const {
    // The last rule that matches decides. Rules are kept in the order their files were read, the root's first, so a
    // deeper file's rules come later and override.
    for (qsizetype i = rules_.size() - 1; i >= 0; --i) {
        const Rule &r = rules_[i];
        if (r.dir_only && !is_dir) continue;
        QString rel;
        if (r.base.isEmpty()) {
            rel = path;
        } else {
            if (!path.startsWith(r.base + '/')) continue;
            rel = path.mid(r.base.size() + 1);
        }
        if (r.regex.match(rel).hasMatch()) return !r.negate;
    }
    return false;
}

}  // namespace demo
