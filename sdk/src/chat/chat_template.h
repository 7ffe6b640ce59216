// Chat templates: turning a conversation into prompt text the way llama.cpp's built-in formatter does
// (src/llama-chat.cpp: llm_chat_detect_template + llm_chat_apply_template, as of ggml-org/llama.cpp commit
// 2a20c85a). Like llama.cpp this is not a Jinja engine: a model's Jinja chat template is recognised by tell-tale
// substrings and mapped to one of a fixed set of hand-written families, whose output is byte-identical to
// llama.cpp's for the same family and messages. Everything here is pure and thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specula::internal::chat {

// The built-in families, one per llama.cpp LLM_CHAT_TEMPLATE_* value (same behaviour, same names).
enum class Family {
    Chatml,
    Llama2,
    Llama2Sys,
    Llama2SysBos,
    Llama2SysStrip,
    MistralV1,
    MistralV3,
    MistralV3Tekken,
    MistralV7,
    MistralV7Tekken,
    Phi3,
    Phi4,
    Falcon3,
    Zephyr,
    Monarch,
    Gemma,
    Orion,
    Openchat,
    Vicuna,
    VicunaOrca,
    Deepseek,
    Deepseek2,
    Deepseek3,
    CommandR,
    Llama3,
    Chatglm3,
    Chatglm4,
    Glmedge,
    Minicpm,
    Exaone3,
    Exaone4,
    RwkvWorld,
    Granite,
    Gigachat,
    Megrez,
    Yandex,
    Bailing,
    BailingThink,
    Bailing2,
    Llama4,
    Smolvlm,
    Dots1,  // detected from a template's text only: llama.cpp has no name for it in its table (see from_name)
    HunyuanMoe,
    OpenaiMoe,
    HunyuanDense,
    KimiK2,
    SeedOss,
    Grok2,
    PanguEmbed,
    Qwen3,  // Specula's own (chat_qwen3.cpp): llama.cpp formats Qwen3's template as chatml, without its <think> rules
};

// Whether the reply opens with thinking, for templates that have such a switch (Qwen3's enable_thinking, which
// llama-server takes as chat_template_kwargs). Families without one ignore it, as a Jinja template ignores a
// variable it does not read.
enum class Thinking { Default, On, Off };

// One message of a conversation. Views: the caller keeps the text alive for the call.
struct Message {
    std::string_view role;  // "system", "user", "assistant", "tool", ... (families treat unknown roles differently)
    std::string_view content;
};

// llama.cpp's name for a family (or Specula's, for the families llama.cpp's table lacks: "qwen3") ("chatml", "llama2-sys", "mistral-v7", ...). Static storage.
const char *name(Family family);

// The family whose built-in name is exactly `name`; nullopt for anything else. Dots1 has no built-in name (as
// in llama.cpp, where "dots1" is not in LLM_CHAT_TEMPLATES), so name(Dots1) is reported but not accepted here.
std::optional<Family> from_name(std::string_view name);

// The names from_name accepts: llama.cpp's, in the order its llama_chat_builtin_templates lists them (byte-wise
// sorted, since llama.cpp keeps them in a std::map), then Specula's own ("qwen3").
std::span<const char *const> builtin_names();

// llm_chat_detect_template: a built-in name first, then the substring heuristics, in llama.cpp's order (the
// order matters: a chatml template that also mentions [INST] is chatml). nullopt when nothing matches.
std::optional<Family> detect(const std::string &template_text_or_name);

// detect(), or Error(UNSUPPORTED, "chat template not recognised: <start of the text>...").
Family require_family(const std::string &template_text_or_name);

// llm_chat_apply_template: the conversation as prompt text. add_assistant appends what opens the assistant's
// reply, for the families that have such a prefix (some, like llama2 and the mistral ones, end every user turn
// with it anyway and ignore the flag, as llama.cpp does). Roles a family has no place for are left out or
// treated as that family's default turn, exactly as llama.cpp does, so the text stays byte-identical.
std::string apply(Family family, std::span<const Message> messages, bool add_assistant, Thinking thinking = Thinking::Default);

// Qwen3's template (chat_qwen3.cpp), byte-identical to its Jinja for role/content messages.
std::string apply_qwen3(std::span<const Message> messages, bool add_assistant, Thinking thinking);

}  // namespace specula::internal::chat
