// The demo's fill-in-the-middle prompt against the real server: for a cursor in the fixture repository, the demo builds
// its context (llama.vim's local split, related files within the budget) and its prompt tokens; the same fields posted
// to `specula serve`'s /infill (llama-server's endpoint, whose prompt format the serve tests check against
// llama-server's own code) must give the same prompt, byte for byte and token for token. Both FIM forms: the snippet
// form (DeepSeek-Coder's tokens) and the repository form (Qwen2.5-Coder's FIM_REP/FIM_SEP). The models are random
// weights of a small real shape with the fixtures' real tokenizers.
#include "demo_test_support.h"
#include "prompts/code_context.h"

#include <QEventLoop>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

using namespace demo;
using namespace demo_test;

namespace {

// `specula serve` on a free port; stopped with SIGTERM when the object goes.
class Server {
public:
    explicit Server(const QStringList &args) {
        proc_.setProgram(QStringLiteral(SPECULA_CLI));
        proc_.setArguments(QStringList{"serve", "--port", "0", "-t", "1"} + args);
        proc_.start();
        if (!proc_.waitForStarted(10000)) return;
        static const QRegularExpression re(QStringLiteral("listening on http://[^:]+:(\\d+)"));
        QByteArray err;
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 30000 && port_ == 0) {
            proc_.waitForReadyRead(200);
            err += proc_.readAllStandardError();
            const QRegularExpressionMatch m = re.match(QString::fromUtf8(err));
            if (m.hasMatch()) port_ = m.captured(1).toInt();
            if (proc_.state() != QProcess::Running) break;
        }
        log_ = err;
    }
    ~Server() {
        if (proc_.state() == QProcess::Running) {
            proc_.terminate();
            proc_.waitForFinished(10000);
        }
    }
    int port() const { return port_; }
    QByteArray log() const { return log_; }

    QJsonObject post(const QString &path, const QJsonObject &body, int *status) {
        QNetworkAccessManager net;
        QNetworkRequest req(QUrl(QStringLiteral("http://127.0.0.1:%1%2").arg(port_).arg(path)));
        req.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
        QNetworkReply *reply = net.post(req, QJsonDocument(body).toJson(QJsonDocument::Compact));
        QEventLoop loop;
        QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
        loop.exec();
        *status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        const QJsonObject out = QJsonDocument::fromJson(reply->readAll()).object();
        reply->deleteLater();
        return out;
    }

private:
    QProcess proc_;
    int port_ = 0;
    QByteArray log_;
};

QString make_fim_model(const QTemporaryDir &dir, const QString &vocab) {
    const QString vocab_path = shared_fixture(QStringLiteral("tokenizer/ggml-vocab-%1.gguf").arg(vocab));
    if (vocab_path.isEmpty()) return QString();
    const QString out = dir.filePath(QStringLiteral("fim-%1.gguf").arg(vocab));
    specula::SyntheticOptions o;
    o.weight_type = "q8_0";
    o.n_layer = 1;
    specula::write_synthetic_model("tiny-llama", vocab_path.toStdString(), out.toStdString(), o);
    return out;
}

}  // namespace

class TestFimServer : public QObject {
    Q_OBJECT
private slots:
    void the_demos_fim_prompt_is_what_infill_builds_data() {
        QTest::addColumn<QString>("vocab");
        QTest::addColumn<QString>("form");
        QTest::addColumn<int>("n_ctx");
        QTest::newRow("deepseek-coder: snippet form") << QStringLiteral("deepseek-coder") << QStringLiteral("fim-snippet") << 4096;
        QTest::newRow("qwen2: repository form") << QStringLiteral("qwen2") << QStringLiteral("fim-repo") << 4096;
        QTest::newRow("qwen2: tight budgets") << QStringLiteral("qwen2") << QStringLiteral("fim-repo") << 256;
    }

    void the_demos_fim_prompt_is_what_infill_builds() {
        QFETCH(QString, vocab);
        QFETCH(QString, form);
        QFETCH(int, n_ctx);
        QTemporaryDir dir;
        const QString model_path = make_fim_model(dir, vocab);
        if (model_path.isEmpty()) QSKIP("../shared/fixtures/tokenizer is missing");
        const specula::Model model = load_model(model_path);

        // The demo's context at a cursor of the fixture repository (shapes/area.py, in polygon_area).
        const RepoIndex index = index_repository(fixture_repo(), IndexRules{});
        RankInputs in;
        in.current_path = QStringLiteral("shapes/area.py");
        in.current_text = read_text_file(index.root, in.current_path);
        in.recent = {QStringLiteral("tools/report.py")};
        auto count = [&model](const QString &t) { return int(tokenize_text(model, t, 0).size()); };
        ContextBudget budget;
        budget.extra_tokens = std::min(budget.extra_tokens, n_ctx / 4);
        const CodeContext ctx = assemble_code_context(index, in, 35, 8, count, budget);  // line 36, column 9
        QVERIFY(!ctx.extra.isEmpty());
        const int n_predict = 16;
        const CompletionPrompt demo_prompt = completion_prompt(model, ctx, n_ctx, n_predict);
        QCOMPARE(demo_prompt.form, form);

        // The same request to the server, as a plugin sends it.
        Server server({"-m", model_path, "-c", QString::number(n_ctx), "-b", QString::number(fim_batch(n_ctx)), "-n",
                       QString::number(n_predict)});
        QVERIFY2(server.port() > 0, server.log().constData());
        QJsonArray extra;
        for (const ContextChunk &c : ctx.extra) extra.append(QJsonObject{{"filename", c.path}, {"text", c.text}});
        const QJsonObject body{{"input_prefix", ctx.local.prefix}, {"input_suffix", ctx.local.suffix}, {"input_extra", extra},
                               {"prompt", ctx.local.prompt}, {"n_predict", 1}, {"temperature", 0}, {"cache_prompt", false}};
        int status = 0;
        const QJsonObject reply = server.post(QStringLiteral("/infill"), body, &status);
        QCOMPARE(status, 200);
        QCOMPARE(reply.value(QStringLiteral("tokens_evaluated")).toInt(), int(demo_prompt.tokens.size()));
        const std::string expected = model.detokenize(demo_prompt.tokens, true);
        QCOMPARE(reply.value(QStringLiteral("prompt")).toString().toUtf8(), QByteArray::fromStdString(expected));
        if (n_ctx == 256) QVERIFY(int(demo_prompt.tokens.size()) < n_ctx);  // the budgets cut it to fit
    }
};

QTEST_GUILESS_MAIN(TestFimServer)
#include "test_fim_server.moc"
