#include "code_context.h"

#include "../engine/tokenize_text.h"
#include "../repo/imports.h"
#include "fim_prompt.h"

#include <QHash>
#include <algorithm>

namespace demo {

FimFields fim_fields_at(const QString &text, int line, int column, int n_prefix_lines, int n_suffix_lines) {
    const QStringList lines = text.split('\n');
    line = std::clamp(line, 0, int(lines.size()) - 1);
    const QString cur = lines[line];
    column = std::clamp(column, 0, int(cur.size()));

    FimFields f;
    QString cur_prefix = cur.left(column), cur_suffix = cur.mid(column);
    if (cur.trimmed().isEmpty()) {  // a line of whitespace only: start from its beginning
        cur_prefix.clear();
        cur_suffix.clear();
        f.indent = 0;
    } else {
        while (f.indent < cur.size() && cur[f.indent].isSpace()) ++f.indent;
    }
    const int first = std::max(0, line - n_prefix_lines);
    f.prefix = lines.mid(first, line - first).join('\n') + '\n';
    f.prompt = cur_prefix;
    const int last = std::min(int(lines.size()) - 1, line + n_suffix_lines);
    f.suffix = cur_suffix + '\n' + lines.mid(line + 1, std::max(0, last - line)).join('\n') + '\n';
    return f;
}

QList<RankedFile> rank_related_files(const RepoIndex &index, const RankInputs &in) {
    const QSet<QString> paths = index.paths();
    const QStringList imported = imported_files(in.current_path, in.current_text, paths);
    const qsizetype slash = in.current_path.lastIndexOf('/');
    const QString folder = slash < 0 ? QString() : in.current_path.left(slash);
    const QString language = language_of(in.current_path);

    // The 16 most recently modified files on disk.
    QList<const IndexedFile *> by_mtime;
    for (const IndexedFile &f : index.files) by_mtime.push_back(&f);
    std::stable_sort(by_mtime.begin(), by_mtime.end(), [](const IndexedFile *a, const IndexedFile *b) { return a->modified > b->modified; });
    QHash<QString, int> mtime_rank;
    for (int i = 0; i < std::min<int>(16, int(by_mtime.size())); ++i) mtime_rank.insert(by_mtime[i]->path, i);

    QList<RankedFile> out;
    for (const IndexedFile &f : index.files) {
        if (f.path == in.current_path) continue;
        RankedFile r;
        r.path = f.path;
        if (imported.contains(f.path)) {
            r.score += 4;
            r.reasons << QStringLiteral("imported");
        }
        const qsizetype s = f.path.lastIndexOf('/');
        if ((s < 0 ? QString() : f.path.left(s)) == folder && f.language == language) {
            r.score += 2;
            r.reasons << QStringLiteral("same folder");
        }
        const qsizetype opened = in.recent.indexOf(f.path);
        if (opened >= 0 && opened < 10) {
            r.score += 1.5 * (1.0 - double(opened) / 10.0);
            r.reasons << QStringLiteral("opened recently");
        }
        if (mtime_rank.contains(f.path) && f.language == language) {
            r.score += 1.0 - double(mtime_rank.value(f.path)) / 16.0;
            r.reasons << QStringLiteral("modified recently");
        }
        if (r.score > 0) out.push_back(r);
    }
    std::stable_sort(out.begin(), out.end(), [](const RankedFile &a, const RankedFile &b) {
        return a.score != b.score ? a.score > b.score : a.path < b.path;
    });
    return out;
}

CodeContext assemble_code_context(const RepoIndex &index, const RankInputs &in, int line, int column,
                                  const std::function<int(const QString &)> &count_tokens, const ContextBudget &budget) {
    CodeContext ctx;
    ctx.local = fim_fields_at(in.current_text, line, column, budget.n_prefix_lines, budget.n_suffix_lines);
    ctx.ranked = rank_related_files(index, in);
    QList<ContextChunk> best_first;
    for (const RankedFile &r : ctx.ranked) {
        if (int(best_first.size()) >= budget.max_chunks) break;
        const QString text = read_text_file(index.root, r.path, 256 * 1024);
        if (text.trimmed().isEmpty()) continue;
        QStringList lines = text.split('\n');
        if (lines.size() > budget.chunk_lines) lines = lines.mid(0, budget.chunk_lines);
        ContextChunk chunk;
        chunk.path = r.path;
        chunk.text = lines.join('\n') + '\n';
        chunk.tokens = count_tokens(chunk.text);
        if (ctx.extra_tokens + chunk.tokens > budget.extra_tokens) continue;  // a smaller one further down may fit
        ctx.extra_tokens += chunk.tokens;
        best_first.push_back(chunk);
    }
    std::reverse(best_first.begin(), best_first.end());
    ctx.extra = best_first;
    return ctx;
}

QString suggestion_at_cursor(const QString &line_text, const QString &suggestion) {
    if (!line_text.trimmed().isEmpty()) return suggestion;
    int lead = 0;
    while (lead < suggestion.size() && lead < line_text.size() && (suggestion[lead] == ' ' || suggestion[lead] == '\t')) ++lead;
    return suggestion.mid(lead);
}

int fim_batch(int n_ctx) { return std::max(4, std::min(2048, n_ctx / 2)); }


CompletionPrompt completion_prompt(const specula::Model &model, const CodeContext &ctx, int n_ctx, int n_predict) {
    CompletionPrompt out;
    specula_apps::FimBudget budget;
    budget.n_batch = fim_batch(n_ctx);
    budget.n_predict = n_predict;
    budget.n_ctx = n_ctx;

    if (specula_apps::fim_unsupported_reason(model).empty()) {
        specula_apps::FimParts parts;
        for (const ContextChunk &c : ctx.extra) parts.extra.push_back({c.path.toStdString(), c.text.toStdString()});
        parts.prefix = tokenize_text(model, ctx.local.prefix);
        parts.suffix = tokenize_text(model, ctx.local.suffix);
        parts.prompt = tokenize_text(model, ctx.local.prompt, SPECULA_TOKENIZE_PARSE_SPECIAL);
        out.tokens = specula_apps::fim_prompt(model, parts, budget);
        out.form = model.token_fim(SPECULA_FIM_REP) != SPECULA_TOKEN_NULL ? QStringLiteral("fim-repo") : QStringLiteral("fim-snippet");
        return out;
    }

    // No FIM tokens: the text before the cursor, after the related files. Models trained on files packed behind BOS (as
    // most code models are) read each related file as a preceding file; the same budgets as the FIM prompt.
    const bool bos = model.add_bos() && model.token_bos() != SPECULA_TOKEN_NULL;
    std::vector<int32_t> extra;
    for (const ContextChunk &c : ctx.extra) {
        if (bos) extra.push_back(model.token_bos());
        const std::vector<int32_t> t = tokenize_text(model, c.text + (bos ? QString() : QStringLiteral("\n")));
        extra.insert(extra.end(), t.begin(), t.end());
    }
    std::vector<int32_t> prefix = tokenize_text(model, ctx.local.prefix + ctx.local.prompt);
    const int n_prefix_take = std::min<int>(int(prefix.size()), 3 * (budget.n_batch / 4));
    const int n_extra_take = std::min<int>(std::max<int>(0, n_ctx - budget.n_batch - 2 * n_predict), int(extra.size()));
    out.tokens.assign(extra.end() - n_extra_take, extra.end());
    if (bos) out.tokens.push_back(model.token_bos());
    out.tokens.insert(out.tokens.end(), prefix.end() - n_prefix_take, prefix.end());
    out.form = QStringLiteral("prefix");
    return out;
}

}  // namespace demo
