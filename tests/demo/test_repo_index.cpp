// Repository indexing as the demo's code page does it: .gitignore rules (compared with git's own listing of the files it
// does not ignore), size and count limits, binary files, symbolic links, the .git folder, and cancelling.
#include "demo_test_support.h"
#include "repo/gitignore.h"
#include "repo/repo_index.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

using namespace demo;

namespace {

void write(const QString &path, const QByteArray &bytes) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(bytes);
}

QStringList indexed_paths(const RepoIndex &index) {
    QStringList out;
    for (const IndexedFile &f : index.files) out << f.path;
    return out;
}

}  // namespace

class TestRepoIndex : public QObject {
    Q_OBJECT
private slots:
    void gitignore_rules_match_git() {
        if (QStandardPaths::findExecutable(QStringLiteral("git")).isEmpty()) QSKIP("git is not installed");
        QTemporaryDir dir;
        const QString root = dir.path();
        QProcess git;
        git.setWorkingDirectory(root);
        git.start(QStringLiteral("git"), {"init", "-q"});
        QVERIFY(git.waitForFinished(30000));
        QCOMPARE(git.exitCode(), 0);
        // Rules of every kind gitignore(5) describes, in the root, in sub-folders and in .git/info/exclude.
        write(root + "/.gitignore",
              "# comment\n"
              "*.log\n"
              "!keep.log\n"
              "build/\n"
              "/top_only.txt\n"
              "docs/*.tmp\n"
              "**/cache\n"
              "deep/**/x.dat\n"
              "name?.txt\n"
              "[abc]set.txt\n"
              "\\#hash.txt\n"
              "trailing.txt   \n"
              "vendor/**\n"
              "!vendor/keep/\n"
              "*.bak\n");
        write(root + "/sub/.gitignore", "local.txt\n!important.bak\n/anchored.txt\n");
        write(root + "/.git/info/exclude", "excluded_by_info.txt\n");
        const QStringList files = {
            "a.py", "debug.log", "keep.log", "sub/keep.log", "sub/trace.log", "build/out.o", "src/build/out.o", "build.txt",
            "top_only.txt", "sub/top_only.txt", "docs/a.tmp", "docs/x/a.tmp", "docs/a.md", "cache/c", "src/cache/c",
            "src/cachex/c", "deep/x.dat", "deep/a/b/x.dat", "deep/a/y.dat", "name1.txt", "name12.txt", "aset.txt",
            "dset.txt", "#hash.txt", "trailing.txt", "vendor/lib.c", "vendor/keep/k.c", "sub/local.txt", "local.txt",
            "sub/anchored.txt", "sub/deeper/anchored.txt", "x.bak", "sub/important.bak", "sub/other.bak",
            "excluded_by_info.txt", "sub/excluded_by_info.txt"};
        for (const QString &f : files) write(root + '/' + f, "text\n");

        git.start(QStringLiteral("git"), {"-c", "core.excludesFile=/dev/null", "ls-files", "--others", "--exclude-standard"});
        QVERIFY(git.waitForFinished(30000));
        QStringList expected = QString::fromUtf8(git.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
        expected.sort();

        const RepoIndex index = index_repository(root, IndexRules{});
        QStringList got = indexed_paths(index);
        got.sort();
        QCOMPARE(got, expected);
        QVERIFY(index.stats.ignored > 10);
    }

    void gitignore_patterns() {
        GitIgnore g;
        g.add_rules(QString(), QStringLiteral("*.o\n!main.o\nout/\n/root.txt\na/**/b\n"));
        QVERIFY(g.ignored(QStringLiteral("x.o"), false));
        QVERIFY(g.ignored(QStringLiteral("d/x.o"), false));
        QVERIFY(!g.ignored(QStringLiteral("main.o"), false));
        QVERIFY(g.ignored(QStringLiteral("out"), true));
        QVERIFY(!g.ignored(QStringLiteral("out"), false));  // "out/" matches folders only
        QVERIFY(g.ignored(QStringLiteral("root.txt"), false));
        QVERIFY(!g.ignored(QStringLiteral("d/root.txt"), false));
        QVERIFY(g.ignored(QStringLiteral("a/b"), false));
        QVERIFY(g.ignored(QStringLiteral("a/x/y/b"), false));
        QVERIFY(!g.ignored(QStringLiteral("a/x/y/bb"), false));
        QCOMPARE(g.rule_count(), 5);
    }

    void files_too_large_binary_or_past_the_limits_are_skipped_and_counted() {
        QTemporaryDir dir;
        const QString root = dir.path();
        write(root + "/small.py", "print('hi')\n");
        write(root + "/utf8.md", QString::fromUtf8("caf\xC3\xA9 \xE2\x82\xAC\n").toUtf8());
        write(root + "/big.txt", QByteArray(300 * 1024, 'x'));
        write(root + "/image.png", QByteArray("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
        write(root + "/latin1.txt", QByteArray("caf\xE9\n"));
        write(root + "/.git/HEAD", "ref: refs/heads/main\n");
        write(root + "/.hidden/config.toml", "a = 1\n");
        QVERIFY(QFile::link(QStringLiteral("/etc/hostname"), root + "/link_outside.txt"));
        QVERIFY(QFile::link(root, root + "/loop"));
        IndexRules rules;
        rules.max_file_bytes = 256 * 1024;
        const RepoIndex index = index_repository(root, rules);
        QCOMPARE(indexed_paths(index), QStringList({".hidden/config.toml", "small.py", "utf8.md"}));
        QCOMPARE(index.stats.too_large, 1);
        QCOMPARE(index.stats.binary, 2);
        QCOMPARE(index.find(QStringLiteral("small.py"))->language, QStringLiteral("python"));
        QVERIFY(index.summary().contains(QStringLiteral("3 files")));
        QVERIFY(index.summary().contains(QStringLiteral("2 binary")));

        rules.max_files = 2;
        const RepoIndex capped = index_repository(root, rules);
        QCOMPARE(capped.files.size(), 2);
        QCOMPARE(capped.stats.over_limit, 1);
        rules = IndexRules{};
        rules.max_total_bytes = 5;
        QCOMPARE(index_repository(root, rules).files.size(), 0);
    }

    void text_detection_allows_a_character_cut_by_the_sample() {
        QVERIFY(looks_like_text("plain ascii"));
        QVERIFY(looks_like_text(QByteArray("caf\xC3", 4)));         // a two-byte character cut after its lead byte
        QVERIFY(looks_like_text(QByteArray("\xE2\x82", 2)));        // a three-byte one cut after two
        QVERIFY(!looks_like_text(QByteArray("a\xC3" "b", 3)));      // an invalid sequence inside
        QVERIFY(!looks_like_text(QByteArray("a\0b", 3)));
        QVERIFY(looks_like_text(QByteArray()));
    }

    void indexing_can_be_cancelled() {
        QTemporaryDir dir;
        for (int i = 0; i < 300; ++i) write(dir.path() + QStringLiteral("/f%1.txt").arg(i), "x\n");
        int calls = 0;
        const RepoIndex index = index_repository(dir.path(), IndexRules{}, [&calls](int, int) { return ++calls < 2; });
        QVERIFY(index.cancelled);
        QVERIFY(index.files.size() < 300);
        QVERIFY(index.summary().contains(QStringLiteral("cancelled")));
        QVERIFY(!index_repository(dir.path(), IndexRules{}).cancelled);
    }

    void a_missing_folder_gives_an_empty_index() {
        const RepoIndex index = index_repository(QStringLiteral("/nonexistent/folder"), IndexRules{});
        QVERIFY(index.files.isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestRepoIndex)
#include "test_repo_index.moc"
