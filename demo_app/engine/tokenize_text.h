// Tokens of a QString for a model (its UTF-8 bytes through specula_model_tokenize), for the prompt builders, the
// context budgets and the document's token count.
#pragma once

#include <specula/specula.hpp>

#include <QString>
#include <string_view>
#include <vector>

namespace demo {

inline std::vector<int32_t> tokenize_text(const specula::Model &model, const QString &text, int32_t flags = 0) {
    const QByteArray utf8 = text.toUtf8();
    return model.tokenize(std::string_view(utf8.constData(), size_t(utf8.size())), flags);
}

}  // namespace demo
