// The text one token stands for, as llama.cpp's llama_token_to_piece(..., lstrip = 0, special = true) gives it.
// Computed once per token at load time (vocab_loader.cpp); Vocab::token_to_piece serves it from that cache.
#pragma once

#include <string>

namespace specula::internal {

struct VocabData;

// Control, unknown and user-defined tokens give their text as is; normal tokens have SentencePiece's U+2581
// turned back into spaces (SPM) or the GPT-2 byte mapping undone (BPE); byte tokens give their byte; tokens
// of any other type give "". Throws Error(FORMAT) for a byte token whose text is too short to hold a byte.
std::string compute_token_piece(const VocabData &vocab, int32_t id);

}  // namespace specula::internal
