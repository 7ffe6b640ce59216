// The real specula-demo in a real window (Xvfb), driven by its automation flags as a script would: it summarizes the
// fixture document and completes code in the fixture repository with the bundled models and their trained drafts; the
// text it prints must equal what `specula generate` produces for the same prompt and settings (plain decoding there,
// speculative decoding in the demo: lossless), and its screenshots must show a drawn window. Errors (a missing model, a
// draft for another model, a document too long) must end the app with a message and a non-zero status.
#include "demo_test_support.h"

#include <QImage>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSet>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

using namespace demo_test;

namespace {

struct Outcome {
    int rc = -1;
    QByteArray out, err;
};

Outcome run(const QString &program, const QStringList &args, const QProcessEnvironment &env = QProcessEnvironment::systemEnvironment(),
            int timeout_ms = 180000) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(program, args);
    Outcome o;
    if (!p.waitForStarted(20000)) return o;
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        o.err = "timed out";
        return o;
    }
    o.rc = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    o.out = p.readAllStandardOutput();
    o.err = p.readAllStandardError();
    return o;
}

// specula-demo under xvfb-run (a new X server per run), with settings in a scratch folder: every run is a first launch.
Outcome run_demo(const QTemporaryDir &home, const QStringList &args) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
    env.insert(QStringLiteral("XDG_RUNTIME_DIR"), home.path());
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("xcb"));  // a real window, not ctest's offscreen default
    // Under the sanitizer build: what D-Bus (loaded by Qt's xcb platform) keeps until exit is not the demo's leak.
    const QString lsan = env.value(QStringLiteral("LSAN_OPTIONS"));
    env.insert(QStringLiteral("LSAN_OPTIONS"), (lsan.isEmpty() ? QString() : lsan + ':') +
                                                   QStringLiteral("suppressions=" SPECULA_SOURCE_DIR "/tests/demo/lsan_gui.supp"));
    return run(QStringLiteral("xvfb-run"), QStringList{"-a", "-s", "-screen 0 1600x1000x24", QStringLiteral(SPECULA_DEMO)} + args, env);
}

// What `specula generate --format jsonl` generated: the concatenated text of its token lines.
QByteArray cli_text(const QStringList &args) {
    const Outcome o = run(QStringLiteral(SPECULA_CLI), QStringList{"generate", "--format", "jsonl", "--temp", "0", "-t", "2"} + args);
    if (o.rc != 0) {
        qWarning("specula generate failed: %s", o.err.constData());
        return QByteArray("<failed>");
    }
    QByteArray text;
    for (const QByteArray &line : o.out.split('\n')) {
        const QJsonObject obj = QJsonDocument::fromJson(line).object();
        if (obj.contains(QStringLiteral("text"))) text += obj.value(QStringLiteral("text")).toString().toUtf8();
    }
    return text;
}

// A screenshot that shows a drawn window: the size asked for, and many colors over much of it (a blank or black capture
// has one or two).
void check_screenshot(const QString &path) {
    QImage img(path);
    QVERIFY2(!img.isNull(), qPrintable(path));
    QVERIFY(img.width() >= 1000 && img.height() >= 600);
    QHash<QRgb, int> histogram;
    int samples = 0;
    for (int y = 0; y < img.height(); y += 3)
        for (int x = 0; x < img.width(); x += 3) {
            ++histogram[img.pixel(x, y)];
            ++samples;
        }
    int most = 0;
    for (int n : histogram) most = std::max(most, n);
    QVERIFY2(histogram.size() > 64, qPrintable(QStringLiteral("%1 colors").arg(histogram.size())));
    QVERIFY2(most < samples * 9 / 10, "one color covers nearly all of the screenshot");
}

QJsonObject read_json(const QString &path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

QString read_all(const QString &path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()).trimmed() : QString();
}

