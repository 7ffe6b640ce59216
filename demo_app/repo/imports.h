// Which files of a repository a source file imports, for ranking the extra context of a completion. Handles the import
// forms of Python (import a.b, from .x import y), C and C++ (#include "x.h"), JavaScript/TypeScript (import/require of
// "./x") and Rust (mod x; use crate::a::b). Each found module is resolved against the repository's file list; what does
// not resolve (the standard library, packages) is left out.
#pragma once

#include <QSet>
#include <QString>
#include <QStringList>

namespace demo {

// "python", "c", "cpp", "javascript", "typescript", "rust", "go", "java", "markdown", "text", ... from the file name.
QString language_of(const QString &path);

// The repository files (relative paths) that `path` (relative, with text `text`) imports, in the order first seen.
QStringList imported_files(const QString &path, const QString &text, const QSet<QString> &repo_files);

}  // namespace demo
