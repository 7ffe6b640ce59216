#include "imports.h"

#include <QFileInfo>
#include <QRegularExpression>

namespace demo {

namespace {

QString folder_of(const QString &path) {
    const qsizetype slash = path.lastIndexOf('/');
    return slash < 0 ? QString() : path.left(slash);
}

QString join(const QString &folder, const QString &rel) { return folder.isEmpty() ? rel : folder + '/' + rel; }

// "a/./b/../c" -> "a/c"; "" when it climbs above the root.
QString normalize(const QString &path) {
    QStringList out;
    for (const QString &part : path.split('/', Qt::SkipEmptyParts)) {
        if (part == QStringLiteral(".")) continue;
        if (part == QStringLiteral("..")) {
            if (out.isEmpty()) return QString();
            out.removeLast();
        } else {
            out << part;
        }
    }
    return out.join('/');
}

// The first candidate that is a file of the repository; else the first repository file that ends with "/" + a candidate
// (a module imported from a package root that is not the repository root, e.g. "src/pkg/mod.py" for "pkg.mod").
void resolve(const QStringList &candidates, const QSet<QString> &files, QStringList &out) {
    for (const QString &c : candidates) {
        const QString n = normalize(c);
        if (!n.isEmpty() && files.contains(n)) {
            if (!out.contains(n)) out << n;
            return;
        }
    }
    for (const QString &c : candidates) {
        const QString n = normalize(c);
        if (n.isEmpty()) continue;
        const QString tail = '/' + n;
        for (const QString &f : files)
            if (f.endsWith(tail)) {
                if (!out.contains(f)) out << f;
                return;
            }
    }
}

void python_imports(const QString &path, const QString &text, const QSet<QString> &files, QStringList &out) {
    static const QRegularExpression import_re(QStringLiteral(R"re(^[ \t]*import[ \t]+([\w. \t,]+))re"), QRegularExpression::MultilineOption);
    static const QRegularExpression from_re(QStringLiteral(R"re(^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w, \t*]+))re"),
                                            QRegularExpression::MultilineOption);
    auto module_candidates = [](const QString &base, const QString &module) {
        const QString p = join(base, QString(module).replace('.', '/'));
        return QStringList{p + QStringLiteral(".py"), p + QStringLiteral("/__init__.py")};
    };
    for (auto it = import_re.globalMatch(text); it.hasNext();) {
        for (QString item : it.next().captured(1).split(',')) {
            item = item.trimmed().section(QRegularExpression(QStringLiteral("[ \t]+")), 0, 0);  // "a.b as c" -> "a.b"
            if (!item.isEmpty()) resolve(module_candidates(QString(), item), files, out);
        }
    }
    for (auto it = from_re.globalMatch(text); it.hasNext();) {
        const QRegularExpressionMatch m = it.next();
        const int dots = int(m.captured(1).size());
        const QString module = m.captured(2);
        QString base;
        if (dots > 0) {  // relative: "." is the file's package, each further dot one level up
            base = folder_of(path);
            for (int d = 1; d < dots; ++d) base = folder_of(base);
        }
        QStringList candidates;
        if (!module.isEmpty()) candidates << module_candidates(base, module);
        // "from pkg import mod" may import a module of the package.
        for (QString name : m.captured(3).split(',')) {
            name = name.trimmed().section(QRegularExpression(QStringLiteral("[ \t]+")), 0, 0);
            if (name.isEmpty() || name == QStringLiteral("*")) continue;
            const QString sub = module.isEmpty() ? name : module + '.' + name;
            const QStringList c = module_candidates(base, sub);
            QStringList found;
            resolve(c, files, found);
            for (const QString &f : found)
                if (!out.contains(f)) out << f;
        }
        if (!candidates.isEmpty()) resolve(candidates, files, out);
    }
}

void c_includes(const QString &path, const QString &text, const QSet<QString> &files, QStringList &out) {
    static const QRegularExpression re(QStringLiteral(R"re(^[ \t]*#[ \t]*include[ \t]*"([^"]+)")re"), QRegularExpression::MultilineOption);
    for (auto it = re.globalMatch(text); it.hasNext();) {
        const QString inc = it.next().captured(1);
        resolve({join(folder_of(path), inc), inc}, files, out);
    }
}

void js_imports(const QString &path, const QString &text, const QSet<QString> &files, QStringList &out) {
    static const QRegularExpression re(
        QStringLiteral(R"re((?:\bfrom[ \t]*|\bimport[ \t]*\(?[ \t]*|\brequire[ \t]*\([ \t]*)["'](\.{1,2}/[^"']+)["'])re"));
    for (auto it = re.globalMatch(text); it.hasNext();) {
        const QString rel = join(folder_of(path), it.next().captured(1));
        QStringList candidates{rel};
        for (const char *ext : {".ts", ".tsx", ".js", ".jsx", ".mjs", "/index.ts", "/index.js"}) candidates << rel + ext;
        resolve(candidates, files, out);
    }
}

void rust_imports(const QString &path, const QString &text, const QSet<QString> &files, QStringList &out) {
    static const QRegularExpression mod_re(QStringLiteral(R"re(^[ \t]*(?:pub[ \t]+)?mod[ \t]+(\w+)[ \t]*;)re"), QRegularExpression::MultilineOption);
    static const QRegularExpression use_re(QStringLiteral(R"re(^[ \t]*(?:pub[ \t]+)?use[ \t]+crate::([\w:]+))re"), QRegularExpression::MultilineOption);
    const QString folder = folder_of(path);
    const QString stem = QFileInfo(path).completeBaseName();
    // Modules declared in lib.rs/main.rs/mod.rs live beside it; in a.rs, under a/.
    const QString mod_dir = (stem == "lib" || stem == "main" || stem == "mod") ? folder : join(folder, stem);
    for (auto it = mod_re.globalMatch(text); it.hasNext();) {
        const QString name = it.next().captured(1);
        resolve({join(mod_dir, name + ".rs"), join(mod_dir, name + "/mod.rs")}, files, out);
    }
    for (auto it = use_re.globalMatch(text); it.hasNext();) {
        QStringList parts = it.next().captured(1).split(QStringLiteral("::"), Qt::SkipEmptyParts);
        // crate::a::b::Item: the longest prefix that is a file.
        while (!parts.isEmpty()) {
            const QString p = QStringLiteral("src/") + parts.join('/');
            QStringList found;
            resolve({p + ".rs", p + "/mod.rs"}, files, found);
            if (!found.isEmpty()) {
                if (!out.contains(found.first())) out << found.first();
                break;
            }
            parts.removeLast();
        }
    }
}

}  // namespace

QString language_of(const QString &path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    static const QList<QPair<QStringList, QString>> map = {
        {{"py", "pyi"}, "python"},
        {{"c", "h"}, "c"},
        {{"cc", "cpp", "cxx", "hpp", "hh", "hxx", "inl"}, "cpp"},
        {{"js", "jsx", "mjs", "cjs"}, "javascript"},
        {{"ts", "tsx"}, "typescript"},
        {{"rs"}, "rust"},
        {{"go"}, "go"},
        {{"java"}, "java"},
        {{"cs"}, "csharp"},
        {{"sh", "bash"}, "shell"},
        {{"md", "markdown"}, "markdown"},
        {{"json"}, "json"},
        {{"toml", "yaml", "yml", "ini", "cfg"}, "config"},
        {{"txt", "rst"}, "text"},
    };
    if (QFileInfo(path).fileName() == QStringLiteral("CMakeLists.txt")) return QStringLiteral("cmake");
    for (const auto &[suffixes, language] : map)
        if (suffixes.contains(suffix)) return language;
    return QStringLiteral("text");
}

QStringList imported_files(const QString &path, const QString &text, const QSet<QString> &repo_files) {
    QStringList out;
    const QString lang = language_of(path);
    if (lang == QStringLiteral("python")) python_imports(path, text, repo_files, out);
    else if (lang == QStringLiteral("c") || lang == QStringLiteral("cpp")) c_includes(path, text, repo_files, out);
    else if (lang == QStringLiteral("javascript") || lang == QStringLiteral("typescript")) js_imports(path, text, repo_files, out);
    else if (lang == QStringLiteral("rust")) rust_imports(path, text, repo_files, out);
    out.removeAll(path);
    return out;
}

}  // namespace demo
