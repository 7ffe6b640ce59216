// Builds VocabData from a GGUF file's tokenizer.ggml.* metadata, following llama.cpp's llama_vocab::load step by
// step: the same defaults for absent keys, the same name-based fix-ups of token attributes, the same set of
// end-of-generation tokens. Where llama.cpp would accept a file only by luck of types (it insists on u32 ids and
// i32 token types) we accept any integer type.
#include "tokenizer/vocab_data.h"

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pretokenizer_catalog.h"
#include "tokenizer/token_piece.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace specula::internal {
namespace {

[[noreturn]] void fail(const std::string &message) { throw Error(SPECULA_ERR_FORMAT, "tokenizer: " + message); }

int64_t integer_of(const Value &v) {
    switch (v.type) {
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: return v.i;
    default: return v.u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v.u);
    }
}

// An array of any integer type (llama.cpp wants i32, but converters differ), or nullptr when absent.
const std::vector<Value> *integer_array(const GgufFile &file, const std::string &key) {
    const Value *v = file.find(key);
    if (v == nullptr) return nullptr;
    Value probe;
    probe.type = v->element_type;
    if (v->type != ValueType::ARRAY || !probe.is_integer()) fail("'" + key + "' must be an array of integers");
    return &v->items;
}

// Scores: f32 in practice, i32 in some old files.
const std::vector<Value> *number_array(const GgufFile &file, const std::string &key) {
    const Value *v = file.find(key);
    if (v == nullptr) return nullptr;
    Value probe;
    probe.type = v->element_type;
    if (v->type != ValueType::ARRAY || !(probe.is_integer() || probe.is_float())) fail("'" + key + "' must be an array of numbers");
    return &v->items;
}

uint16_t attr_of_token_type(int64_t type) {
    switch (type) {  // tokenizer.ggml.token_type values (llama_token_type)
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
    }
}

void read_merges(const GgufFile &file, VocabData &vocab) {
    const std::vector<Value> *merges = file.get_array("tokenizer.ggml.merges", ValueType::STRING);
    if (merges == nullptr) fail("BPE vocabulary has no tokenizer.ggml.merges");
    vocab.bpe_ranks.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
        const std::string &merge = (*merges)[i].s;
        // llama.cpp splits "left right" at the first space after the first byte and keys on the pair; our key is
        // the pair rejoined by that space, i.e. the line itself (symbols never contain a space, so no two pairs
        // share a key). A line without such a space is the pair ("", ""), which no lookup can hit.
        const size_t pos = merge.find(' ', 1);
        vocab.bpe_ranks.insert(pos == std::string::npos ? std::string_view(" ") : std::string_view(merge), int32_t(i));
    }
}

void read_tokens(const GgufFile &file, VocabData &vocab) {
    const std::vector<Value> *texts = file.get_array("tokenizer.ggml.tokens", ValueType::STRING);
    if (texts == nullptr) fail("no tokenizer.ggml.tokens in the file");
    if (texts->size() > size_t(INT32_MAX)) fail("too many tokens");
    const size_t n = texts->size();

    const std::vector<Value> *scores = number_array(file, "tokenizer.ggml.scores");
    if (scores && scores->size() < n)
        fail("tokenizer.ggml.scores has " + std::to_string(scores->size()) + " entries for " + std::to_string(n) + " tokens");
    const std::vector<Value> *types = integer_array(file, "tokenizer.ggml.token_type");
    if (types && types->size() < n)
        fail("tokenizer.ggml.token_type has " + std::to_string(types->size()) + " entries for " + std::to_string(n) + " tokens");

    vocab.tokens.resize(n);
    // No reserve: the map must grow exactly as llama.cpp's does so that it iterates in the same order.
    for (size_t i = 0; i < n; ++i) {
        TokenData &token = vocab.tokens[i];
        token.text = (*texts)[i].s;
        if (token.text.empty()) token.text = "[EMPTY_" + std::to_string(i) + "]";
        const auto [it, inserted] = vocab.token_to_id.emplace(token.text, int32_t(i));
        if (!inserted)
            fail("duplicate token in vocabulary: '" + token.text + "' has ids " + std::to_string(it->second) + " and " + std::to_string(i));
        for (size_t j = 0; j + 1 < token.text.size(); ++j) {
            const unsigned bit = unsigned(uint8_t(token.text[j])) << 8 | uint8_t(token.text[j + 1]);
            vocab.adjacent_bytes[bit / 64] |= uint64_t(1) << (bit % 64);
        }
        if (scores) {
            const Value &s = (*scores)[i];
            token.score = s.is_float() ? float(s.f) : float(integer_of(s));
        }
        token.attr = types ? attr_of_token_type(integer_of((*types)[i])) : uint16_t(kAttrNormal);
    }
}

