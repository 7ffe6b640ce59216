// .gitignore rules as git applies them (gitignore(5)), for indexing a repository without git or libgit2 (a folder picked in
// the demo need not be a git work tree): patterns of every .gitignore from the root down, the last match wins, a deeper file
// overrides a higher one, "!" re-includes, a trailing "/" matches directories only, a pattern with a "/" before its end is
// anchored to its file's folder, "*" and "?" stop at "/", "**" crosses folders, "[...]" classes, "\" escapes. The indexer
// never descends into an ignored folder, so, as in git, nothing below one can be re-included. .git/info/exclude is read
// too. The tests compare every rule with `git check-ignore`.
#pragma once

#include <QList>
#include <QRegularExpression>
#include <QString>

namespace demo {

class GitIgnore {
public:
    // Adds the rules of one ignore file whose folder is `base` ("" for the root, else "a/b" without slashes around).
    void add_rules(const QString &base, const QString &file_text);
    // path: relative to the root, '/'-separated, no trailing slash.
    bool ignored(const QString &path, bool is_dir) const;
    int rule_count() const { return int(rules_.size()); }

private:
    struct Rule {
        QString base;               // the folder of the .gitignore it came from
        QRegularExpression regex;   // matched against the path relative to base
        bool negate = false;
        bool dir_only = false;
    };
    QList<Rule> rules_;
};

// The regular expression of one pattern (without "!" and the trailing "/"); exposed for tests.
QString gitignore_pattern_regex(const QString &pattern);

}  // namespace demo
