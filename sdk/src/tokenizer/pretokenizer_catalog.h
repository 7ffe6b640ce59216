// The byte-level BPE pre-tokenizers we know, by their tokenizer.ggml.pre name: the regexes llama.cpp splits
// text with and the flags it sets for each (most regexes come from the models' own tokenizer.json files).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specula::internal {

struct PreTokenizerSpec {
    std::vector<std::string> regexes;
    bool clean_spaces = true;    // detokenize tidies " ," / " 's" etc. (clean_up_tokenization_spaces)
    bool ignore_merges = false;  // a word that is itself a token is not merged from its bytes
    bool add_bos = false;        // default for tokenizer.ggml.add_bos_token
    bool no_bos = false;         // the model has no BOS token by default
};

// The spec for a pre-tokenizer name; "" means the key was absent (llama.cpp then uses "default").
// nullopt for names we do not implement.
std::optional<PreTokenizerSpec> find_pretokenizer(std::string_view name);

}  // namespace specula::internal
