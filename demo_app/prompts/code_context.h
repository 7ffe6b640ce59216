// The context of a code completion: the current file around the cursor, and related files of the repository ranked by
// how they relate to it, inside a token budget. Then the prompt: llama-server's fill-in-the-middle prompt when the model
// has FIM tokens (tools/common/fim_prompt.h, the code /infill runs), else the prefix after the related files.
#pragma once

#include "../engine/run_types.h"
#include "../repo/repo_index.h"

#include <specula/specula.hpp>

#include <QList>
#include <QString>
#include <QStringList>
#include <functional>

namespace demo {

// The local context as llama.vim builds it (s:fim_ctx_local): `input_prefix` is the n_prefix lines above the cursor's
// line, each ending with "\n"; `prompt` the cursor line up to the cursor; `input_suffix` the rest of that line, "\n",
// the n_suffix lines below joined by "\n", and a final "\n". A line of whitespace only starts from its beginning.
struct FimFields {
    QString prefix, prompt, suffix;
    int indent = 0;  // the cursor line's indentation (llama.vim's n_indent)
};
FimFields fim_fields_at(const QString &text, int line, int column, int n_prefix_lines = 256, int n_suffix_lines = 64);

struct RankInputs {
    QString current_path;   // relative to the repository root
    QString current_text;   // the editor's text (may differ from the file on disk)
    QStringList recent;     // files opened or edited in the editor, most recent first
};

struct RankedFile {
    QString path;
    double score = 0;
    QStringList reasons;    // "imported", "same folder", "opened recently", "modified recently"
};

// Every indexed file but the current one that relates to it, best first: imported by it (+4), in its folder (+2), opened
// in the editor recently (up to +1.5, by recency), modified recently on disk (up to +1, the 16 newest). Ties: by path.
QList<RankedFile> rank_related_files(const RepoIndex &index, const RankInputs &in);

struct ContextBudget {
    int extra_tokens = 1024;  // tokens of related files at most
    int max_chunks = 16;      // llama.vim's ring_n_chunks
    int chunk_lines = 64;     // llama.vim's ring_chunk_size: the first lines of each related file
    int n_prefix_lines = 256; // llama.vim's n_prefix and n_suffix
    int n_suffix_lines = 64;
};

struct ContextChunk {
    QString path;
    QString text;
    int tokens = 0;
};

struct CodeContext {
    FimFields local;
    QList<ContextChunk> extra;  // least relevant first: the budget of the FIM prompt keeps the tail, the best chunks
    QList<RankedFile> ranked;
    int extra_tokens = 0;
};

// count_tokens: tokens of a text for the model the prompt is for.
CodeContext assemble_code_context(const RepoIndex &index, const RankInputs &in, int line, int column,
                                  const std::function<int(const QString &)> &count_tokens, const ContextBudget &budget = {});

// A suggestion as the editor shows and inserts it at the cursor. On a line of whitespace only, the prompt started from
// the line's beginning (fim_fields_at), so the model writes the indentation itself: as llama.vim does, the suggestion's
// first line loses as much leading whitespace as the line already has.
QString suggestion_at_cursor(const QString &line_text, const QString &suggestion);

// The logical batch the FIM budgets use: llama-server's default 2048, at most half the context so that prefix, suffix
// and extra context fit together (the budgets are llama-server's, tools/common/fim_prompt.h).
int fim_batch(int n_ctx);

// The request llama-server's /infill would get for this context (input_prefix, input_suffix, input_extra, prompt), as
// the parts tools/common/fim_prompt.h takes.
struct CompletionPrompt {
    std::vector<int32_t> tokens;
    QString form;  // "fim-repo", "fim-snippet" or "prefix"
};
CompletionPrompt completion_prompt(const specula::Model &model, const CodeContext &ctx, int n_ctx, int n_predict);

}  // namespace demo
