// The summarization prompt: the model's own chat template when it has one (specula_chat_apply_template), otherwise a
// plain completion prompt. A document longer than the context is never cut silently: the caller picks a policy, and
// under kRefuse the builder throws PromptRefused with the sizes so the window can ask.
#pragma once

#include "../engine/run_types.h"

#include <specula/specula.hpp>

#include <QString>

namespace demo {

enum class Overflow {
    Refuse,    // a document that does not fit is an error (PromptRefused::TooLong) that names both sizes
    HeadTail,  // keep the document's beginning and end, leave out the middle with a visible marker
};

struct DocumentPromptOptions {
    QString instruction = QStringLiteral("Summarize the following document.");
    int n_predict = 256;       // room kept free for the summary, at most half the context; < 0 keeps a quarter of it
    Overflow overflow = Overflow::Refuse;
};

bool model_has_chat_template(const specula::Model &model);

// The prompt text for a whole document (no fitting): with the chat template, one user message of the instruction, a blank
// line and the document, then the assistant's opening; without one, "instruction\n\ndocument\n\nSummary:".
QString document_prompt_text(const specula::Model &model, const QString &instruction, const QString &document);

// Tokens of that text: BOS as the model asks and, with a chat template, its markers parsed as special tokens.
std::vector<int32_t> tokenize_prompt(const specula::Model &model, const QString &text);

// Tokens the prompt may take in a context of n_ctx when n_predict tokens should follow (at most half the context is
// kept for them, a quarter when n_predict < 0: a longer output stops with a full context).
int prompt_room(int n_ctx, int n_predict);

// The prompt, fitted to n_ctx as options.overflow says. Throws PromptRefused.
BuiltPrompt build_document_prompt(const specula::Model &model, int n_ctx, const QString &document,
                                  const DocumentPromptOptions &options);

// What HeadTail keeps: the first `head` and the last `tail` characters of the document around a marker that says how
// many characters were left out. Cut points move back to a whitespace (at most 64 characters) and never split a
// surrogate pair. Exposed for tests.
QString head_tail_text(const QString &document, int keep_chars);

}  // namespace demo
