#include "tokenizer/vocab.h"

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/space_cleanup.h"
#include "tokenizer/special_partition.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/vocab_data.h"

namespace specula::internal {
namespace {

const std::string kEscapedSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string escape_whitespace(std::string_view text) {
    std::string out;
    out.reserve(text.size() + text.size() / 4);
    for (const char c : text) {
        if (c == ' ') out += kEscapedSpace;
        else out += c;
    }
    return out;
}

void check_token(const VocabData &vocab, int32_t token) {
    if (!vocab.valid(token))
        throw Error(SPECULA_ERR_INVALID_TOKEN, "token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(vocab.n_tokens()) + ")");
}


}  // namespace

Vocab::Vocab() = default;

Vocab::Vocab(std::shared_ptr<const VocabData> data) : data_(std::move(data)) {}

Vocab Vocab::load(const GgufFile &file) { return Vocab(std::make_shared<const VocabData>(load_vocab_data(file))); }

const VocabData &Vocab::data() const {
    if (!data_) throw Error(SPECULA_ERR_INVALID_ARGUMENT, "tokenizer: no vocabulary loaded");
    return *data_;
}

int32_t Vocab::n_tokens() const { return data_ ? data_->n_tokens() : 0; }
int32_t Vocab::bos() const { return data_ ? data_->bos : kNoToken; }
int32_t Vocab::eos() const { return data_ ? data_->eos : kNoToken; }
int32_t Vocab::eot() const { return data_ ? data_->eot : kNoToken; }
int32_t Vocab::unk() const { return data_ ? data_->unk : kNoToken; }
int32_t Vocab::pad() const { return data_ ? data_->pad : kNoToken; }
int32_t Vocab::nl() const { return data_ ? data_->linefeed : kNoToken; }
int32_t Vocab::fim_pre() const { return data_ ? data_->fim_pre : kNoToken; }
int32_t Vocab::fim_suf() const { return data_ ? data_->fim_suf : kNoToken; }
int32_t Vocab::fim_mid() const { return data_ ? data_->fim_mid : kNoToken; }
int32_t Vocab::fim_pad() const { return data_ ? data_->fim_pad : kNoToken; }
int32_t Vocab::fim_rep() const { return data_ ? data_->fim_rep : kNoToken; }
int32_t Vocab::fim_sep() const { return data_ ? data_->fim_sep : kNoToken; }
bool Vocab::add_bos() const { return data_ && data_->add_bos; }
bool Vocab::add_eos() const { return data_ && data_->add_eos; }

bool Vocab::is_eog(int32_t token) const { return data_ && token != kNoToken && data_->eog.count(token) > 0; }

bool Vocab::is_control(int32_t token) const { return data_ && data_->valid(token) && (data_->tokens[size_t(token)].attr & kAttrControl); }

TokenAttr Vocab::token_attr(int32_t token) const {
    const VocabData &vocab = data();
    check_token(vocab, token);
    const uint16_t attr = vocab.tokens[size_t(token)].attr;
    if (attr & kAttrControl) return TokenAttr::Control;
    if (attr & kAttrUserDefined) return TokenAttr::UserDefined;
    if (attr & kAttrUnknown) return TokenAttr::Unknown;
    if (attr & kAttrByte) return TokenAttr::Byte;
    if (attr & kAttrUnused) return TokenAttr::Unused;
    if (attr & kAttrNormal) return TokenAttr::Normal;
    return TokenAttr::Undefined;
}

const std::string &Vocab::token_text(int32_t token) const {
    const VocabData &vocab = data();
    check_token(vocab, token);
    return vocab.tokens[size_t(token)].text;
}

const std::string &Vocab::model_name() const {
    static const std::string none;
    return data_ ? data_->model_name : none;
}

const std::string &Vocab::pre_name() const {
    static const std::string none;
    return data_ ? data_->pre_name : none;
}

std::vector<int32_t> Vocab::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    const VocabData &vocab = data();
    std::vector<int32_t> out;
    const std::vector<Fragment> fragments = partition_special_tokens(vocab, text, parse_special);

    if (vocab.kind == VocabKind::Spm) {
        if (add_special && vocab.add_bos) out.push_back(vocab.bos);
        // SentencePiece prefixes a space to the text, and llama.cpp again to text right after a special token.
        bool prev_special = true;
        for (const Fragment &f : fragments) {
            if (f.token >= 0) {
                out.push_back(f.token);
                prev_special = true;
                continue;
            }
            std::string piece;
            if (vocab.add_space_prefix && prev_special) piece = ' ';
            piece.append(f.text);
            spm_tokenize(vocab, escape_whitespace(piece), out);
            prev_special = false;
        }
        if (add_special && vocab.add_eos) out.push_back(vocab.eos);
    } else {
        if (add_special && vocab.add_bos) out.push_back(vocab.bos);
        for (const Fragment &f : fragments) {
            if (f.token >= 0) out.push_back(f.token);
            else if (vocab.escape_whitespaces) bpe_tokenize(vocab, escape_whitespace(f.text), out);
            else bpe_tokenize(vocab, f.text, out);
        }
        if (add_special && vocab.add_eos) out.push_back(vocab.eos);
    }
    return out;
}

std::string Vocab::token_to_piece(int32_t token, bool render_special) const {
    const VocabData &vocab = data();
    check_token(vocab, token);
    if (!render_special && (vocab.tokens[size_t(token)].attr & (kAttrUnknown | kAttrControl))) return {};
    return vocab.pieces[size_t(token)];
}

std::string Vocab::detokenize(const std::vector<int32_t> &tokens, bool render_special) const {
    const VocabData &vocab = data();
    std::string text;
    // The space SentencePiece put in front of the text is not part of it: strip one from the first token.
    bool remove_space = vocab.add_space_prefix;
    for (const int32_t token : tokens) {
        check_token(vocab, token);
        if (render_special || !(vocab.tokens[size_t(token)].attr & (kAttrUnknown | kAttrControl))) {
            const std::string &piece = vocab.pieces[size_t(token)];
            text.append(piece, remove_space && !piece.empty() && piece[0] == ' ' ? 1 : 0, std::string::npos);
        }
        remove_space = false;
    }
    if (vocab.clean_spaces) clean_up_spaces(text);
    return text;
}

}  // namespace specula::internal