// Special token ids: a default that does not fit the vocabulary is dropped; a value in the file replaces the
// default only when it names a token (llama.cpp warns and keeps the default otherwise).
void read_special_ids(const GgufFile &file, VocabData &vocab) {
    const std::pair<const char *, int32_t *> keys[] = {
        {"tokenizer.ggml.bos_token_id", &vocab.bos},
        {"tokenizer.ggml.eos_token_id", &vocab.eos},
        {"tokenizer.ggml.eot_token_id", &vocab.eot},
        {"tokenizer.ggml.eom_token_id", &vocab.eom},
        {"tokenizer.ggml.unknown_token_id", &vocab.unk},
        {"tokenizer.ggml.seperator_token_id", &vocab.sep},  // sic: the GGUF key is spelled this way
        {"tokenizer.ggml.padding_token_id", &vocab.pad},
        {"tokenizer.ggml.mask_token_id", &vocab.mask},
        {"tokenizer.ggml.fim_pre_token_id", &vocab.fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &vocab.fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &vocab.fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &vocab.fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &vocab.fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &vocab.fim_sep},
        // deprecated spellings of the FIM ids
        {"tokenizer.ggml.prefix_token_id", &vocab.fim_pre},
        {"tokenizer.ggml.suffix_token_id", &vocab.fim_suf},
        {"tokenizer.ggml.middle_token_id", &vocab.fim_mid},
    };
    for (const auto &[key, id] : keys) {
        if (*id >= 0 && *id >= vocab.n_tokens()) *id = kNoToken;
        const std::optional<int64_t> value = file.get_int(key);  // Error(FORMAT) if not an integer
        if (value && *value >= 0 && *value < vocab.n_tokens()) *id = int32_t(*value);
    }
}

void read_add_flags(const GgufFile &file, VocabData &vocab) {
    if (const auto v = file.get_bool("tokenizer.ggml.add_bos_token")) vocab.add_bos = *v;
    if (const auto v = file.get_bool("tokenizer.ggml.add_eos_token")) vocab.add_eos = *v;
    if (const auto v = file.get_bool("tokenizer.ggml.add_sep_token")) vocab.add_sep = *v;
    // The flags may be defaults (SentencePiece adds BOS unless told otherwise), hence the wording.
    if (vocab.add_bos && vocab.bos == kNoToken)
        fail("the model adds a BOS token (tokenizer.ggml.add_bos_token or its default) but has no valid tokenizer.ggml.bos_token_id");
    if (vocab.add_eos && vocab.eos == kNoToken)
        fail("the model adds an EOS token (tokenizer.ggml.add_eos_token) but has no valid tokenizer.ggml.eos_token_id");
    if (vocab.add_sep && vocab.sep == kNoToken)
        fail("the model adds a separator token (tokenizer.ggml.add_sep_token) but has no valid tokenizer.ggml.seperator_token_id");
}

// The ids of those names that are tokens.
std::vector<int32_t> ids_named(const VocabData &vocab, std::initializer_list<const char *> names) {
    std::vector<int32_t> ids;
    for (const char *name : names) {
        const int32_t id = vocab.text_to_token(name);
        if (id != kNoToken) ids.push_back(id);
    }
    return ids;
}

// Of several candidates, the one llama.cpp meets first while iterating its token map. Our map was built by the
// same inserts with the same hash, so it iterates in the same order.
int32_t first_in_map_order(const VocabData &vocab, const std::vector<int32_t> &candidates) {
    if (candidates.size() == 1) return candidates[0];
    for (const auto &entry : vocab.token_to_id)
        for (const int32_t id : candidates)
            if (entry.second == id) return id;
    return kNoToken;
}

