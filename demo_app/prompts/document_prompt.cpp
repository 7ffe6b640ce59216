#include "document_prompt.h"

#include "../engine/tokenize_text.h"

#include <QLocale>

namespace demo {

bool model_has_chat_template(const specula::Model &model) {
    for (int32_t i = 0, n = model.meta_count(); i < n; ++i)
        if (model.meta_key(i) == "tokenizer.chat_template") return true;
    return false;
}

QString document_prompt_text(const specula::Model &model, const QString &instruction, const QString &document) {
    const QString content = instruction + QStringLiteral("\n\n") + document;
    if (model_has_chat_template(model)) {
        try {
            const std::string text = model.apply_chat_template({{"user", content.toStdString()}}, true);
            return QString::fromStdString(text);
        } catch (const specula::Error &e) {
            if (e.status() != SPECULA_ERR_UNSUPPORTED) throw;
            // A template of no known family: the plain prompt below (the model panel says "unrecognized").
        }
    }
    return content + QStringLiteral("\n\nSummary:");
}

std::vector<int32_t> tokenize_prompt(const specula::Model &model, const QString &text) {
    int32_t flags = SPECULA_TOKENIZE_ADD_SPECIAL;
    if (model_has_chat_template(model)) flags |= SPECULA_TOKENIZE_PARSE_SPECIAL;
    return tokenize_text(model, text, flags);
}

int prompt_room(int n_ctx, int n_predict) {
    // A long summary asked for (or none set) does not shut the document out: it stops when the context is full.
    const int reserve = n_predict < 0 ? n_ctx / 4 : std::min(n_predict, n_ctx / 2);
    return std::max(0, n_ctx - reserve);
}

namespace {

// Moves a cut point back to just after a whitespace (within 64 characters) and off the second half of a surrogate pair.
qsizetype snap_back(const QString &s, qsizetype pos, qsizetype floor) {
    for (qsizetype i = pos; i > std::max(floor, pos - 64); --i)
        if (s.at(i - 1).isSpace()) return i;
    if (pos > 0 && pos < s.size() && s.at(pos).isLowSurrogate()) --pos;
    return pos;
}

qsizetype snap_forward(const QString &s, qsizetype pos, qsizetype ceiling) {
    for (qsizetype i = pos; i < std::min(ceiling, pos + 64); ++i)
        if (s.at(i).isSpace()) return i + 1;
    if (pos > 0 && pos < s.size() && s.at(pos).isLowSurrogate()) ++pos;
    return pos;
}

}  // namespace

QString head_tail_text(const QString &document, int keep_chars) {
    const qsizetype n = document.size();
    if (keep_chars >= n) return document;
    const qsizetype head_end = snap_back(document, std::max(0, keep_chars / 2), 0);
    const qsizetype tail_start = snap_forward(document, n - (keep_chars - keep_chars / 2), n);
    const qsizetype left_out = tail_start - head_end;
    return document.left(head_end) +
           QStringLiteral("\n\n[... %1 characters of the document left out ...]\n\n").arg(QLocale::c().toString(qlonglong(left_out))) +
           document.mid(tail_start);
}

BuiltPrompt build_document_prompt(const specula::Model &model, int n_ctx, const QString &document,
                                  const DocumentPromptOptions &options) {
    const int room = prompt_room(n_ctx, options.n_predict);
    auto tokens_for = [&](const QString &doc) { return tokenize_prompt(model, document_prompt_text(model, options.instruction, doc)); };

    BuiltPrompt out;
    out.tokens = tokens_for(document);
    const int full = int(out.tokens.size());
    if (full <= room) return out;

    if (options.overflow == Overflow::Refuse)
        throw PromptRefused(PromptRefused::Kind::TooLong,
                            QStringLiteral("the document needs %1 prompt tokens but the context (%2 tokens, %3 kept for the "
                                           "summary) has room for %4: keep its head and tail, or use a larger context")
                                .arg(full).arg(n_ctx).arg(n_ctx - room).arg(room).toStdString(),
                            full, room);

    // The most characters whose head-and-tail prompt fits: the token count grows with the characters kept, so a binary
    // search over them (a few dozen tokenizations of the document, milliseconds each).
    if (int(tokens_for(head_tail_text(document, 0)).size()) > room)
        throw PromptRefused(PromptRefused::Kind::TooLong,
                            QStringLiteral("the context has room for %1 prompt tokens, too few even for the instruction: "
                                           "use a larger context").arg(room).toStdString(),
                            full, room);
    int lo = 0, hi = int(document.size());
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (int(tokens_for(head_tail_text(document, mid)).size()) <= room)
            lo = mid;
        else
            hi = mid - 1;
    }
    out.tokens = tokens_for(head_tail_text(document, lo));
    out.note = QStringLiteral("the document needs %1 prompt tokens and the context has room for %2: its beginning and end "
                              "were kept (%3 of %4 characters), the middle left out")
                   .arg(full).arg(room).arg(lo).arg(document.size());
    return out;
}

}  // namespace demo