void need_xvfb() {
    if (QStandardPaths::findExecutable(QStringLiteral("xvfb-run")).isEmpty())
        QSKIP("xvfb-run is not installed (apt-get install xvfb xauth)");
}

}  // namespace

class TestDemoApp : public QObject {
    Q_OBJECT
private slots:
    void summarizes_the_fixture_document_as_specula_generate_does() {
        need_xvfb();
        QTemporaryDir home;
        const QString doc = source_path(QStringLiteral("tests/demo/fixtures/document.txt"));
        const QString shot = home.filePath(QStringLiteral("summarize.png")), report = home.filePath(QStringLiteral("report.json"));
        const Outcome demo = run_demo(home, {"--summarize", doc, "--temp", "0", "-n", "64", "--print", "--quit", "--screenshot", shot,
                                            "--report", report});
        QVERIFY2(demo.rc == 0, demo.err.constData());
        check_screenshot(shot);

        // The plain prompt of a model without a chat template, written out here, and plain greedy decoding.
        QFile f(doc);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray prompt = "Summarize the following document.\n\n" + f.readAll() + "\n\nSummary:";
        const QString prompt_file = home.filePath(QStringLiteral("prompt.txt"));
        QFile pf(prompt_file);
        QVERIFY(pf.open(QIODevice::WriteOnly));
        pf.write(prompt);
        pf.close();
        const QByteArray expected = cli_text({"-m", bundled_model(), "-f", prompt_file, "-n", "64"});
        QCOMPARE(demo.out, expected);
        QVERIFY(!expected.isEmpty());

        const QJsonObject r = read_json(report);
        QCOMPARE(r.value(QStringLiteral("drafter")).toString(), QStringLiteral("longspec"));  // the bundled trained draft
        QVERIFY(r.value(QStringLiteral("drafted_emitted")).toInt() > 0);
        QCOMPARE(r.value(QStringLiteral("generated")).toInt(), 64);
    }

    void compare_finds_the_outputs_with_and_without_speculation_identical() {
        need_xvfb();
        QTemporaryDir home;
        const QString report = home.filePath(QStringLiteral("compare.json")), shot = home.filePath(QStringLiteral("compare.png"));
        const Outcome demo = run_demo(home, {"--summarize", source_path(QStringLiteral("tests/demo/fixtures/document.txt")), "-n", "64",
                                            "--compare", "--report", report, "--screenshot", shot, "--quit"});
        QVERIFY2(demo.rc == 0, demo.err.constData());
        const QJsonObject r = read_json(report);
        QCOMPARE(r.value(QStringLiteral("identical")).toBool(), true);
        QVERIFY(r.value(QStringLiteral("speedup")).toDouble() > 0);
        QVERIFY(r.value(QStringLiteral("plain_tokens_per_s")).toDouble() > 0);
        QCOMPARE(r.value(QStringLiteral("generated")).toInt(), 64);
        check_screenshot(shot);
    }

    void completes_in_the_fixture_repository_as_specula_generate_does() {
        need_xvfb();
        QTemporaryDir home;
        const QString repo = home.filePath(QStringLiteral("repo"));
        QVERIFY(copy_tree(fixture_repo(), repo));
        const QString shot = home.filePath(QStringLiteral("complete.png")), ids = home.filePath(QStringLiteral("prompt.ids")),
                      report = home.filePath(QStringLiteral("report.json"));
        const Outcome demo = run_demo(home, {"--complete", repo + ":shapes/area.py:37:9", "--temp", "0", "-n", "40", "--print", "--quit",
                                            "--screenshot", shot, "--dump-prompt", ids, "--report", report});
        QVERIFY2(demo.rc == 0, demo.err.constData());
        check_screenshot(shot);
        const QJsonObject r = read_json(report);
        QCOMPARE(r.value(QStringLiteral("prompt_form")).toString(), QStringLiteral("prefix"));  // code-7m has no FIM tokens
        QCOMPARE(r.value(QStringLiteral("drafter")).toString(), QStringLiteral("longspec"));
        // The demo's prompt ids through the CLI, plain greedy: the same text.
        const QByteArray expected = cli_text({"-m", code_model(), "--prompt-ids", read_all(ids), "-n", "40", "-c", "1024"});
        QCOMPARE(demo.out, expected);
        // The prompt: the imported module's chunk first (BOS-separated), then the current file up to the cursor.
        const specula::Model m = load_model(code_model());
        QStringList id_list = read_all(ids).split(',');
        std::vector<int32_t> prompt;
        for (const QString &s : id_list) prompt.push_back(s.toInt());
        const QString text = QString::fromStdString(m.detokenize(prompt));
        QVERIFY(text.contains(QStringLiteral("def midpoint(a, b):")));   // shapes/geometry.py, imported
        QVERIFY(text.endsWith(QStringLiteral("q = points[(i + 1) % len(points)]\n")));
    }

