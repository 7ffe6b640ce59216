#include "repo_index.h"

#include "gitignore.h"
#include "imports.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLocale>
#include <QStringDecoder>
#include <algorithm>

namespace demo {

const IndexedFile *RepoIndex::find(const QString &path) const {
    const auto it = std::lower_bound(files.begin(), files.end(), path, [](const IndexedFile &f, const QString &p) { return f.path < p; });
    return it != files.end() && it->path == path ? &*it : nullptr;
}

QSet<QString> RepoIndex::paths() const {
    QSet<QString> out;
    for (const IndexedFile &f : files) out.insert(f.path);
    return out;
}

QString RepoIndex::summary() const {
    QStringList skipped;
    if (stats.ignored) skipped << QStringLiteral("%1 ignored").arg(stats.ignored);
    if (stats.too_large) skipped << QStringLiteral("%1 too large").arg(stats.too_large);
    if (stats.binary) skipped << QStringLiteral("%1 binary").arg(stats.binary);
    if (stats.over_limit) skipped << QStringLiteral("%1 over the limits").arg(stats.over_limit);
    if (stats.unreadable) skipped << QStringLiteral("%1 unreadable").arg(stats.unreadable);
    QString s = QStringLiteral("%1 files (%2)").arg(files.size()).arg(QLocale::c().formattedDataSize(total_bytes, 1,
                                                                                                        QLocale::DataSizeTraditionalFormat));
    if (!skipped.isEmpty()) s += QStringLiteral("; skipped: ") + skipped.join(QStringLiteral(", "));
    if (cancelled) s += QStringLiteral(" (cancelled)");
    return s;
}

bool looks_like_text(const QByteArray &head) {
    if (head.contains('\0')) return false;
    // Drop a multi-byte sequence cut by the end of the sample, then require valid UTF-8.
    qsizetype end = head.size();
    for (qsizetype back = 1; back <= 3 && back <= head.size(); ++back) {
        const uchar c = uchar(head[head.size() - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        const int need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need > back) end = head.size() - back;
        break;
    }
    QStringDecoder decoder(QStringDecoder::Utf8);
    (void)QString(decoder.decode(QByteArrayView(head.constData(), end)));
    return !decoder.hasError();
}

namespace {

QString read_small(const QString &path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return QString();
    return QString::fromUtf8(f.read(1024 * 1024));
}

struct Walker {
    QString root;
    IndexRules rules;
    const std::function<bool(int, int)> &progress;
    GitIgnore ignore;
    RepoIndex index;

    bool walk(const QString &rel_dir) {  // false: cancelled
        const QString abs_dir = rel_dir.isEmpty() ? root : root + '/' + rel_dir;
        if (rules.use_gitignore) {
            const QString gi = abs_dir + QStringLiteral("/.gitignore");
            if (QFileInfo::exists(gi)) ignore.add_rules(rel_dir, read_small(gi));
        }
        QDir dir(abs_dir);
        const QFileInfoList entries = dir.entryInfoList(QDir::Files | QDir::Dirs | QDir::Hidden | QDir::NoDotAndDotDot | QDir::System,
                                                        QDir::Name | QDir::DirsLast);
        for (const QFileInfo &e : entries) {
            const QString rel = rel_dir.isEmpty() ? e.fileName() : rel_dir + '/' + e.fileName();
            if (e.isSymLink()) continue;  // never followed: no loops, nothing outside the root
            if (e.isDir()) {
                if (e.fileName() == QStringLiteral(".git")) continue;
                if (rules.use_gitignore && ignore.ignored(rel, true)) {
                    ++index.stats.ignored;
                    continue;
                }
                if (!walk(rel)) return false;
                continue;
            }
            if (!e.isFile()) continue;
            ++index.stats.scanned;
            if (progress && index.stats.scanned % 64 == 0 && !progress(index.stats.scanned, int(index.files.size()))) return false;
            if (rules.use_gitignore && ignore.ignored(rel, false)) {
                ++index.stats.ignored;
                continue;
            }
            if (e.size() > rules.max_file_bytes) {
                ++index.stats.too_large;
                continue;
            }
            if (int(index.files.size()) >= rules.max_files || index.total_bytes + e.size() > rules.max_total_bytes) {
                ++index.stats.over_limit;
                continue;
            }
            QFile f(e.absoluteFilePath());
            if (!f.open(QIODevice::ReadOnly)) {
                ++index.stats.unreadable;
                continue;
            }
            if (!looks_like_text(f.read(8192))) {
                ++index.stats.binary;
                continue;
            }
            IndexedFile file;
            file.path = rel;
            file.size = e.size();
            file.modified = e.lastModified();
            file.language = language_of(rel);
            index.files.push_back(file);
            index.total_bytes += e.size();
        }
        return true;
    }
};

}  // namespace

RepoIndex index_repository(const QString &root, const IndexRules &rules, const std::function<bool(int, int)> &progress) {
    Walker w{QFileInfo(root).canonicalFilePath(), rules, progress, {}, {}};
    w.index.root = w.root;
    if (w.root.isEmpty() || !QFileInfo(w.root).isDir()) return w.index;
    if (rules.use_gitignore) {
        const QString exclude = w.root + QStringLiteral("/.git/info/exclude");
        if (QFileInfo::exists(exclude)) w.ignore.add_rules(QString(), read_small(exclude));
    }
    w.index.cancelled = !w.walk(QString());
    std::sort(w.index.files.begin(), w.index.files.end(), [](const IndexedFile &a, const IndexedFile &b) { return a.path < b.path; });
    if (progress) progress(w.index.stats.scanned, int(w.index.files.size()));
    return w.index;
}

QString read_text_file(const QString &root, const QString &relative_path, qint64 max_bytes) {
    QFile f(root + '/' + relative_path);
    if (!f.open(QIODevice::ReadOnly)) return QString();
    return QString::fromUtf8(f.read(max_bytes));
}

}  // namespace demo