// Models often leave the end-of-turn and fill-in-the-middle ids out of the file; llama.cpp finds them by their
// text and makes sure they are control tokens.
void detect_special_tokens_by_text(VocabData &vocab) {
    auto claim = [&](int32_t &slot, std::initializer_list<const char *> names) {
        if (slot != kNoToken) return;
        const std::vector<int32_t> candidates = ids_named(vocab, names);
        if (candidates.empty()) return;
        slot = first_in_map_order(vocab, candidates);
        vocab.tokens[size_t(slot)].attr |= kAttrControl;
    };
    claim(vocab.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                      "<｜end▁of▁sentence｜>", "<end_of_utterance>"});
    claim(vocab.eom, {"<|eom_id|>"});
    claim(vocab.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"});
    claim(vocab.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"});
    claim(vocab.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"});
    claim(vocab.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
    claim(vocab.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
    claim(vocab.fim_sep, {"<|file_sep|>"});

    // Control tokens named "...unused..." are placeholders.
    for (TokenData &token : vocab.tokens)
        if ((token.attr & kAttrControl) && token.text.find("unused") != std::string::npos) token.attr |= kAttrUnused;
}

void build_eog_set(VocabData &vocab) {
    auto &eog = vocab.eog;
    for (const int32_t id : {vocab.fim_pad, vocab.fim_rep, vocab.fim_sep})
        if (id != kNoToken) eog.insert(id);
    // Not "</s>": llama.cpp's release of 2025-02-20, our parity reference (docs/parity.md), does not list it, so a
    // "</s>" that the file types USER_DEFINED (phi-3) stays an ordinary added token that text matches even with
    // special-token parsing off, as in Hugging Face's tokenizer. (Later releases list it for PaddleOCR and force it
    // to CONTROL, then undo that per model: Gemma 4, PLaMo.) Where "</s>" is the model's EOS it is EOG below anyway.
    for (const int32_t id : ids_named(vocab, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
                                              "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
                                              "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["})) {
        eog.insert(id);
        vocab.tokens[size_t(id)].attr |= kAttrControl;
    }
    // gpt-oss: these structure tokens are always rendered, so they are user-defined rather than control.
    for (const int32_t id : ids_named(vocab, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) vocab.tokens[size_t(id)].attr = kAttrUserDefined;

    for (const int32_t id : {vocab.eos, vocab.eot, vocab.eom})
        if (id != kNoToken) eog.insert(id);

    // o200k_harmony / solar-open: with "<|return|>" and "<|call|>" (or "<|calls|>" and "<|flush|>") present,
    // "<|end|>" only ends a message, not the generation.
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = kNoToken;
    for (const int32_t id : eog) {
        if (!vocab.valid(id)) continue;
        const std::string &text = vocab.tokens[size_t(id)].text;
        if (text == "<|return|>") has_return = true;
        else if (text == "<|call|>" || text == "<|calls|>") has_call = true;
        else if (text == "<|flush|>") has_flush = true;
        else if (text == "<|end|>") end_id = id;
    }
    if (end_id != kNoToken && ((has_return && has_call) || (has_call && has_flush))) {
        eog.erase(end_id);
        vocab.tokens[size_t(end_id)].attr = kAttrUserDefined;
    }
}

std::string lowercase(std::string s) {
    for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// Per-model whitespace stripping around special tokens (llama.cpp applies these after building its caches).
void apply_model_specific_attrs(const GgufFile &file, VocabData &vocab) {
    const std::string name = lowercase(file.get_string("general.name").value_or(""));
    const std::string arch = file.get_string("general.architecture").value_or("");
    auto contains_any = [](const std::string &s, std::initializer_list<const char *> parts) {
        for (const char *p : parts)
            if (s.find(p) != std::string::npos) return true;
        return false;
    };
    auto set = [&](const char *text, uint16_t bit, bool on) {
        const int32_t id = vocab.text_to_token(text);
        if (id == kNoToken) return;
        uint16_t &attr = vocab.tokens[size_t(id)].attr;
        attr = on ? uint16_t(attr | bit) : uint16_t(attr & ~bit);
    };
    if (contains_any(vocab.pre_name, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) || contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
        set("<mask>", kAttrLstrip, true);
    } else if (contains_any(name, {"phi-3", "phi3"})) {
        for (const int32_t id : vocab.special_tokens) vocab.tokens[size_t(id)].attr |= kAttrRstrip;
        set("</s>", kAttrRstrip, true);
        for (const char *text : {"<unk>", "<s>", "<|endoftext|>"}) set(text, kAttrRstrip, false);
    } else if (contains_any(name, {"modern-bert"})) {
        set("[MASK]", kAttrLstrip, true);
    }
}

}  // namespace

VocabData load_vocab_data(const GgufFile &file) {
    VocabData vocab;
    const std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
    if (!model) fail("no tokenizer.ggml.model in the file (is it a model with a vocabulary?)");
    vocab.model_name = *model;
    vocab.pre_name = file.get_string("tokenizer.ggml.pre").value_or("");

    std::optional<PreTokenizerSpec> pre;
    if (vocab.model_name == "llama") {
        vocab.kind = VocabKind::Spm;
        vocab.bos = 1;
        vocab.eos = 2;
        vocab.unk = 0;
        vocab.add_space_prefix = true;
        vocab.clean_spaces = false;
        vocab.add_bos = true;
        vocab.add_eos = false;
    } else if (vocab.model_name == "gpt2") {
        vocab.kind = VocabKind::Bpe;
        read_merges(file, vocab);
        vocab.bos = 11;  // llama.cpp's defaults for BPE, kept for fidelity
        vocab.eos = 11;
        pre = find_pretokenizer(vocab.pre_name);
        if (!pre) throw Error(SPECULA_ERR_UNSUPPORTED, "tokenizer: unsupported BPE pre-tokenizer '" + vocab.pre_name + "'");
        vocab.add_space_prefix = false;
        vocab.escape_whitespaces = false;
        vocab.clean_spaces = pre->clean_spaces;
        vocab.ignore_merges = pre->ignore_merges;
        vocab.add_bos = pre->add_bos;
        if (pre->no_bos) vocab.bos = kNoToken;
    } else {
        throw Error(SPECULA_ERR_UNSUPPORTED, "tokenizer: unsupported tokenizer model '" + vocab.model_name +
                                                 "' (supported: 'llama' SentencePiece, 'gpt2' byte-level BPE)");
    }
    if (const auto v = file.get_bool("tokenizer.ggml.add_space_prefix")) vocab.add_space_prefix = *v;
    if (const auto v = file.get_bool("tokenizer.ggml.remove_extra_whitespaces")) vocab.remove_extra_whitespaces = *v;

    read_tokens(file, vocab);
    if (vocab.tokens.empty()) fail("the vocabulary has no tokens");
    if (pre) vocab.pretokenizer = PreTokenizer(pre->regexes);

    // The newline token, found before special tokens are known (so "\n" is tokenized as plain text). llama.cpp
    // falls back to the padding token's default here, which is "none" for both tokenizer kinds.
    if (vocab.kind == VocabKind::Spm) {
        vocab.linefeed = vocab.byte_to_token('\n');
    } else {
        std::vector<int32_t> ids;
        bpe_tokenize(vocab, "\n", ids);
        if (!ids.empty()) vocab.linefeed = ids[0];
    }

    read_special_ids(file, vocab);
    read_add_flags(file, vocab);
    detect_special_tokens_by_text(vocab);
    build_eog_set(vocab);

    for (int32_t id = 0; id < vocab.n_tokens(); ++id)
        if (vocab.tokens[size_t(id)].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) vocab.special_tokens.push_back(id);
    // std::sort, not stable_sort: ties between equally long texts then fall exactly as in llama.cpp.
    std::sort(vocab.special_tokens.begin(), vocab.special_tokens.end(), [&](int32_t a, int32_t b) {
        return vocab.tokens[size_t(a)].text.size() > vocab.tokens[size_t(b)].text.size();
    });

    vocab.pieces.resize(vocab.tokens.size());
    for (int32_t id = 0; id < vocab.n_tokens(); ++id) vocab.pieces[size_t(id)] = compute_token_piece(vocab, id);

    apply_model_specific_attrs(file, vocab);
    return vocab;
}

}  // namespace specula::internal
