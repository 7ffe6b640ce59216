#include "model_summary.h"

#include <QLocale>
#include <QMap>
#include <algorithm>

namespace demo {

namespace {

QString bytes_text(uint64_t b) { return QLocale::c().formattedDataSize(qint64(b), 1, QLocale::DataSizeTraditionalFormat); }

QString count_text(uint64_t n) {
    if (n >= 1000000000ULL) return QString::number(double(n) / 1e9, 'f', 2) + "B";
    if (n >= 1000000ULL) return QString::number(double(n) / 1e6, 'f', 2) + "M";
    if (n >= 1000ULL) return QString::number(double(n) / 1e3, 'f', 1) + "K";
    return QString::number(n);
}

}  // namespace

ModelSummary summarize_model(const specula::Model &model, const QString &path) {
    ModelSummary s;
    s.path = path;
    s.name = QString::fromStdString(model.name());
    s.arch = QString::fromStdString(model.arch());
    s.weight_type = QString::fromStdString(model.weight_type());
    s.tokenizer = QString::fromStdString(model.tokenizer());
    s.n_params = model.n_params();
    s.file_size = model.file_size();
    s.n_layer = model.n_layer();
    s.n_embd = model.n_embd();
    s.n_head = model.n_head();
    s.n_head_kv = model.n_head_kv();
    s.n_vocab = model.n_vocab();
    s.n_ctx_train = model.n_ctx_train();

    QMap<QString, TensorTypeShare> types;
    for (int32_t i = 0, n = model.tensor_count(); i < n; ++i) {
        const specula::TensorInfo t = model.tensor(i);
        TensorTypeShare &share = types[QString::fromStdString(t.type)];
        share.type = QString::fromStdString(t.type);
        share.tensors += 1;
        share.bytes += t.n_bytes;
    }
    s.tensor_types = types.values();
    std::sort(s.tensor_types.begin(), s.tensor_types.end(),
              [](const TensorTypeShare &a, const TensorTypeShare &b) { return a.bytes > b.bytes; });

    for (int32_t i = 0, n = model.meta_count(); i < n; ++i)
        if (model.meta_key(i) == "tokenizer.chat_template") s.has_chat_template = true;
    if (s.has_chat_template) {
        const std::string family = model.chat_template_family();
        s.chat_template = family.empty() ? QStringLiteral("unrecognized") : QString::fromStdString(family);
    }

    const int32_t pre = model.token_fim(SPECULA_FIM_PRE), suf = model.token_fim(SPECULA_FIM_SUF),
                  mid = model.token_fim(SPECULA_FIM_MID);
    s.has_fim = pre != SPECULA_TOKEN_NULL && suf != SPECULA_TOKEN_NULL && mid != SPECULA_TOKEN_NULL;
    if (s.has_fim) {
        s.fim_tokens = QString::fromStdString(model.token_text(pre) + " " + model.token_text(suf) + " " + model.token_text(mid));
        if (model.token_fim(SPECULA_FIM_REP) != SPECULA_TOKEN_NULL && model.token_fim(SPECULA_FIM_SEP) != SPECULA_TOKEN_NULL)
            s.fim_tokens += " (+ repository tokens)";
    }
    return s;
}

QString ModelSummary::describe() const {
    QStringList lines;
    lines << QStringLiteral("%1 (%2)").arg(name.isEmpty() ? QStringLiteral("unnamed model") : name, arch);
    lines << QStringLiteral("%1 parameters, %2 weights, file %3").arg(count_text(n_params), weight_type, bytes_text(file_size));
    lines << QStringLiteral("%1 layers, embedding %2, %3 heads / %4 KV heads, vocabulary %5 (%6)")
                 .arg(n_layer).arg(n_embd).arg(n_head).arg(n_head_kv).arg(n_vocab).arg(tokenizer);
    QStringList types;
    for (const TensorTypeShare &t : tensor_types) types << QStringLiteral("%1 x%2 (%3)").arg(t.type).arg(t.tensors).arg(bytes_text(t.bytes));
    lines << QStringLiteral("tensor types: %1").arg(types.join(", "));
    lines << QStringLiteral("context: %1 trained, session %2").arg(n_ctx_train).arg(n_ctx);
    lines << QStringLiteral("chat template: %1").arg(has_chat_template ? chat_template : QStringLiteral("none (plain completion prompts)"));
    lines << QStringLiteral("FIM tokens: %1").arg(has_fim ? fim_tokens : QStringLiteral("none (completion from the prefix)"));
    if (!backend.isEmpty()) lines << QStringLiteral("backend: %1%2").arg(backend, backend_note.isEmpty() ? QString() : " - " + backend_note);
    if (!draft_kind.isEmpty())
        lines << QStringLiteral("draft: %1, %2 parameters").arg(draft_kind, count_text(draft_params));
    lines << QStringLiteral("speculation: %1").arg(drafter.isEmpty() ? QStringLiteral("off (plain decoding)") : drafter);
    return lines.join('\n');
}

}  // namespace demo
