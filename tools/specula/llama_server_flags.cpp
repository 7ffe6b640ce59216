#include "llama_server_flags.h"

#include <algorithm>
#include <cctype>
#include <cstddef>

namespace specula_cli {
namespace {

enum class Rule { Rename, Ignore, Refuse };

struct FlagRule {
    std::vector<const char *> names;
    Rule rule;
    int values;          // 0: a switch, 1: one value, 2: an optional on/off/auto (-fa, as later releases take it)
    const char *target;  // Rename: specula's flag; otherwise why it is ignored or refused
};

const std::vector<FlagRule> &rules() {
    static const std::vector<FlagRule> table = {
        // CLI11 reads a two-letter short flag as bundled one-letter ones (-ngl 99 as -n gl): these are renamed.
        {{"-np"}, Rule::Rename, 1, "--parallel"},
        {{"--log-verbose"}, Rule::Rename, 0, "--verbose"},
        {{"-to"}, Rule::Rename, 1, "--timeout"},
        {{"-md", "--model-draft"}, Rule::Rename, 1, "--draft-model"},
        {{"-ctk", "--cache-type-k", "-ctv", "--cache-type-v"}, Rule::Rename, 1, "--kv-type"},
        {{"-ngl", "--gpu-layers", "--n-gpu-layers"}, Rule::Ignore, 1,
         "the whole model runs on the --backend device (auto: CUDA, then Vulkan, else the CPU), not split by layers"},
        {{"-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"}, Rule::Ignore, 1, "the draft runs on the target's device"},
        {{"-fa", "--flash-attn"}, Rule::Ignore, 2, "attention is always fused (split-K with a log-sum-exp merge)"},
        {{"-ub", "--ubatch-size"}, Rule::Ignore, 1, "the backends size their own compute batches"},
        {{"-tb", "--threads-batch"}, Rule::Ignore, 1, "-t sets the threads for prompts and generation alike"},
        {{"-dt", "--defrag-thold"}, Rule::Ignore, 1, "a slot's KV cache is contiguous: there is nothing to defragment"},
        {{"--cache-reuse"}, Rule::Ignore, 1, "a slot reuses the longest cached prefix of its last prompt; chunks are not shifted into place"},
        {{"-cb"}, Rule::Rename, 0, "--cont-batching"},
        {{"-nocb"}, Rule::Rename, 0, "--no-cont-batching"},
        {{"--mlock"}, Rule::Ignore, 0, "the model is mapped from its file (--no-mmap reads it into memory)"},
        {{"--no-warmup"}, Rule::Ignore, 0, "there is no warm-up run"},
        {{"--props"}, Rule::Ignore, 0, "the server's properties cannot be changed over HTTP (POST /props answers 501)"},
        {{"-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu"}, Rule::Ignore, 1, "a model runs on one device"},
        {{"--draft-max", "--draft-n", "--draft-min", "--draft-p-min"}, Rule::Ignore, 1,
         "the draft tree is chosen each round from measured costs (--tree)"},
        {{"-lv", "--verbosity", "--log-verbosity"}, Rule::Ignore, 1, "the log is these lines and one per request"},
        {{"--log-disable", "--log-colors", "--log-timestamps", "--log-prefix"}, Rule::Ignore, 0,
         "the log is these lines and one per request"},
        {{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-hfd", "-hfrd", "--hf-repo-draft", "-hfv", "--hf-repo-v", "-hffv",
          "--hf-file-v", "-mu", "--model-url"},
         Rule::Refuse, 1, "downloads a model; specula serve loads local files: download the GGUF and pass -m FILE"},
        {{"--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default", "--fim-qwen-7b-spec", "--fim-qwen-14b-spec"},
         Rule::Refuse, 0, "downloads a model; specula serve loads local files: download the GGUF and pass -m FILE"},
    };
    return table;
}

bool all_digits(const std::string &s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

ServerFlagTranslation translate_llama_server_flags(std::vector<std::string> &args) {
    ServerFlagTranslation out;
    std::vector<std::string> kept;
    std::string kv_type, kv_flag;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") {
            kept.insert(kept.end(), args.begin() + std::ptrdiff_t(i), args.end());
            break;
        }
        // --flag=value as well as --flag value.
        const size_t eq = args[i].rfind("--", 0) == 0 ? args[i].find('=') : std::string::npos;
        const std::string name = args[i].substr(0, eq);
        const bool inline_value = eq != std::string::npos;
        const auto value_at = [&](size_t &j) -> std::string {
            if (inline_value) return args[j].substr(eq + 1);
            return j + 1 < args.size() ? args[++j] : std::string();
        };
        // llama-server's --draft N (tokens to draft) beside specula's --draft FILE (a LongSpec draft).
        if (name == "--draft" && (inline_value ? all_digits(args[i].substr(eq + 1)) : i + 1 < args.size() && all_digits(args[i + 1]))) {
            const std::string v = value_at(i);
            out.notes.push_back("--draft " + v + " ignored: llama-server's tokens to draft; the draft tree is chosen each round from "
                                "measured costs (--tree)");
            continue;
        }
        const FlagRule *rule = nullptr;
        for (const FlagRule &r : rules())
            if (std::find_if(r.names.begin(), r.names.end(), [&](const char *n) { return name == n; }) != r.names.end()) rule = &r;
        if (rule == nullptr) {
            kept.push_back(args[i]);
            continue;
        }
        std::string value;
        if (rule->values == 1) value = value_at(i);
        else if (rule->values == 2 && !inline_value && i + 1 < args.size() &&
                 (args[i + 1] == "on" || args[i + 1] == "off" || args[i + 1] == "auto"))
            value = args[++i];
        else if (rule->values == 2 && inline_value)
            value = args[i].substr(eq + 1);
        const std::string shown = name + (value.empty() ? "" : " " + value);
        switch (rule->rule) {
        case Rule::Rename:
            if (std::string(rule->target) == "--kv-type") {
                // specula keeps keys and values in one type.
                if (!kv_type.empty()) {
                    if (value != kv_type) {
                        out.error = kv_flag + " " + kv_type + " and " + shown + " differ: specula keeps keys and values in one type (--kv-type)";
                        return out;
                    }
                    continue;
                }
                kv_type = value;
                kv_flag = name;
            }
            out.notes.push_back(shown + " read as " + rule->target + (value.empty() ? "" : " " + value));
            kept.push_back(rule->target);
            if (rule->values == 1) kept.push_back(value);
            break;
        case Rule::Ignore: out.notes.push_back(shown + " ignored: " + rule->target); break;
        case Rule::Refuse:
            out.error = name + " " + rule->target;
            return out;
        }
    }
    args = std::move(kept);
    return out;
}

}  // namespace specula_cli
