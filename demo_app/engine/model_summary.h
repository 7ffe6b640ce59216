// What the model panel shows about a loaded model, read through the public API only.
#pragma once

#include <specula/specula.hpp>

#include <QList>
#include <QMetaType>
#include <QString>
#include <cstdint>

namespace demo {

struct TensorTypeShare {
    QString type;        // "F16", "Q4_K", ...
    int tensors = 0;
    uint64_t bytes = 0;
};

struct ModelSummary {
    QString path;
    QString name, arch, weight_type, tokenizer;
    uint64_t n_params = 0, file_size = 0;
    int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, n_vocab = 0, n_ctx_train = 0;
    QList<TensorTypeShare> tensor_types;  // most bytes first
    bool has_chat_template = false;
    QString chat_template;   // the built-in family it matches ("chatml", ...), "unrecognized", or "" when none
    bool has_fim = false;    // FIM_PRE, FIM_SUF and FIM_MID
    QString fim_tokens;      // "<|fim_prefix|> <|fim_suffix|> <|fim_middle|> +repo", or ""
    // The session the task runs on.
    int n_ctx = 0;
    QString backend, backend_note;
    QString drafter;         // "longspec+ngram", ... ("" = plain decoding)
    QString draft_kind;      // "LongSpec draft", "draft model" or ""
    uint64_t draft_params = 0;

    // Multi-line text for the panel and for logs.
    QString describe() const;
};

ModelSummary summarize_model(const specula::Model &model, const QString &path);

}  // namespace demo

Q_DECLARE_METATYPE(demo::ModelSummary)
