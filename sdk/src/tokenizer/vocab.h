// A model's vocabulary and tokenizer, read from GGUF tokenizer.ggml.* metadata. Tokenizes and detokenizes
// exactly as llama.cpp does (llama-vocab.cpp): SentencePiece ("llama") and byte-level BPE ("gpt2") with
// llama.cpp's pre-tokenizers. Immutable once loaded; copies share the data; every method is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specula::internal {

class GgufFile;
struct VocabData;

// A token's kind, from tokenizer.ggml.token_type 1..6 as adjusted at load time (llama.cpp marks end-of-turn
// and fill-in-the-middle tokens found by name as control, for example). Undefined: type 0 or unknown.
enum class TokenAttr : uint8_t { Normal, Unknown, Control, UserDefined, Unused, Byte, Undefined };

class Vocab {
public:
    // An empty vocabulary (no tokens); every tokenizing call on it throws Error(INVALID_ARGUMENT).
    Vocab();

    // Reads tokenizer.ggml.*; works on vocab-only files. Throws Error(FORMAT) for malformed metadata and
    // Error(UNSUPPORTED) for tokenizer models or pre-tokenizers we do not implement.
    static Vocab load(const GgufFile &file);

    int32_t n_tokens() const;
    int32_t bos() const;  // -1 if none
    int32_t eos() const;  // -1 if none
    int32_t eot() const;  // end of turn (<|eot_id|>, <|im_end|>, ...), -1 if none
    int32_t unk() const;  // -1 if none
    int32_t pad() const;  // -1 if none
    int32_t nl() const;   // the newline token, -1 if none
    // Fill-in-the-middle tokens (tokenizer.ggml.fim_*_token_id, the older prefix/suffix/middle keys, else the known
    // token texts as llama.cpp recognises them), -1 if none.
    int32_t fim_pre() const;
    int32_t fim_suf() const;
    int32_t fim_mid() const;
    int32_t fim_pad() const;
    int32_t fim_rep() const;
    int32_t fim_sep() const;
    // End of generation: EOS, EOT, EOM and the end-of-turn tokens llama.cpp recognises by name
    // (<|im_end|>, <|eot_id|>, <|endoftext|>, <end_of_turn>, ...). False for ids out of range.
    bool is_eog(int32_t token) const;
    bool is_control(int32_t token) const;  // false for ids out of range
    TokenAttr token_attr(int32_t token) const;  // throws Error(INVALID_TOKEN) for bad ids
    const std::string &token_text(int32_t token) const;  // the raw vocabulary entry; Error(INVALID_TOKEN) for bad ids
    bool add_bos() const;
    bool add_eos() const;
    const std::string &model_name() const;  // "llama" (SentencePiece), "gpt2" (byte-level BPE)
    const std::string &pre_name() const;    // tokenizer.ggml.pre, "" when absent

    // Tokenizes UTF-8 text exactly like llama.cpp's llama_tokenize(vocab, text, add_special, parse_special):
    // add_special adds BOS/EOS where the model asks for them; parse_special turns the text of control tokens
    // ("<|im_end|>") into those tokens (user-defined tokens always are). Bytes that are not UTF-8 are
    // tokenized as llama.cpp does (BPE reads them as U+FFFD, SentencePiece as byte tokens).
    std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const;

    // The bytes of one token, like llama_token_to_piece(vocab, token, buf, lstrip = 0, special = render_special):
    // SentencePiece's U+2581 becomes a space and <0xAB> tokens the raw byte; BPE undoes GPT-2's byte mapping.
    // Control and unknown tokens give "" unless render_special. May be an incomplete UTF-8 sequence (see
    // StreamDecoder). Throws Error(INVALID_TOKEN) for ids outside [0, n_tokens).
    std::string token_to_piece(int32_t token, bool render_special) const;

    // Text of a whole sequence, like llama_detokenize(..., remove_special = false, unparse_special =
    // render_special): drops the leading space SentencePiece added, and for models that ask for it tidies
    // spaces before punctuation (" ," -> ","). Throws Error(INVALID_TOKEN) for bad ids.
    std::string detokenize(const std::vector<int32_t> &tokens, bool render_special) const;

private:
    explicit Vocab(std::shared_ptr<const VocabData> data);
    const VocabData &data() const;

    std::shared_ptr<const VocabData> data_;
};

}  // namespace specula::internal
