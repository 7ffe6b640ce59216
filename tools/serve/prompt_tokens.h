// Request prompts to token ids, as llama-server reads them: a prompt is a string, an array of token ids, or an array
// mixing strings and ids (each string tokenized on its own and spliced in).
#pragma once

#include "json_fields.h"

#include <specula/specula.hpp>

#include <cstdint>
#include <vector>

namespace specula_serve {

// add_special: BOS where the model's metadata asks for it, added once at the start (only when the first piece
// is a string, as llama.cpp's tokenize_mixed does); parse_special: control-token text becomes control tokens.
// Ids outside [0, n_vocab) are a 400.
std::vector<int32_t> tokenize_mixed(const specula::Model &model, const json &prompt, bool add_special, bool parse_special,
                                    const char *field_name);

// Length of the longest common prefix of two token sequences.
size_t common_prefix(const std::vector<int32_t> &a, const std::vector<int32_t> &b);

}  // namespace specula_serve
