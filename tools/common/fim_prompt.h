// Fill-in-the-middle prompts, built exactly as llama-server's format_infill builds them (tools/server: the repository
// pattern of Qwen2.5-Coder, arXiv 2409.12186, when the model has FIM_REP/FIM_SEP tokens, else "--- snippet ---"
// separators), with the same token budgets. Shared by `specula serve` (/infill) and the Qt demo's code completion, which
// see only the public API:
//
//   [extra tail] [BOS if the model adds one] FIM_PRE prefix-tail prompt FIM_SUF suffix-head FIM_MID
//
// where the extra context is
//   FIM_REP "myproject\n" { FIM_SEP filename "\n" text }... FIM_SEP "filename\n"     (repository form)
//   { "\n\n--- snippet ---\n\n" text }...                                            (otherwise)
// and the budgets are: the prefix keeps its last 3*(n_batch/4) tokens, the suffix its first
// max(0, n_batch/4 - (2 + |prompt|)), the extra context its last max(0, n_ctx - n_batch - 2*n_predict), where n_batch
// is the server's logical batch, n_ctx the slot's context and n_predict the server's -n (-1 by default, as there).
// Those budgets can add up to n_ctx + 4 tokens (an editor plugin whose ring of extra context is full then got no
// completion at all): beyond llama-server, the prompt is kept to n_ctx - room tokens by dropping whole chunks of the
// extra context, oldest first, and the caller is told (`trimmed`; /infill reports it as `truncated`).
#pragma once

#include <specula/specula.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace specula_apps {

struct FimChunk {
    std::string filename = "tmp";  // llama-server's default for a chunk without one
    std::string text;
};

// The parts of a FIM request, the prefix, suffix and prompt already tokenized (llama-server accepts token ids there).
struct FimParts {
    std::vector<FimChunk> extra;  // input_extra: other files, oldest first (the budget keeps the tail)
    std::vector<int32_t> prefix;  // input_prefix, tokenized without BOS and without special parsing
    std::vector<int32_t> suffix;  // input_suffix, likewise
    std::vector<int32_t> prompt;  // prompt: text continuing the prefix, tokenized with special parsing
};

struct FimBudget {
    int32_t n_batch = 2048;
    int32_t n_predict = -1;
    int32_t n_ctx = 4096;
    int32_t room = 1;  // tokens the prompt leaves for generation, when dropping extra context gets it there
};

// "" when the model can do FIM, else llama-server's reason ("prefix token is missing. suffix token is missing. ").
inline std::string fim_unsupported_reason(const specula::Model &model) {
    std::string err;
    if (model.token_fim(SPECULA_FIM_PRE) == SPECULA_TOKEN_NULL) err += "prefix token is missing. ";
    if (model.token_fim(SPECULA_FIM_SUF) == SPECULA_TOKEN_NULL) err += "suffix token is missing. ";
    if (model.token_fim(SPECULA_FIM_MID) == SPECULA_TOKEN_NULL) err += "middle token is missing. ";
    return err;
}

// The extra context as llama-server tokenizes it (before the budget cuts its head off). starts (when not null) gets
// where each chunk begins, then where the closing part (the repository form's FIM_SEP "filename\n") begins.
inline std::vector<int32_t> fim_extra_tokens(const specula::Model &model, const std::vector<FimChunk> &chunks,
                                             std::vector<size_t> *starts = nullptr) {
    const int32_t fim_rep = model.token_fim(SPECULA_FIM_REP), fim_sep = model.token_fim(SPECULA_FIM_SEP);
    auto append = [&](std::vector<int32_t> &to, const std::string &text) {
        const std::vector<int32_t> t = model.tokenize(text, 0);  // no BOS, no special parsing
        to.insert(to.end(), t.begin(), t.end());
    };
    std::vector<int32_t> extra;
    if (fim_rep != SPECULA_TOKEN_NULL) {
        extra.push_back(fim_rep);
        append(extra, "myproject\n");
    }
    for (const FimChunk &chunk : chunks) {
        if (starts != nullptr) starts->push_back(extra.size());
        if (fim_sep != SPECULA_TOKEN_NULL) {
            extra.push_back(fim_sep);
            append(extra, chunk.filename + "\n");
        } else {
            append(extra, "\n\n--- snippet ---\n\n");
        }
        append(extra, chunk.text);
    }
    if (starts != nullptr) starts->push_back(extra.size());
    if (fim_sep != SPECULA_TOKEN_NULL) {
        extra.push_back(fim_sep);
        append(extra, "filename\n");
    }
    return extra;
}

// The whole prompt. The model must have FIM_PRE, FIM_SUF and FIM_MID (fim_unsupported_reason() is "").
inline std::vector<int32_t> fim_prompt(const specula::Model &model, const FimParts &in, const FimBudget &budget, bool *trimmed = nullptr) {
    std::vector<size_t> starts;
    const std::vector<int32_t> extra = fim_extra_tokens(model, in.extra, &starts);
    std::vector<int32_t> prefix = in.prefix, suffix = in.suffix;

    // Integer arithmetic exactly as llama-server's (ints, n_batch/4 rounding down).
    const int n_batch = budget.n_batch;
    const int n_prefix_take = std::min<int>(int(prefix.size()), 3 * (n_batch / 4));
    const int n_suffix_take = std::min<int>(int(suffix.size()), std::max<int>(0, (n_batch / 4) - (2 + int(in.prompt.size()))));
    const int n_extra_take = std::min<int>(std::max<int>(0, budget.n_ctx - n_batch - 2 * budget.n_predict), int(extra.size()));

    prefix.erase(prefix.begin(), prefix.begin() + (int(prefix.size()) - n_prefix_take));
    suffix.resize(size_t(n_suffix_take));
    prefix.insert(prefix.begin(), model.token_fim(SPECULA_FIM_PRE));
    prefix.insert(prefix.end(), in.prompt.begin(), in.prompt.end());
    suffix.insert(suffix.begin(), model.token_fim(SPECULA_FIM_SUF));

    // Past n_ctx - room: the extra context starts at a later chunk (or at its closing part), whole chunks dropped.
    const bool bos = model.add_bos() && model.token_bos() != SPECULA_TOKEN_NULL;
    const int64_t limit = int64_t(budget.n_ctx) - std::max<int32_t>(1, budget.room);
    const int64_t rest = int64_t(prefix.size() + suffix.size()) + 1 + (bos ? 1 : 0);
    size_t extra_from = extra.size() - size_t(n_extra_take);
    if (n_extra_take > 0 && rest + n_extra_take > limit) {
        const int64_t keep = std::max<int64_t>(0, limit - rest);
        size_t from = extra.size();
        for (const size_t st : starts)
            if (st >= extra_from && int64_t(extra.size() - st) <= keep) {
                from = st;
                break;
            }
        extra_from = from;
        if (trimmed != nullptr) *trimmed = true;
    }

    std::vector<int32_t> out;
    out.reserve(extra.size() - extra_from + prefix.size() + suffix.size() + 2);
    out.insert(out.end(), extra.begin() + std::ptrdiff_t(extra_from), extra.end());
    if (bos) out.push_back(model.token_bos());
    out.insert(out.end(), prefix.begin(), prefix.end());
    out.insert(out.end(), suffix.begin(), suffix.end());
    out.push_back(model.token_fim(SPECULA_FIM_MID));
    return out;
}

}  // namespace specula_apps
