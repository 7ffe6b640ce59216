// The logic behind the demo's pages, without a window: the summarization prompt (chat template or plain, fitted to the
// context or refused), llama.vim's local FIM context, the ranking of related files, context budgets, the prompt of a
// model without FIM tokens, the suggestion shown at the cursor, and prefix-reuse bookkeeping.
#include "demo_test_support.h"
#include "engine/prefix_reuse.h"
#include "prompts/code_context.h"
#include "prompts/document_prompt.h"
#include "repo/imports.h"
#include "template_model.h"

#include <QTemporaryDir>
#include <QtTest>

using namespace demo;
using namespace demo_test;

namespace {

const char *kChatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

QString story(int sentences) {
    QStringList s;
    for (int i = 0; i < sentences; ++i)
        s << QStringLiteral("Sentence %1: Lily went to the park with her dog Max, and they played with a red ball.").arg(i);
    return s.join(' ');
}

void write(const QString &path, const QString &text) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text.toUtf8());
}

}  // namespace

class TestPrompts : public QObject {
    Q_OBJECT
private slots:
    void document_prompt_without_a_chat_template_is_a_plain_completion_prompt() {
        const specula::Model m = load_model(bundled_model());
        QVERIFY(!model_has_chat_template(m));
        DocumentPromptOptions o;
        o.n_predict = 64;
        const QString doc = QStringLiteral("Lily had a red ball.");
        const BuiltPrompt p = build_document_prompt(m, 512, doc, o);
        const QString expected = o.instruction + QStringLiteral("\n\n") + doc + QStringLiteral("\n\nSummary:");
        QCOMPARE(document_prompt_text(m, o.instruction, doc), expected);
        QCOMPARE(p.tokens, tokenize_text(m, expected, SPECULA_TOKENIZE_ADD_SPECIAL));
        QCOMPARE(p.tokens.front(), m.token_bos());
        QVERIFY(p.note.isEmpty());
    }