    void completes_with_the_fixture_code_model_and_its_draft() {
        need_xvfb();
        const QString model = shared_fixture(QStringLiteral("models/code-7m/model.gguf"));
        if (model.isEmpty()) QSKIP("../shared/fixtures/models/code-7m is missing");
        QTemporaryDir home;
        const QString repo = home.filePath(QStringLiteral("repo"));
        QVERIFY(copy_tree(fixture_repo(), repo));
        const QString ids = home.filePath(QStringLiteral("prompt.ids"));
        const Outcome demo = run_demo(home, {"--model", model, "--draft", code_draft(), "-c", "1024", "--complete",
                                            repo + ":shapes/geometry.py:19:5", "--temp", "0", "-n", "48", "--print", "--quit",
                                            "--dump-prompt", ids});
        QVERIFY2(demo.rc == 0, demo.err.constData());
        QCOMPARE(demo.out, cli_text({"-m", model, "--prompt-ids", read_all(ids), "-n", "48", "-c", "1024"}));
    }

    void failures_end_with_the_message_and_a_non_zero_status() {
        need_xvfb();
        QTemporaryDir home;
        const QString doc = source_path(QStringLiteral("tests/demo/fixtures/document.txt"));
        Outcome o = run_demo(home, {"--model", "/nonexistent/model.gguf", "--summarize", doc, "--quit"});
        QVERIFY(o.rc != 0);
        QVERIFY2(o.err.contains("cannot load model '/nonexistent/model.gguf'"), o.err.constData());

        o = run_demo(home, {"--draft", code_draft(), "--summarize", doc, "--quit"});  // code-7m's draft on stories260K
        QVERIFY(o.rc != 0);
        QVERIFY2(o.err.contains("cannot use draft") && o.err.contains("target"), o.err.constData());

        o = run_demo(home, {"--summarize", doc, "-c", "128", "-n", "32", "--quit"});
        QVERIFY(o.rc != 0);
        QVERIFY2(o.err.contains("room for 96"), o.err.constData());
        o = run_demo(home, {"--summarize", doc, "-c", "128", "-n", "32", "--long-document", "head-tail", "--print", "--quit"});
        QVERIFY2(o.rc == 0, o.err.constData());
        QVERIFY(!o.out.isEmpty());

        o = run_demo(home, {"--complete", fixture_repo() + ":no/such/file.py:1:1", "--quit"});
        QVERIFY(o.rc != 0);
        QVERIFY2(o.err.contains("not an indexed file"), o.err.constData());

        QProcessEnvironment offscreen = QProcessEnvironment::systemEnvironment();
        offscreen.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        o = run(QStringLiteral(SPECULA_DEMO), {"--complete", "repo-without-line"}, offscreen);
        QCOMPARE(o.rc, 2);
        QVERIFY(o.err.contains("REPO_DIR:RELATIVE_FILE:LINE:COLUMN"));
    }
};

QTEST_GUILESS_MAIN(TestDemoApp)
#include "test_demo_app.moc"
