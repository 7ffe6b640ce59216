#include "tokenizer/special_partition.h"

#include "tokenizer/vocab_data.h"

namespace specula::internal {
namespace {

// isspace() in the C locale, without its undefined behaviour for bytes above 0x7F.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

std::vector<Fragment> partition_special_tokens(const VocabData &vocab, std::string_view text, bool parse_special) {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({-1, text});

    for (const int32_t id : vocab.special_tokens) {
        const TokenData &token = vocab.tokens[size_t(id)];
        // User-defined tokens are split out even without parse_special, as Hugging Face tokenizers do.
        if (!parse_special && (token.attr & (kAttrControl | kAttrUnknown))) continue;
        const std::string_view needle = token.text;

        std::vector<Fragment> next;
        next.reserve(fragments.size());
        for (const Fragment &fragment : fragments) {
            if (fragment.token >= 0) {
                next.push_back(fragment);
                continue;
            }
            std::string_view rest = fragment.text;
            bool found_any = false;
            for (;;) {
                const size_t match = rest.find(needle);
                if (match == std::string_view::npos) break;
                found_any = true;
                std::string_view left = rest.substr(0, match);
                if (token.attr & kAttrLstrip)
                    while (!left.empty() && is_space(left.back())) left.remove_suffix(1);
                if (!left.empty()) next.push_back({-1, left});
                next.push_back({id, {}});
                rest = rest.substr(match + needle.size());
                if (token.attr & kAttrRstrip)
                    while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
                if (rest.empty()) break;
            }
            if (!found_any) next.push_back(fragment);
            else if (!rest.empty()) next.push_back({-1, rest});
        }
        fragments = std::move(next);
    }
    return fragments;
}

}  // namespace specula::internal
