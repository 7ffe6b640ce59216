// The demo's window and widgets, driven as a user drives them (offscreen platform): Ctrl+Space, Tab and Esc in the code
// editor; the drafted-token highlighting of the output view; the window's buttons (Summarize, Stop, Compare, Complete)
// on the bundled models; prefix reuse shown as "N tokens cached"; errors in the banner; what a dropped file opens; and
// the settings' round trip.
#include "app/default_models.h"
#include "app/settings.h"
#include "demo_test_support.h"
#include "ui/code_editor.h"
#include "ui/code_page.h"
#include "ui/main_window.h"
#include "ui/output_view.h"
#include "ui/summarize_page.h"

#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QPlainTextEdit>
#include <QtTest>

using namespace demo;
using namespace demo_test;

namespace {

ModelConfig config_of(const QString &model, const QString &draft, int n_ctx = 0) {
    ModelConfig c;
    c.model_path = model;
    c.draft_path = draft;
    c.ngram = false;
    c.threads = 2;
    c.n_ctx = n_ctx;
    return c;
}

bool load(MainWindow &w, Task t, const ModelConfig &c) {
    QSignalSpy ok(&w, &MainWindow::modelLoaded), bad(&w, &MainWindow::modelLoadFailed);
    w.set_model_config(t, c);
    return QTest::qWaitFor([&] { return ok.count() + bad.count() > 0; }, 30000) && ok.count() > 0;
}

QPushButton *button(QWidget *parent, const QString &text) {
    for (QPushButton *b : parent->findChildren<QPushButton *>())
        if (b->text().startsWith(text)) return b;
    return nullptr;
}

}  // namespace

