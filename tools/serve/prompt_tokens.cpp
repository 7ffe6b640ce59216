#include "prompt_tokens.h"

#include <string>

namespace specula_serve {

std::vector<int32_t> tokenize_mixed(const specula::Model &model, const json &prompt, bool add_special, bool parse_special,
                                    const char *field_name) {
    const int32_t special = (parse_special ? SPECULA_TOKENIZE_PARSE_SPECIAL : 0);
    const int32_t n_vocab = model.n_vocab();
    std::vector<int32_t> out;
    auto add_id = [&](const json &v) {
        if (!v.is_number_integer())
            throw bad_request(std::string("\"") + field_name + "\" must be a string or an array of strings and token ids");
        const int64_t id = v.is_number_unsigned() ? int64_t(std::min<uint64_t>(v.get<uint64_t>(), uint64_t(INT32_MAX) + 1))
                                                  : v.get<int64_t>();
        if (id < 0 || id >= n_vocab)
            throw bad_request(std::string("\"") + field_name + "\": token id " + std::to_string(id) + " is outside [0, " +
                              std::to_string(n_vocab) + ")");
        out.push_back(int32_t(id));
    };
    if (prompt.is_string()) {
        return model.tokenize(prompt.get<std::string>(), special | (add_special ? SPECULA_TOKENIZE_ADD_SPECIAL : 0));
    }
    if (!prompt.is_array())
        throw bad_request(std::string("\"") + field_name + "\" must be a string or an array of strings and token ids");
    bool first = true;
    for (const json &piece : prompt) {
        if (piece.is_string()) {
            const std::vector<int32_t> ids =
                model.tokenize(piece.get<std::string>(), special | (add_special && first ? SPECULA_TOKENIZE_ADD_SPECIAL : 0));
            out.insert(out.end(), ids.begin(), ids.end());
        } else {
            add_id(piece);
        }
        first = false;
    }
    return out;
}

size_t common_prefix(const std::vector<int32_t> &a, const std::vector<int32_t> &b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
}

}  // namespace specula_serve