    void document_prompt_uses_the_models_chat_template() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("chatml.gguf"));
        demo_test::write_with_chat_template(bundled_model().toStdString(), path.toStdString(), kChatml);
        const specula::Model m = load_model(path);
        QVERIFY(model_has_chat_template(m));
        const QString doc = QStringLiteral("Lily had a red ball.");
        const QString text = document_prompt_text(m, QStringLiteral("Summarize it."), doc);
        QCOMPARE(text, QStringLiteral("<|im_start|>user\nSummarize it.\n\nLily had a red ball.<|im_end|>\n<|im_start|>assistant\n"));
        QCOMPARE(text.toStdString(), m.apply_chat_template({{"user", "Summarize it.\n\nLily had a red ball."}}, true));
        DocumentPromptOptions o;
        o.instruction = QStringLiteral("Summarize it.");
        QCOMPARE(build_document_prompt(m, 512, doc, o).tokens,
                 tokenize_text(m, text, SPECULA_TOKENIZE_ADD_SPECIAL | SPECULA_TOKENIZE_PARSE_SPECIAL));
    }

    void a_document_longer_than_the_context_is_refused_with_both_sizes() {
        const specula::Model m = load_model(bundled_model());
        DocumentPromptOptions o;
        o.n_predict = 100;
        const QString doc = story(80);
        try {
            build_document_prompt(m, 512, doc, o);
            QFAIL("a document of thousands of tokens fitted a context of 512");
        } catch (const PromptRefused &e) {
            QCOMPARE(e.kind, PromptRefused::Kind::TooLong);
            QCOMPARE(e.n_room, 412);
            QCOMPARE(e.n_tokens, int(tokenize_text(m, document_prompt_text(m, o.instruction, doc), SPECULA_TOKENIZE_ADD_SPECIAL).size()));
            QVERIFY(QString::fromUtf8(e.what()).contains(QString::number(e.n_tokens)));
            QVERIFY(QString::fromUtf8(e.what()).contains(QStringLiteral("412")));
        }
    }

    void the_room_left_for_the_output_is_bounded() {
        QCOMPARE(prompt_room(512, 100), 412);
        QCOMPARE(prompt_room(512, 100000), 256);  // at most half the context is kept for the output
        QCOMPARE(prompt_room(512, -1), 384);      // unlimited output: a quarter
        QCOMPARE(prompt_room(0, 10), 0);
    }

    void head_and_tail_keep_the_most_that_fits_and_say_so() {
        const specula::Model m = load_model(bundled_model());
        DocumentPromptOptions o;
        o.n_predict = 100;
        o.overflow = Overflow::HeadTail;
        const QString doc = story(80);
        const BuiltPrompt p = build_document_prompt(m, 512, doc, o);
        QVERIFY(int(p.tokens.size()) <= 412);
        QVERIFY(int(p.tokens.size()) > 350);  // nearly all the room is used
        QVERIFY(!p.note.isEmpty());
        const QString text = QString::fromStdString(m.detokenize(p.tokens));
        QVERIFY(text.contains(QStringLiteral("Sentence 0: Lily")));
        QVERIFY(text.contains(QStringLiteral("Sentence 79: Lily")));
        QVERIFY(text.contains(QStringLiteral("characters of the document left out")));
        QVERIFY(!text.contains(QStringLiteral("Sentence 40: ")));
        // A few hundred characters more would not have fitted.
        const int kept = p.note.section(QStringLiteral("were kept ("), 1).section(' ', 0, 0).toInt();
        QVERIFY(kept > 0);
        const QString bigger = document_prompt_text(m, o.instruction, head_tail_text(doc, kept + 300));
        QVERIFY(int(tokenize_text(m, bigger, SPECULA_TOKENIZE_ADD_SPECIAL).size()) > 412);
    }

    void head_tail_text_cuts_at_whitespace_and_never_inside_a_character() {
        QCOMPARE(head_tail_text(QStringLiteral("short"), 10), QStringLiteral("short"));
        const QString doc = QStringLiteral("alpha beta gamma delta epsilon zeta eta theta iota kappa");
        const QString cut = head_tail_text(doc, 20);
        QVERIFY(cut.startsWith(QStringLiteral("alpha ")));
        QVERIFY(cut.endsWith(QStringLiteral("kappa")));
        QVERIFY(cut.contains(QStringLiteral("left out")));
        // Emoji are surrogate pairs in UTF-16: no cut may separate the halves.
        QString emoji;
        for (int i = 0; i < 50; ++i) emoji += QString::fromUtf8("\xF0\x9F\x98\x80");
        for (int keep = 1; keep < 60; ++keep) {
            const QString t = head_tail_text(emoji, keep);
            QVERIFY2(t.toUtf8().isValidUtf8(), qPrintable(QString::number(keep)));
            QVERIFY(!t.toUtf8().contains("\xEF\xBF\xBD"));
        }
    }

    void the_local_context_is_split_as_llama_vim_splits_it() {
        const QString text = QStringLiteral("a = 1\nb = 2\n    c = 3\n\nd = 4");
        // Middle of a line: previous lines + "\n"; the line up to the cursor; the rest, "\n", the next lines, "\n".
        FimFields f = fim_fields_at(text, 2, 6);
        QCOMPARE(f.prefix, QStringLiteral("a = 1\nb = 2\n"));
        QCOMPARE(f.prompt, QStringLiteral("    c "));
        QCOMPARE(f.suffix, QStringLiteral("= 3\n\nd = 4\n"));
        QCOMPARE(f.indent, 4);
        // First line: no line before it still gives "\n" (join of nothing, then "\n").
        f = fim_fields_at(text, 0, 2);
        QCOMPARE(f.prefix, QStringLiteral("\n"));
        QCOMPARE(f.prompt, QStringLiteral("a "));
        QCOMPARE(f.suffix, QStringLiteral("= 1\nb = 2\n    c = 3\n\nd = 4\n"));
        // Last line: nothing after it.
        f = fim_fields_at(text, 4, 5);
        QCOMPARE(f.suffix, QStringLiteral("\n\n"));
        // A line of whitespace only starts from its beginning.
        f = fim_fields_at(QStringLiteral("x\n    \ny"), 1, 4);
        QCOMPARE(f.prompt, QString());
        QCOMPARE(f.suffix, QStringLiteral("\ny\n"));
        QCOMPARE(f.indent, 0);
        // n_prefix / n_suffix lines at most.
        f = fim_fields_at(QStringLiteral("1\n2\n3\n4\n5\n6\n7"), 3, 1, 2, 1);
        QCOMPARE(f.prefix, QStringLiteral("2\n3\n"));
        QCOMPARE(f.suffix, QStringLiteral("\n5\n"));
    }

    void imports_resolve_to_repository_files() {
        QSet<QString> files = {"pkg/__init__.py", "pkg/util.py", "pkg/sub/deep.py", "app.py", "src/lib.rs", "src/net/mod.rs",
                               "src/net/http.rs", "web/main.ts", "web/api/client.ts", "include/core/vec.h", "src/vec.c"};
        QCOMPARE(imported_files(QStringLiteral("app.py"), QStringLiteral("import os\nimport pkg.util as u\nfrom pkg.sub import deep\n"), files),
                 QStringList({"pkg/util.py", "pkg/sub/deep.py"}));
        QCOMPARE(imported_files(QStringLiteral("pkg/sub/deep.py"), QStringLiteral("from .. import util\nfrom ..util import x\n"), files),
                 QStringList({"pkg/util.py"}));
        QCOMPARE(imported_files(QStringLiteral("src/lib.rs"), QStringLiteral("pub mod net;\nuse crate::net::http::Client;\n"), files),
                 QStringList({"src/net/mod.rs", "src/net/http.rs"}));
        QCOMPARE(imported_files(QStringLiteral("web/main.ts"), QStringLiteral("import { get } from './api/client';\n"), files),
                 QStringList({"web/api/client.ts"}));
        QCOMPARE(imported_files(QStringLiteral("src/vec.c"), QStringLiteral("#include <stdio.h>\n#include \"core/vec.h\"\n"), files),
                 QStringList({"include/core/vec.h"}));
        QCOMPARE(language_of(QStringLiteral("a/b.py")), QStringLiteral("python"));
        QCOMPARE(language_of(QStringLiteral("CMakeLists.txt")), QStringLiteral("cmake"));
    }

    void related_files_are_ranked_and_fitted_into_the_budget() {
        QTemporaryDir dir;
        const QString root = dir.path();
        write(root + "/pkg/main.py", "from .models import User\nimport pkg.db\n\nuser = User()\n");
        write(root + "/pkg/models.py", "class User:\n    pass\n");
        write(root + "/pkg/db.py", "def connect():\n    return None\n");
        write(root + "/pkg/helpers.py", "def helper():\n    return 1\n");
        write(root + "/other/far.py", QString("x = 1\n").repeated(200));
        write(root + "/notes.md", "# notes\n");
        const RepoIndex index = index_repository(root, IndexRules{});
        QCOMPARE(index.files.size(), 6);

        RankInputs in;
        in.current_path = QStringLiteral("pkg/main.py");
        in.current_text = read_text_file(root, in.current_path);
        in.recent = {QStringLiteral("other/far.py")};
        const QList<RankedFile> ranked = rank_related_files(index, in);
        QStringList order;
        for (const RankedFile &r : ranked) order << r.path;
        // Imported and in the same folder first, then the same folder, then opened recently; the Markdown file is only
        // a recently modified file of another language: not related.
        QCOMPARE(order.mid(0, 3), QStringList({"pkg/db.py", "pkg/models.py", "pkg/helpers.py"}));
        QVERIFY(order.contains(QStringLiteral("other/far.py")));
        QVERIFY(!order.contains(QStringLiteral("notes.md")));
        QVERIFY(ranked.front().reasons.contains(QStringLiteral("imported")));

        // Budget: each chunk counted with the model's tokenizer; the chunks that fit, least relevant first.
        const specula::Model m = load_model(bundled_model());
        auto count = [&m](const QString &t) { return int(tokenize_text(m, t, 0).size()); };
        ContextBudget budget;
        budget.extra_tokens = 60;
        const CodeContext ctx = assemble_code_context(index, in, 3, 4, count, budget);
        QVERIFY(ctx.extra_tokens <= 60);
        QVERIFY(!ctx.extra.isEmpty());
        QCOMPARE(ctx.extra.back().path, QStringLiteral("pkg/db.py"));  // the best chunk last, nearest the cursor
        for (const ContextChunk &c : ctx.extra) {
            QCOMPARE(c.tokens, count(c.text));
            QVERIFY(c.path != QStringLiteral("other/far.py"));  // 200 lines: too many tokens for the budget
        }
        budget.extra_tokens = 100000;
        budget.chunk_lines = 5;
        const CodeContext wide = assemble_code_context(index, in, 3, 4, count, budget);
        for (const ContextChunk &c : wide.extra) QVERIFY(c.text.count('\n') <= 5);
        QCOMPARE(wide.extra.front().path, QStringLiteral("other/far.py"));  // the least relevant first
    }

    void a_model_without_fim_tokens_gets_the_related_files_then_the_prefix() {
        const specula::Model m = load_model(bundled_model());
        QVERIFY(m.token_fim(SPECULA_FIM_PRE) == SPECULA_TOKEN_NULL);
        CodeContext ctx;
        ctx.local = fim_fields_at(QStringLiteral("one\ntwo three\nfour"), 1, 4);
        ctx.extra = {{QStringLiteral("a.py"), QStringLiteral("alpha\n"), 0}, {QStringLiteral("b.py"), QStringLiteral("beta\n"), 0}};
        const CompletionPrompt p = completion_prompt(m, ctx, 512, 32);
        QCOMPARE(p.form, QStringLiteral("prefix"));
        std::vector<int32_t> expected;
        for (const QString &t : {QStringLiteral("alpha\n"), QStringLiteral("beta\n")}) {
            expected.push_back(m.token_bos());
            const auto tt = tokenize_text(m, t, 0);
            expected.insert(expected.end(), tt.begin(), tt.end());
        }
        expected.push_back(m.token_bos());
        const auto prefix = tokenize_text(m, QStringLiteral("one\ntwo "), 0);
        expected.insert(expected.end(), prefix.begin(), prefix.end());
        QCOMPARE(p.tokens, expected);
        // Budgets as llama-server's: n_batch = n_ctx/2 = 64 here, the prefix keeps its last 48 tokens and the extra context
        // its last 128 - 64 - 2*16 = 32.
        ctx.local = fim_fields_at(story(10), 0, 500);
        ctx.extra = {{QStringLiteral("long.py"), story(10), 0}};
        const CompletionPrompt tight = completion_prompt(m, ctx, 128, 16);
        QCOMPARE(int(tight.tokens.size()), 32 + 1 + 48);
        QCOMPARE(tight.tokens[32], m.token_bos());
    }

    void the_suggestion_on_a_blank_line_loses_the_indentation_already_there() {
        QCOMPARE(suggestion_at_cursor(QStringLiteral("    x = "), QStringLiteral("1\ny = 2")), QStringLiteral("1\ny = 2"));
        QCOMPARE(suggestion_at_cursor(QStringLiteral("        "), QStringLiteral("        total += 1\n")), QStringLiteral("total += 1\n"));
        QCOMPARE(suggestion_at_cursor(QStringLiteral("    "), QStringLiteral("        total += 1")), QStringLiteral("    total += 1"));
        QCOMPARE(suggestion_at_cursor(QString(), QStringLiteral("  x")), QStringLiteral("  x"));
    }

    void prefix_reuse_keeps_the_common_prefix() {
        QCOMPARE(common_prefix({1, 2, 3}, {1, 2, 4}), 2);
        PrefixPlan p = plan_prefix_reuse({1, 2, 3, 9, 9}, {1, 2, 3, 4}, true);  // generated tokens after the old prompt
        QCOMPARE(p.keep, 3);
        QCOMPARE(p.evaluate, 1);
        p = plan_prefix_reuse({1, 2, 3}, {1, 2, 3}, true);  // the same prompt again: nothing new to evaluate
        QCOMPARE(p.keep, 3);
        QCOMPARE(p.evaluate, 0);
        p = plan_prefix_reuse({1, 2, 3}, {1, 2, 3, 4}, false);
        QCOMPARE(p.keep, 0);
        QCOMPARE(p.evaluate, 4);
        QCOMPARE(plan_prefix_reuse({}, {5}, true).keep, 0);
    }
};

QTEST_GUILESS_MAIN(TestPrompts)
#include "test_prompts.moc"
