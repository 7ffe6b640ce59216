// llama.cpp's clean_up_tokenization_spaces: the space removals some BPE vocabularies (gpt-2, llama-bpe) apply when
// detokenizing (" ," -> ",", " 's" -> "'s", ...).
#pragma once

#include <string>

namespace specula::internal {

void clean_up_spaces(std::string &s);

}  // namespace specula::internal
