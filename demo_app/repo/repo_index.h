// Indexing a repository folder for code completion: the text files a completion may draw context from. Runs off the UI
// thread (RepoIndexer) with progress and cancel. Rules: .git is never entered; .gitignore files (and .git/info/exclude)
// apply as git applies them; files above a size limit, binary files (a NUL byte or invalid UTF-8 in their first 8 KiB)
// and files past a count or total-size limit are skipped and counted; symbolic links are not followed.
#pragma once

#include <QDateTime>
#include <QFuture>
#include <QList>
#include <QMetaType>
#include <QSet>
#include <QString>
#include <functional>

namespace demo {

struct IndexRules {
    qint64 max_file_bytes = 256 * 1024;
    int max_files = 20000;
    qint64 max_total_bytes = 64LL * 1024 * 1024;
    bool use_gitignore = true;
};

struct IndexedFile {
    QString path;       // relative to the root, '/'-separated
    qint64 size = 0;
    QDateTime modified;
    QString language;   // imports.h language_of
};

struct IndexStats {
    int scanned = 0;     // files looked at
    int ignored = 0;     // files and folders skipped by ignore rules (a folder counts once)
    int too_large = 0;
    int binary = 0;
    int over_limit = 0;  // beyond max_files or max_total_bytes
    int unreadable = 0;
};

struct RepoIndex {
    QString root;        // absolute, canonical
    QList<IndexedFile> files;  // sorted by path
    IndexStats stats;
    qint64 total_bytes = 0;
    bool cancelled = false;

    const IndexedFile *find(const QString &path) const;
    QSet<QString> paths() const;
    QString summary() const;  // "412 files (3.1 MiB); skipped: 20 ignored, 2 too large, 5 binary"
};

// True when the first bytes of a file look like text: no NUL byte and valid UTF-8 (a multi-byte character cut at the end
// of the sample is fine).
bool looks_like_text(const QByteArray &head);

// Indexes root. progress(scanned, kept) is called now and then; returning false cancels (the result has cancelled set).
RepoIndex index_repository(const QString &root, const IndexRules &rules,
                           const std::function<bool(int scanned, int kept)> &progress = {});

// Reads a file of the index as UTF-8 text ("" when it is gone or unreadable).
QString read_text_file(const QString &root, const QString &relative_path, qint64 max_bytes = 4 * 1024 * 1024);

}  // namespace demo

Q_DECLARE_METATYPE(demo::RepoIndex)
