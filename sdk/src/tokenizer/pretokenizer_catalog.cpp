#include "tokenizer/pretokenizer_catalog.h"

#include <initializer_list>

namespace specula::internal {
namespace {

// GPT-2's regex, also used as one step by several others.
const char *const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

// Llama 3. The original's (?i:'s|...) is spelled out case by case, as in llama.cpp.
const char *const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Qwen2: Llama 3's with single digits.
const char *const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *const kCjk = "[一-龥ࠀ-一가-퟿]+";

const char *const kBloom = " ?[^(\\s|.,!?…。，、।۔،)]+";

enum Flags : unsigned { kKeepSpaces = 1, kIgnoreMerges = 2, kAddBos = 4, kNoBos = 8 };

PreTokenizerSpec make(std::initializer_list<const char *> regexes, unsigned flags = 0) {
    PreTokenizerSpec spec;
    for (const char *r : regexes) spec.regexes.emplace_back(r);
    spec.clean_spaces = !(flags & kKeepSpaces);
    spec.ignore_merges = flags & kIgnoreMerges;
    spec.add_bos = flags & kAddBos;
    spec.no_bos = flags & kNoBos;
    return spec;
}

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
    for (std::string_view n : names)
        if (name == n) return true;
    return false;
}

}  // namespace

std::optional<PreTokenizerSpec> find_pretokenizer(std::string_view name) {
    if (name.empty() || name == "default")
        return make({"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"});
    if (is_one_of(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"}))
        return make({kLlama3}, kIgnoreMerges | kAddBos);
    if (is_one_of(name, {"dbrx", "smaug-bpe"})) return make({kLlama3});
    if (is_one_of(name, {"glm4", "chatglm-bpe"})) return make({kLlama3}, kNoBos);
    if (name == "deepseek-llm")
        // Letters as code points: the literal characters include canonical singletons (U+1F7D, U+2126, ...)
        // that editors silently normalise into other, out-of-order code points.
        return make({"[\r\n]",
                     "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
                     "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
                     "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-"
                     "\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"
                     "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}"
                     "-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-"
                     "\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-"
                     "\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-"
                     "\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
                     "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
                     "\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-"
                     "\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
                     "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-"
                     "\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
                     "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", kCjk, "\\p{N}+"},
                    kKeepSpaces);
    if (name == "deepseek-coder")
        return make({"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}, kKeepSpaces);
    if (is_one_of(name, {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}))
        return make({"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
                     "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
                    kKeepSpaces);
    if (name == "falcon") return make({"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"});
    if (is_one_of(name, {"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"})) return make({"\\p{N}", kGpt2});
    if (is_one_of(name, {"command-r", "smollm"})) return make({"\\p{N}", kGpt2}, kKeepSpaces);
    if (is_one_of(name, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                         "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "exaone4"}))
        return make({kGpt2});
    if (is_one_of(name, {"trillion", "granite-docling"})) return make({kGpt2}, kKeepSpaces);
    if (is_one_of(name, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "grok-2", "solar-open"}))
        return make({kQwen2}, kKeepSpaces);
    if (is_one_of(name, {"stablelm2", "megrez"})) return make({kQwen2});
    if (name == "qwen35")
        return make({"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                    kKeepSpaces);
    if (is_one_of(name, {"poro-chat"})) return make({kBloom}, kKeepSpaces);
    if (is_one_of(name, {"bloom", "gpt3-finnish"})) return make({kBloom});
    if (name == "viking") return make({kBloom, "\\p{N}"}, kKeepSpaces);
    if (name == "tekken")
        return make({"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                    kKeepSpaces | kIgnoreMerges | kAddBos);
    if (is_one_of(name, {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}))
        return make({"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                    kKeepSpaces);
    if (name == "chameleon")
        return make({"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", kGpt2},
                    kKeepSpaces | kAddBos);
    if (is_one_of(name, {"bailingmoe", "bailingmoe2", "llada-moe"}))
        return make({"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
                    kKeepSpaces);
    if (name == "seed-coder")
        return make({"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                    kKeepSpaces);
    if (name == "ufakzeka")
        return make({"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, kKeepSpaces);
    return std::nullopt;
}

}  // namespace specula::internal