class TestWidgets : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { register_engine_types(); }

    void the_editor_asks_with_ctrl_space_accepts_with_tab_and_dismisses_with_escape() {
        CodeEditor e;
        e.setPlainText(QStringLiteral("def f():\n    \n"));
        e.show();
        e.set_cursor(1, 4);
        QSignalSpy asked(&e, &CodeEditor::completionRequested);
        QTest::keyClick(&e, Qt::Key_Space, Qt::ControlModifier);
        QCOMPARE(asked.count(), 1);
        QCOMPARE(e.toPlainText(), QStringLiteral("def f():\n    \n"));  // Ctrl+Space types nothing

        const QImage plain = e.viewport()->grab().toImage();
        e.set_suggestion(QStringLiteral("return 1\n# done"));
        QVERIFY(e.viewport()->grab().toImage() != plain);  // the ghost text is drawn
        QCOMPARE(e.toPlainText(), QStringLiteral("def f():\n    \n"));  // but not in the text
        QTest::keyClick(&e, Qt::Key_Tab);
        QCOMPARE(e.toPlainText(), QStringLiteral("def f():\n    return 1\n# done\n"));
        QVERIFY(e.suggestion().isEmpty());

        e.set_suggestion(QStringLiteral("x"));
        QSignalSpy dismissed(&e, &CodeEditor::suggestionDismissed);
        QTest::keyClick(&e, Qt::Key_Escape);
        QVERIFY(e.suggestion().isEmpty());
        QCOMPARE(dismissed.count(), 1);
        e.set_suggestion(QStringLiteral("y"));
        QTest::keyClick(&e, Qt::Key_Left);  // moving the cursor dismisses too
        QVERIFY(e.suggestion().isEmpty());
        QTest::keyClick(&e, Qt::Key_Tab);   // without a suggestion Tab is Tab
        QVERIFY(e.toPlainText().contains('\t'));
        e.set_cursor(0, 4);
        QCOMPARE(e.cursor_line(), 0);
        QCOMPARE(e.cursor_column(), 4);
    }

    void the_output_view_highlights_drafted_tokens() {
        OutputView v;
        v.append({{1, "Hello", false, 0}, {2, " wor", true, 1}, {3, "ld", true, 2}, {4, "!", false, 3}});
        v.append({{SPECULA_TOKEN_NULL, "\n", false, 4}});  // text flushed at the end, no token of its own
        QCOMPARE(v.text(), QStringLiteral("Hello world!\n"));
        QCOMPARE(v.tokens(), 4);
        QCOMPARE(v.drafted(), 2);
        QPlainTextEdit *edit = v.findChild<QPlainTextEdit *>(QStringLiteral("output"));
        QVERIFY(edit);
        auto background_at = [edit](int pos) {
            QTextCursor c(edit->document());
            c.setPosition(pos + 1);  // the format of the character before the cursor
            return c.charFormat().background().color();
        };
        const QColor drafted = background_at(6);  // 'w'
        QVERIFY(drafted.alpha() > 0 && drafted != Qt::white);
        QCOMPARE(background_at(9), drafted);     // 'l'
        QVERIFY(background_at(0) != drafted);    // 'H'
        QVERIFY(background_at(11) != drafted);   // '!'
        v.clear();
        QCOMPARE(v.text(), QString());
        QCOMPARE(v.tokens(), 0);
    }

    void the_window_summarizes_stops_compares_and_reports_errors() {
        QTemporaryDir dir;
        QSettings store(dir.filePath(QStringLiteral("s.conf")), QSettings::IniFormat);
        MainWindow w(store, false);
        w.show();
        QVERIFY(load(w, Task::Summarize, config_of(bundled_model(), bundled_draft())));
        SummarizePage *page = w.summarize_page();
        QString error;
        QVERIFY(page->open_document(source_path(QStringLiteral("tests/demo/fixtures/document.txt")), &error));
        QVERIFY(QTest::qWaitFor([page] { return page->findChild<QLabel *>(QStringLiteral("documentTokens"))->text().contains("tokens ·"); }, 5000));

        page->set_generation(40, 0.0, 1);
        QSignalSpy done(&w, &MainWindow::runDone);
        QTest::mouseClick(button(page, QStringLiteral("Summarize")), Qt::LeftButton);
        QVERIFY(QTest::qWaitFor([&] { return done.count() > 0; }, 30000));
        const RunResult r = done.front().at(0).value<RunResult>();
        QCOMPARE(r.stats.generated, 40);
        QCOMPARE(page->output()->text().toUtf8(), r.text);
        QVERIFY(page->output()->drafted() > 0);
        QVERIFY(page->findChild<QLabel *>(QStringLiteral("runStatus"))->text().contains(QStringLiteral("tau")));

        // Stop: a generation until the context is full, stopped by the button once tokens show.
        page->set_generation(100000, 0.0, 1);
        done.clear();
        QTest::mouseClick(button(page, QStringLiteral("Summarize")), Qt::LeftButton);
        QVERIFY(QTest::qWaitFor([&] { return page->output()->tokens() > 0; }, 30000));
        QPushButton *stop = button(page, QStringLiteral("Stop"));
        QVERIFY(stop->isEnabled());
        QTest::mouseClick(stop, Qt::LeftButton);
        QVERIFY(QTest::qWaitFor([&] { return done.count() > 0; }, 30000));
        QCOMPARE(done.front().at(0).value<RunResult>().stop, SPECULA_STOP_CANCELLED);
        QVERIFY(!stop->isEnabled());

        // Compare: both ways, the same tokens.
        page->set_generation(48, 0.0, 1);
        QSignalSpy compared(&w, &MainWindow::compareDone);
        QTest::mouseClick(button(page, QStringLiteral("Compare")), Qt::LeftButton);
        QVERIFY(QTest::qWaitFor([&] { return compared.count() > 0; }, 60000));
        const CompareResult c = compared.front().at(0).value<CompareResult>();
        QVERIFY(c.identical);
        QVERIFY(page->findChild<QLabel *>(QStringLiteral("runStatus"))->text().contains(QStringLiteral("identical outputs")));

        // An error goes to the banner and the window stays usable.
        QSignalSpy failed(&w, &MainWindow::modelLoadFailed);
        ModelConfig wrong = config_of(bundled_model(), code_draft());
        w.set_model_config(Task::Summarize, wrong);
        QVERIFY(QTest::qWaitFor([&] { return failed.count() > 0; }, 30000));
        QVERIFY(w.last_error().contains(QStringLiteral("cannot use draft")));
        QVERIFY(w.findChild<QLabel *>(QStringLiteral("errorBanner"))->isVisible());
        // The model loaded before is still there, with its configuration, and still answers.
        QVERIFY(w.model_loaded(Task::Summarize));
        QCOMPARE(w.model_config(Task::Summarize).draft_path, bundled_draft());
        page->set_generation(8, 0.0, 1);
        done.clear();
        QTest::mouseClick(button(page, QStringLiteral("Summarize")), Qt::LeftButton);
        QVERIFY(QTest::qWaitFor([&] { return done.count() > 0; }, 30000));
        QCOMPARE(done.front().at(0).value<RunResult>().stats.generated, 8);
    }

    void the_window_completes_at_the_cursor_reuses_the_prefix_and_tab_accepts() {
        QTemporaryDir dir;
        QSettings store(dir.filePath(QStringLiteral("s.conf")), QSettings::IniFormat);
        MainWindow w(store, false);
        w.show();
        w.set_task(Task::Complete);
        QVERIFY(load(w, Task::Complete, config_of(code_model(), code_draft(), 1024)));
        CodePage *page = w.code_page();
        QVERIFY(copy_tree(fixture_repo(), dir.filePath(QStringLiteral("repo"))));
        QSignalSpy indexed(page, &CodePage::indexed);
        page->open_repository(dir.filePath(QStringLiteral("repo")));
        QVERIFY(QTest::qWaitFor([&] { return indexed.count() > 0; }, 30000));
        QCOMPARE(page->index().files.size(), 5);
        QString error;
        QVERIFY(page->open_file(QStringLiteral("shapes/area.py"), &error));
        page->set_generation(16, 0.0);
        CodeEditor *editor = page->editor();
        editor->set_cursor(35, 44);  // the end of "q = points[(i + 1) % len(points)]"
        editor->setFocus();

        QSignalSpy done(&w, &MainWindow::runDone);
        QTest::keyClick(editor, Qt::Key_Space, Qt::ControlModifier);
        QVERIFY(QTest::qWaitFor([&] { return done.count() > 0; }, 30000));
        RunResult first = done.front().at(0).value<RunResult>();
        QCOMPARE(first.stats.cached_tokens, 0);
        QVERIFY(first.context.join(' ').contains(QStringLiteral("shapes/geometry.py")));
        QVERIFY(!editor->suggestion().isEmpty());
        QLabel *cached = page->findChild<QLabel *>(QStringLiteral("cachedTokens"));
        QVERIFY(cached->text().startsWith(QStringLiteral("0 tokens cached")));

        // Type on the line and ask again: only the edited tail is evaluated, and the label says how much was cached.
        QTest::keyClick(editor, Qt::Key_Escape);
        QTest::keyClicks(editor, QStringLiteral("  # next"));
        done.clear();
        QTest::keyClick(editor, Qt::Key_Space, Qt::ControlModifier);
        QVERIFY(QTest::qWaitFor([&] { return done.count() > 0; }, 30000));
        const RunResult second = done.front().at(0).value<RunResult>();
        QVERIFY(second.stats.cached_tokens > int(second.prompt.size()) * 3 / 4);
        QVERIFY(second.stats.evaluated_tokens < 20);
        QVERIFY(cached->text().startsWith(QStringLiteral("%1 tokens cached").arg(second.stats.cached_tokens)));

        // Tab accepts what is shown.
        const QString suggestion = editor->suggestion();
        QVERIFY(!suggestion.isEmpty());
        const QString before = editor->toPlainText();
        QTest::keyClick(editor, Qt::Key_Tab);
        QCOMPARE(editor->toPlainText().size(), before.size() + suggestion.size());
        QVERIFY(editor->toPlainText().contains(QStringLiteral("# next") + suggestion));
    }

    void dropped_files_open_as_model_document_or_repository() {
        QTemporaryDir dir;
        QSettings store(dir.filePath(QStringLiteral("s.conf")), QSettings::IniFormat);
        MainWindow w(store, false);
        w.show();
        auto drop = [&w](const QString &path) { w.open_dropped(path); };
        QSignalSpy loaded(&w, &MainWindow::modelLoaded);
        QVERIFY(!w.model_config(Task::Summarize).draft_path.isEmpty());  // the first-launch default: stories260K and its draft
        const QString copy = dir.filePath(QStringLiteral("dropped.gguf"));
        QVERIFY(QFile::copy(bundled_model(), copy));
        drop(copy);
        QVERIFY(QTest::qWaitFor([&] { return loaded.count() > 0; }, 30000));
        QCOMPARE(w.model_config(Task::Summarize).model_path, copy);
        QCOMPARE(w.model_config(Task::Summarize).draft_path, QString());  // a new model drops the old model's draft

        drop(source_path(QStringLiteral("tests/demo/fixtures/document.txt")));
        QVERIFY(w.summarize_page()->document().startsWith(QStringLiteral("The Lighthouse Keeper's Garden")));

        QSignalSpy indexed(w.code_page(), &CodePage::indexed);
        drop(fixture_repo());
        QCOMPARE(w.current_task(), Task::Complete);
        QVERIFY(QTest::qWaitFor([&] { return indexed.count() > 0; }, 30000));
        QCOMPARE(w.code_page()->index().files.size(), 5);
    }

    void first_launch_defaults_are_the_bundled_models_and_drafts() {
        const ModelConfig s = default_model_config(Task::Summarize), c = default_model_config(Task::Complete);
        QCOMPARE(QFileInfo(s.model_path).fileName(), QStringLiteral("stories260K.gguf"));
        QCOMPARE(QFileInfo(s.draft_path).fileName(), QStringLiteral("stories260K.longspec.gguf"));
        QCOMPARE(QFileInfo(c.model_path).fileName(), QStringLiteral("code-7m-f16.gguf"));
        QCOMPARE(QFileInfo(c.draft_path).fileName(), QStringLiteral("code-7m.longspec.gguf"));
        QCOMPARE(c.n_ctx, 1024);
    }

    void settings_round_trip() {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("demo.conf"));
        ModelConfig c;
        c.model_path = QStringLiteral("/m/code.gguf");
        c.draft_path = QStringLiteral("/m/code.longspec.gguf");
        c.ngram = true;
        c.tree = QStringLiteral("2,1");
        c.backend = SPECULA_BACKEND_CPU;
        c.threads = 3;
        c.n_ctx = 2048;
        {
            QSettings store(file, QSettings::IniFormat);
            Settings s(store);
            QCOMPARE(s.model_config(Task::Complete, ModelConfig{}), ModelConfig{});  // never stored: the fallback
            s.set_model_config(Task::Complete, c);
            s.set_generation(Task::Complete, {77, 0.5, 9});
            for (int i = 0; i < 12; ++i) s.add_recent_model(QStringLiteral("/m/%1.gguf").arg(i));
            s.add_recent_model(QStringLiteral("/m/3.gguf"));
        }
        QSettings store(file, QSettings::IniFormat);
        Settings s(store);
        QCOMPARE(s.model_config(Task::Complete, ModelConfig{}), c);
        QCOMPARE(s.model_config(Task::Summarize, ModelConfig{}), ModelConfig{});
        QCOMPARE(s.generation(Task::Complete).n_predict, 77);
        QCOMPARE(s.generation(Task::Complete).temperature, 0.5);
        QCOMPARE(s.generation(Task::Complete).seed, quint64(9));
        const QStringList recent = s.recent_models();
        QCOMPARE(recent.size(), 10);
        QCOMPARE(recent.front(), QStringLiteral("/m/3.gguf"));
        QCOMPARE(recent.count(QStringLiteral("/m/3.gguf")), 1);
    }
};

QTEST_MAIN(TestWidgets)
#include "test_widgets.moc"
