// Shared by the demo's QtTest tests: where the data is, and skipping (not passing) when it is missing.
#pragma once

#include "engine/tokenize_text.h"

#include <specula/specula.hpp>

#include <QDir>
#include <QFileInfo>
#include <QString>
#include <QtTest>

namespace demo_test {

inline QString source_path(const QString &rel) { return QStringLiteral(SPECULA_SOURCE_DIR "/") + rel; }
inline QString bundled_model() { return source_path(QStringLiteral("models/stories260K.gguf")); }
inline QString bundled_draft() { return source_path(QStringLiteral("models/drafts/stories260K.longspec.gguf")); }
inline QString code_model() { return source_path(QStringLiteral("models/code-7m-f16.gguf")); }
inline QString code_draft() { return source_path(QStringLiteral("models/drafts/code-7m.longspec.gguf")); }
inline QString fixture_repo() { return source_path(QStringLiteral("tests/demo/fixtures/repo")); }

// A file of ../shared/fixtures, or "" when it is not there (the caller QSKIPs).
inline QString shared_fixture(const QString &rel) {
    const QString p = QStringLiteral(SPECULA_FIXTURES_DIR "/") + rel;
    return QFileInfo(p).isFile() ? p : QString();
}

inline specula::Model load_model(const QString &path, bool vocab_only = false) {
    specula::ModelOptions o;
    o.vocab_only = vocab_only;
    return specula::Model::load(path.toStdString(), o);
}

using demo::tokenize_text;

// Copies a directory tree (the committed fixture repository into a scratch folder the test may change).
inline bool copy_tree(const QString &from, const QString &to) {
    QDir().mkpath(to);
    const QDir src(from);
    for (const QFileInfo &e : src.entryInfoList(QDir::Files | QDir::Dirs | QDir::Hidden | QDir::NoDotAndDotDot)) {
        const QString dst = to + '/' + e.fileName();
        if (e.isDir()) {
            if (!copy_tree(e.absoluteFilePath(), dst)) return false;
        } else if (!QFile::copy(e.absoluteFilePath(), dst)) {
            return false;
        }
    }
    return true;
}

}  // namespace demo_test
