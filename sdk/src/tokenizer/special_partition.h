// Cuts special tokens out of text before the tokenizer proper sees it (llama.cpp's tokenizer_st_partition).
// Special tokens are matched literally, longest first; user-defined tokens always are, control and unknown
// tokens only when parse_special is set. Tokens marked LSTRIP/RSTRIP also swallow the whitespace beside them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace specula::internal {

struct VocabData;

// Either a special token or a stretch of plain text still to tokenize.
struct Fragment {
    int32_t token;          // >= 0: a special token; -1: plain text
    std::string_view text;  // the plain text (a view into the caller's string)
};

std::vector<Fragment> partition_special_tokens(const VocabData &vocab, std::string_view text, bool parse_special);

}  // namespace specula::internal
