// The built-in chat-template families: their names, recognising a template, and formatting a conversation.
// Ported from llama.cpp's src/llama-chat.cpp (ggml-org/llama.cpp 2a20c85a): the detection order and every byte of
// the formatting follow it, so prompts built here tokenize to what llama.cpp would feed the same model. The
// comments name the model each family comes from, as llama.cpp's do.
#include "chat/chat_template.h"

#include "core/error.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace specula::internal::chat {

namespace {

struct FamilyName {
    const char *name;
    Family family;
    bool by_name;  // accepted by from_name and listed by builtin_names (llama.cpp's LLM_CHAT_TEMPLATES, then ours)
};

// Byte-wise sorted by name: the order of llama.cpp's std::map, which llama_chat_builtin_templates lists.
constexpr std::array kFamilies{
    FamilyName{"bailing", Family::Bailing, true},
    FamilyName{"bailing-think", Family::BailingThink, true},
    FamilyName{"bailing2", Family::Bailing2, true},
    FamilyName{"chatglm3", Family::Chatglm3, true},
    FamilyName{"chatglm4", Family::Chatglm4, true},
    FamilyName{"chatml", Family::Chatml, true},
    FamilyName{"command-r", Family::CommandR, true},
    FamilyName{"deepseek", Family::Deepseek, true},
    FamilyName{"deepseek2", Family::Deepseek2, true},
    FamilyName{"deepseek3", Family::Deepseek3, true},
    FamilyName{"dots1", Family::Dots1, false},
    FamilyName{"exaone3", Family::Exaone3, true},
    FamilyName{"exaone4", Family::Exaone4, true},
    FamilyName{"falcon3", Family::Falcon3, true},
    FamilyName{"gemma", Family::Gemma, true},
    FamilyName{"gigachat", Family::Gigachat, true},
    FamilyName{"glmedge", Family::Glmedge, true},
    FamilyName{"gpt-oss", Family::OpenaiMoe, true},
    FamilyName{"granite", Family::Granite, true},
    FamilyName{"grok-2", Family::Grok2, true},
    FamilyName{"hunyuan-dense", Family::HunyuanDense, true},
    FamilyName{"hunyuan-moe", Family::HunyuanMoe, true},
    FamilyName{"kimi-k2", Family::KimiK2, true},
    FamilyName{"llama2", Family::Llama2, true},
    FamilyName{"llama2-sys", Family::Llama2Sys, true},
    FamilyName{"llama2-sys-bos", Family::Llama2SysBos, true},
    FamilyName{"llama2-sys-strip", Family::Llama2SysStrip, true},
    FamilyName{"llama3", Family::Llama3, true},
    FamilyName{"llama4", Family::Llama4, true},
    FamilyName{"megrez", Family::Megrez, true},
    FamilyName{"minicpm", Family::Minicpm, true},
    FamilyName{"mistral-v1", Family::MistralV1, true},
    FamilyName{"mistral-v3", Family::MistralV3, true},
    FamilyName{"mistral-v3-tekken", Family::MistralV3Tekken, true},
    FamilyName{"mistral-v7", Family::MistralV7, true},
    FamilyName{"mistral-v7-tekken", Family::MistralV7Tekken, true},
    FamilyName{"monarch", Family::Monarch, true},
    FamilyName{"openchat", Family::Openchat, true},
    FamilyName{"orion", Family::Orion, true},
    FamilyName{"pangu-embedded", Family::PanguEmbed, true},
    FamilyName{"phi3", Family::Phi3, true},
    FamilyName{"phi4", Family::Phi4, true},
    FamilyName{"rwkv-world", Family::RwkvWorld, true},
    FamilyName{"seed_oss", Family::SeedOss, true},
    FamilyName{"smolvlm", Family::Smolvlm, true},
    FamilyName{"vicuna", Family::Vicuna, true},
    FamilyName{"vicuna-orca", Family::VicunaOrca, true},
    FamilyName{"yandex", Family::Yandex, true},
    FamilyName{"zephyr", Family::Zephyr, true},
    // Specula's own, after llama.cpp's: families whose templates llama.cpp's built-in formatter gets wrong.
    FamilyName{"qwen3", Family::Qwen3, true},
};

const std::vector<const char *> &builtin_name_list() {
    static const std::vector<const char *> names = [] {
        std::vector<const char *> out;
        for (const FamilyName &f : kFamilies)
            if (f.by_name) out.push_back(f.name);
        return out;
    }();
    return names;
}

// llama.cpp trims with isspace(); this is isspace() in the "C" locale, fixed so that a host application's
// setlocale() cannot change which bytes of a UTF-8 message count as space.
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// ASCII case mapping, as toupper() does in the "C" locale (the roles it is used on are ASCII words).
char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; }

// The start of a template for an error message: at most 60 bytes, cut on a UTF-8 boundary, on one line.
std::string excerpt(const std::string &text) {
    constexpr size_t kMax = 60;
    size_t n = std::min(text.size(), kMax);
    if (n < text.size())
        while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;  // don't split a character
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        switch (text[i]) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default: out += text[i];
        }
    }
    if (n < text.size()) out += "...";
    return out;
}

}  // namespace

const char *name(Family family) {
    for (const FamilyName &f : kFamilies)
        if (f.family == family) return f.name;
    return "";  // unreachable: every Family has a row
}

std::optional<Family> from_name(std::string_view name) {
    for (const FamilyName &f : kFamilies)
        if (f.by_name && name == f.name) return f.family;
    return std::nullopt;
}

std::span<const char *const> builtin_names() { return builtin_name_list(); }

std::optional<Family> detect(const std::string &tmpl) {
    if (auto family = from_name(tmpl)) return family;

    auto has = [&tmpl](const char *needle) { return tmpl.find(needle) != std::string::npos; };
    // Each test below is llama.cpp's, in its order; earlier tests win, so none may be reordered.
    if (has("<|im_start|>")) {
        // Qwen3's hybrid-thinking template (Qwen3 0.6B-32B, Qwen3-30B-A3B): chatml turns with its <think> rules.
        // Not llama.cpp's test (it formats these as chatml, which matches them only for a single turn).
        if (has("enable_thinking") && has("</think>") && has("last_query_index")) return Family::Qwen3;
        // SmolVLM uses <|im_start|> as its BOS, but its turns are not chatml
        return has("<|im_sep|>") ? Family::Phi4 : has("<end_of_utterance>") ? Family::Smolvlm : Family::Chatml;
    }
    if (tmpl.starts_with("mistral") || has("[INST]")) {
        if (has("[SYSTEM_PROMPT]")) return Family::MistralV7;
        // Mistral's official 'v1' template ("' [INST] ' + system_message") and 'v3'/'v3-tekken' ones
        // ("[AVAILABLE_TOOLS]"); see mistralai/cookbook concept-deep-dive/tokenization/chat_templates.md
        if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
            if (has(" [INST]")) return Family::MistralV1;
            if (has("\"[INST]\"")) return Family::MistralV3Tekken;
            return Family::MistralV3;
        }
        // llama2 and its variants (https://huggingface.co/blog/llama2#how-to-prompt-llama-2)
        if (has("content.strip()")) return Family::Llama2SysStrip;
        if (has("bos_token + '[INST]")) return Family::Llama2SysBos;
        if (has("<<SYS>>")) return Family::Llama2Sys;
        return Family::Llama2;
    }
    if (has("<|assistant|>") && has("<|end|>")) return Family::Phi3;
    if (has("[gMASK]<sop>")) return Family::Chatglm4;
    if (has("<|assistant|>") && has("<|user|>")) return has("</s>") ? Family::Falcon3 : Family::Glmedge;
    if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return Family::Glmedge;
    if (has("<|user|>") && has("<|endoftext|>")) return Family::Zephyr;
    if (has("bos_token + message['role']")) return Family::Monarch;
    if (has("<start_of_turn>")) return Family::Gemma;
    if (has("'\\n\\nAssistant: ' + eos_token")) return Family::Orion;  // OrionStarAI/Orion-14B-Chat
    if (has("GPT4 Correct ")) return Family::Openchat;                  // openchat/openchat-3.5-0106
    if (has("USER: ") && has("ASSISTANT: ")) {                          // eachadea/vicuna-13b-1.1, Orca variant
        return has("SYSTEM: ") ? Family::VicunaOrca : Family::Vicuna;
    }
    if (has("### Instruction:") && has("<|EOT|>")) return Family::Deepseek;  // deepseek-coder-33b-instruct
    if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return Family::CommandR;  // c4ai-command-r-plus
    if (has("<|start_header_id|>") && has("<|end_header_id|>")) return Family::Llama3;
    if (has("[gMASK]sop")) return Family::Chatglm3;  // chatglm3-6b
    if (has("<用户>")) return Family::Minicpm;        // MiniCPM-3B-OpenHermes-2.5-v2
    if (has("'Assistant: ' + message['content'] + eos_token")) return Family::Deepseek2;
    if (has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>")) return Family::Deepseek3;
    if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]")) {
        return has("[|tool|]") ? Family::Exaone4 : Family::Exaone3;  // LGAI-EXAONE
    }
    if (has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}")) return Family::RwkvWorld;
    if (has("<|start_of_role|>")) return Family::Granite;
    if (has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"))
        return Family::Gigachat;
    if (has("<|role_start|>")) return Family::Megrez;
    if (has(" Ассистент:")) return Family::Yandex;
    if (has("<role>ASSISTANT</role>") && has("'HUMAN'")) return Family::Bailing;
    if (has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>")) return Family::BailingThink;
    if (has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>")) return Family::Bailing2;
    if (has("<|header_start|>") && has("<|header_end|>")) return Family::Llama4;
    if (has("<|endofuserprompt|>")) return Family::Dots1;
    if (has("<|extra_0|>") && has("<|extra_4|>")) return Family::HunyuanMoe;
    if (has("<|start|>") && has("<|channel|>")) return Family::OpenaiMoe;
    if (has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>")) return Family::HunyuanDense;
    if (has("<|im_assistant|>assistant<|im_middle|>")) return Family::KimiK2;
    if (has("<seed:bos>")) return Family::SeedOss;
    if (has("'Assistant: '  + message['content'] + '<|separator|>")) return Family::Grok2;
    if (has("[unused9]系统：[unused10]")) return Family::PanguEmbed;
    return std::nullopt;
}

Family require_family(const std::string &template_text_or_name) {
    if (auto family = detect(template_text_or_name)) return *family;
    throw Error(SPECULA_ERR_UNSUPPORTED, "chat template not recognised: " + excerpt(template_text_or_name));
}

std::string apply(Family tmpl, std::span<const Message> chat, bool add_ass, Thinking thinking) {
    // Each branch is llama.cpp's, with std::string appends instead of a stringstream (same bytes). Variable
    // names follow llama.cpp's (add_ass, is_inside_turn, ...) so the two can be read side by side.
    std::string ss;
    switch (tmpl) {
    case Family::Qwen3: return apply_qwen3(chat, add_ass, thinking);  // Specula's own (chat_qwen3.cpp)

    case Family::Chatml:
        for (const Message &m : chat) ss.append("<|im_start|>").append(m.role).append("\n").append(m.content).append("<|im_end|>\n");
        if (add_ass) ss += "<|im_start|>assistant\n";
        break;

    case Family::MistralV7:
    case Family::MistralV7Tekken: {
        // https://huggingface.co/mistralai/Mistral-Large-Instruct-2411#basic-instruct-template-v7 (and -tekken,
        // Mistral-Small-3.1-24B-Instruct-2503, which has no spaces). Any other role is an assistant turn.
        const std::string_view space = tmpl == Family::MistralV7 ? " " : "";
        for (const Message &m : chat) {
            if (m.role == "system") ss.append("[SYSTEM_PROMPT]").append(space).append(m.content).append("[/SYSTEM_PROMPT]");
            else if (m.role == "user") ss.append("[INST]").append(space).append(m.content).append("[/INST]");
            else ss.append(space).append(m.content).append("</s>");
        }
        break;
    }

    case Family::MistralV1:
    case Family::MistralV3:
    case Family::MistralV3Tekken: {
        // mistralai/cookbook concept-deep-dive/tokenization/{chat_templates,templates}.md. A system message opens
        // the first [INST] and stays inside it; any role but system/user is an assistant turn.
        const std::string_view leading_space = tmpl == Family::MistralV1 ? " " : "";
        const std::string_view trailing_space = tmpl == Family::MistralV3Tekken ? "" : " ";
        const bool trim_assistant_message = tmpl == Family::MistralV3;
        bool is_inside_turn = false;
        for (const Message &m : chat) {
            if (!is_inside_turn) {
                ss.append(leading_space).append("[INST]").append(trailing_space);
                is_inside_turn = true;
            }
            if (m.role == "system") {
                ss.append(m.content).append("\n\n");
            } else if (m.role == "user") {
                ss.append(m.content).append(leading_space).append("[/INST]");
            } else {
                ss.append(trailing_space).append(trim_assistant_message ? trim(m.content) : m.content).append("</s>");
                is_inside_turn = false;
            }
        }
        break;
    }

    case Family::Llama2:
    case Family::Llama2Sys:
    case Family::Llama2SysBos:
    case Family::Llama2SysStrip: {
        // https://huggingface.co/blog/llama2#how-to-prompt-llama-2. The variants: <<SYS>> blocks for system
        // messages, <s> inside the history (the first BOS is the tokenizer's), messages stripped of spaces.
        const bool support_system_message = tmpl != Family::Llama2;
        const bool add_bos_inside_history = tmpl == Family::Llama2SysBos;
        const bool strip_message = tmpl == Family::Llama2SysStrip;
        bool is_inside_turn = true;  // the opening [INST] below has no BOS
        ss += "[INST] ";
        for (const Message &m : chat) {
            const std::string_view content = strip_message ? trim(m.content) : m.content;
            if (!is_inside_turn) {
                is_inside_turn = true;
                ss += add_bos_inside_history ? "<s>[INST] " : "[INST] ";
            }
            if (m.role == "system") {
                // without system support the text still goes into the first turn, just without <<SYS>>
                if (support_system_message) ss.append("<<SYS>>\n").append(content).append("\n<</SYS>>\n\n");
                else ss.append(content).append("\n");
            } else if (m.role == "user") {
                ss.append(content).append(" [/INST]");
            } else {
                ss.append(content).append("</s>");
                is_inside_turn = false;
            }
        }
        break;
    }

    case Family::Phi3:
        for (const Message &m : chat) ss.append("<|").append(m.role).append("|>\n").append(m.content).append("<|end|>\n");
        if (add_ass) ss += "<|assistant|>\n";
        break;

    case Family::Phi4:
        for (const Message &m : chat) ss.append("<|im_start|>").append(m.role).append("<|im_sep|>").append(m.content).append("<|im_end|>");
        if (add_ass) ss += "<|im_start|>assistant<|im_sep|>";
        break;

    case Family::Falcon3:
        for (const Message &m : chat) ss.append("<|").append(m.role).append("|>\n").append(m.content).append("\n");
        if (add_ass) ss += "<|assistant|>\n";
        break;

    case Family::Zephyr:
        for (const Message &m : chat) ss.append("<|").append(m.role).append("|>\n").append(m.content).append("<|endoftext|>\n");
        if (add_ass) ss += "<|assistant|>\n";
        break;

    case Family::Monarch:
        // mlabonne/AlphaMonarch-7B: <s> inside the history, but not before the first message (the tokenizer adds it)
        for (size_t i = 0; i < chat.size(); ++i) {
            ss.append(i == 0 ? "" : "<s>").append(chat[i].role).append("\n").append(chat[i].content).append("</s>\n");
        }
        if (add_ass) ss += "<s>assistant\n";
        break;

    case Family::Gemma: {
        // google/gemma-7b-it has no system role: system text is merged into the next non-model turn; the
        // assistant is called "model".
        std::string system_prompt;
        for (const Message &m : chat) {
            if (m.role == "system") {
                system_prompt.append(trim(m.content));
                continue;
            }
            const std::string_view role = m.role == "assistant" ? "model" : m.role;
            ss.append("<start_of_turn>").append(role).append("\n");
            if (!system_prompt.empty() && role != "model") {
                ss.append(system_prompt).append("\n\n");
                system_prompt.clear();
            }
            ss.append(trim(m.content)).append("<end_of_turn>\n");
        }
        if (add_ass) ss += "<start_of_turn>model\n";
        break;
    }

    case Family::Orion: {
        // OrionStarAI/Orion-14B-Chat: no system role (merged into the next user turn); every user turn already
        // ends with the assistant's prefix, so add_ass has nothing to add.
        std::string system_prompt;
        for (const Message &m : chat) {
            if (m.role == "system") {
                system_prompt.append(m.content);
            } else if (m.role == "user") {
                ss += "Human: ";
                if (!system_prompt.empty()) {
                    ss.append(system_prompt).append("\n\n");
                    system_prompt.clear();
                }
                ss.append(m.content).append("\n\nAssistant: </s>");
            } else {
                ss.append(m.content).append("</s>");
            }
        }
        break;
    }

    case Family::Openchat:
        // openchat/openchat-3.5-0106, as its authors suggest rather than as its bundled template has it: the
        // system message goes in bare, other roles are capitalised ("GPT4 Correct User: ").
        for (const Message &m : chat) {
            if (m.role == "system") {
                ss.append(m.content).append("<|end_of_turn|>");
            } else {
                std::string role(m.role);
                if (!role.empty()) role[0] = ascii_upper(role[0]);
                ss.append("GPT4 Correct ").append(role).append(": ").append(m.content).append("<|end_of_turn|>");
            }
        }
        if (add_ass) ss += "GPT4 Correct Assistant:";
        break;

    case Family::Vicuna:
    case Family::VicunaOrca:
        // eachadea/vicuna-13b-1.1; the Orca variant prefixes the system message. Other roles are left out.
        for (const Message &m : chat) {
            if (m.role == "system") {
                if (tmpl == Family::VicunaOrca) ss.append("SYSTEM: ").append(m.content).append("\n");
                else ss.append(m.content).append("\n\n");
            } else if (m.role == "user") {
                ss.append("USER: ").append(m.content).append("\n");
            } else if (m.role == "assistant") {
                ss.append("ASSISTANT: ").append(m.content).append("</s>\n");
            }
        }
        if (add_ass) ss += "ASSISTANT:";
        break;

    case Family::Deepseek:
        // deepseek-ai/deepseek-coder-33b-instruct. Other roles are left out.
        for (const Message &m : chat) {
            if (m.role == "system") ss.append(m.content);
            else if (m.role == "user") ss.append("### Instruction:\n").append(m.content).append("\n");
            else if (m.role == "assistant") ss.append("### Response:\n").append(m.content).append("\n<|EOT|>\n");
        }
        if (add_ass) ss += "### Response:\n";
        break;

    case Family::CommandR:
        // CohereForAI/c4ai-command-r-plus. Other roles are left out.
        for (const Message &m : chat) {
            if (m.role == "system") ss.append("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>").append(trim(m.content)).append("<|END_OF_TURN_TOKEN|>");
            else if (m.role == "user") ss.append("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>").append(trim(m.content)).append("<|END_OF_TURN_TOKEN|>");
            else if (m.role == "assistant") ss.append("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>").append(trim(m.content)).append("<|END_OF_TURN_TOKEN|>");
        }
        if (add_ass) ss += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
        break;

    case Family::Llama3:
        for (const Message &m : chat) {
            ss.append("<|start_header_id|>").append(m.role).append("<|end_header_id|>\n\n").append(trim(m.content)).append("<|eot_id|>");
        }
        if (add_ass) ss += "<|start_header_id|>assistant<|end_header_id|>\n\n";
        break;

    case Family::Chatglm3:
        // chatglm3-6b (note the space after the newline)
        ss += "[gMASK]sop";
        for (const Message &m : chat) ss.append("<|").append(m.role).append("|>\n ").append(m.content);
        if (add_ass) ss += "<|assistant|>";
        break;

    case Family::Chatglm4:
        ss += "[gMASK]<sop>";
        for (const Message &m : chat) ss.append("<|").append(m.role).append("|>\n").append(m.content);
        if (add_ass) ss += "<|assistant|>\n";
        break;

    case Family::Glmedge:
        for (const Message &m : chat) ss.append("<|").append(m.role).append("|>\n").append(m.content);
        if (add_ass) ss += "<|assistant|>";
        break;

    case Family::Minicpm:
        // MiniCPM-3B-OpenHermes-2.5-v2: each user turn ends with the assistant's prefix <AI>
        for (const Message &m : chat) {
            if (m.role == "user") ss.append("<用户>").append(trim(m.content)).append("<AI>");
            else ss.append(trim(m.content));
        }
        break;

    case Family::Deepseek2:
        // DeepSeek-V2. Other roles are left out.
        for (const Message &m : chat) {
            if (m.role == "system") ss.append(m.content).append("\n\n");
            else if (m.role == "user") ss.append("User: ").append(m.content).append("\n\n");
            else if (m.role == "assistant") ss.append("Assistant: ").append(m.content).append("<｜end▁of▁sentence｜>");
        }
        if (add_ass) ss += "Assistant:";
        break;

    case Family::Deepseek3:
        // DeepSeek-V3. Other roles are left out.
        for (const Message &m : chat) {
            if (m.role == "system") ss.append(m.content).append("\n\n");
            else if (m.role == "user") ss.append("<｜User｜>").append(m.content);
            else if (m.role == "assistant") ss.append("<｜Assistant｜>").append(m.content).append("<｜end▁of▁sentence｜>");
        }
        if (add_ass) ss += "<｜Assistant｜>";
        break;

    case Family::Exaone3:
    case Family::Exaone4:
        // LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct; EXAONE 4 adds a tool role. Other roles are left out.
        for (const Message &m : chat) {
            if (m.role == "system") ss.append("[|system|]").append(trim(m.content)).append("[|endofturn|]\n");
            else if (m.role == "user") ss.append("[|user|]").append(trim(m.content)).append("\n");
            else if (m.role == "assistant") ss.append("[|assistant|]").append(trim(m.content)).append("[|endofturn|]\n");
            else if (m.role == "tool" && tmpl == Family::Exaone4) ss.append("[|tool|]").append(trim(m.content)).append("[|endofturn|]\n");
        }
        if (add_ass) ss += "[|assistant|]";
        break;

    case Family::RwkvWorld:
        // The model needs "\n\n" as its end-of-turn token. The assistant prefix follows a final user message
        // whatever add_ass says. Other roles are left out.
        for (size_t i = 0; i < chat.size(); ++i) {
            const Message &m = chat[i];
            if (m.role == "system") {
                ss.append("System: ").append(trim(m.content)).append("\n\n");
            } else if (m.role == "user") {
                ss.append("User: ").append(trim(m.content)).append("\n\n");
                if (i == chat.size() - 1) ss += "Assistant:";
            } else if (m.role == "assistant") {
                ss.append("Assistant: ").append(trim(m.content)).append("\n\n");
            }
        }
        break;

    case Family::Granite:
        // IBM Granite; "assistant_tool_call" turns carry a <|tool_call|> marker
        for (const Message &m : chat) {
            ss.append("<|start_of_role|>").append(m.role).append("<|end_of_role|>");
            if (m.role == "assistant_tool_call") ss += "<|tool_call|>";
            ss.append(m.content).append("<|end_of_text|>\n");
        }
        if (add_ass) ss += "<|start_of_role|>assistant<|end_of_role|>";
        break;

    case Family::Gigachat: {
        // ai-sage/GigaChat: a system message only as the first message; other roles are left out.
        const bool has_system = !chat.empty() && chat[0].role == "system";
        if (has_system) ss.append("<s>").append(chat[0].content).append("<|message_sep|>");
        else ss += "<s>";
        for (size_t i = has_system ? 1 : 0; i < chat.size(); ++i) {
            if (chat[i].role == "user") {
                ss.append("user<|role_sep|>").append(chat[i].content).append("<|message_sep|>")
                    .append("available functions<|role_sep|>[]<|message_sep|>");
            } else if (chat[i].role == "assistant") {
                ss.append("assistant<|role_sep|>").append(chat[i].content).append("<|message_sep|>");
            }
        }
        if (add_ass) ss += "assistant<|role_sep|>";
        break;
    }

    case Family::Megrez:
        for (const Message &m : chat) ss.append("<|role_start|>").append(m.role).append("<|role_end|>").append(m.content).append("<|turn_end|>");
        if (add_ass) ss += "<|role_start|>assistant<|role_end|>";
        break;

    case Family::Yandex:
        // YandexGPT-5-Lite: "\n\n" is its end-of-turn token; only user and assistant turns exist, so a system
        // message is left out (llama.cpp's own test expects exactly that).
        for (const Message &m : chat) {
            if (m.role == "user") ss.append(" Пользователь: ").append(m.content).append("\n\n");
            else if (m.role == "assistant") ss.append(" Ассистент: ").append(m.content).append("\n\n");
        }
        if (add_ass) ss += " Ассистент:[SEP]";
        break;

    case Family::Bailing:
    case Family::BailingThink:
        // inclusionAI Ling / Ring: roles in capitals, the user is HUMAN; the thinking variant opens <think>.
        for (const Message &m : chat) {
            std::string role = m.role == "user" ? std::string("HUMAN") : std::string(m.role);
            std::transform(role.begin(), role.end(), role.begin(), ascii_upper);
            ss.append("<role>").append(role).append("</role>").append(m.content);
        }
        if (add_ass) {
            ss += "<role>ASSISTANT</role>";
            if (tmpl == Family::BailingThink) ss += "<think>";
        }
        break;

    case Family::Bailing2: {
        // Ling 2.0: a default system turn turns thinking off when the conversation has no system message first
        const bool has_system = !chat.empty() && chat[0].role == "system";
        if (!has_system) ss += "<role>SYSTEM</role>detailed thinking off<|role_end|>";
        for (const Message &m : chat) {
            std::string role = m.role == "user" ? std::string("HUMAN") : std::string(m.role);
            std::transform(role.begin(), role.end(), role.begin(), ascii_upper);
            ss.append("<role>").append(role).append("</role>").append(m.content).append("<|role_end|>");
        }
        if (add_ass) ss += "<role>ASSISTANT</role>";
        break;
    }

    case Family::Llama4:
        for (const Message &m : chat) {
            ss.append("<|header_start|>").append(m.role).append("<|header_end|>\n\n").append(trim(m.content)).append("<|eot|>");
        }
        if (add_ass) ss += "<|header_start|>assistant<|header_end|>\n\n";
        break;

    case Family::Smolvlm:
        // SmolVLM: <|im_start|> is only its BOS; the turns are "User:" / "Assistant:" (any role but system/user
        // is an assistant turn)
        ss += "<|im_start|>";
        for (const Message &m : chat) {
            if (m.role == "system") ss.append(m.content).append("\n\n");
            else if (m.role == "user") ss.append("User: ").append(m.content).append("<end_of_utterance>\n");
            else ss.append("Assistant: ").append(m.content).append("<end_of_utterance>\n");
        }
        if (add_ass) ss += "Assistant:";
        break;

    case Family::Dots1:
        // rednote-hilab dots.llm1.inst; any role but system/user is a response
        for (const Message &m : chat) {
            if (m.role == "system") ss.append("<|system|>").append(m.content).append("<|endofsystem|>");
            else if (m.role == "user") ss.append("<|userprompt|>").append(m.content).append("<|endofuserprompt|>");
            else ss.append("<|response|>").append(m.content).append("<|endofresponse|>");
        }
        if (add_ass) ss += "<|response|>";
        break;

    case Family::HunyuanMoe:
        // tencent/Hunyuan-A13B-Instruct: any role but system/assistant is a user turn; add_ass adds nothing
        for (const Message &m : chat) {
            if (m.role == "system") ss.append("<|startoftext|>").append(m.content).append("<|extra_4|>");
            else if (m.role == "assistant") ss.append(m.content).append("<|eos|>");
            else ss.append("<|startoftext|>").append(m.content).append("<|extra_0|>");
        }
        break;

    case Family::OpenaiMoe:
        // gpt-oss (OpenAI's Harmony format): assistant turns end with <|return|>, the others with <|end|>
        for (const Message &m : chat) {
            ss.append("<|start|>").append(m.role).append("<|message|>").append(m.content);
            ss += m.role == "assistant" ? "<|return|>" : "<|end|>";
        }
        if (add_ass) ss += "<|start|>assistant";
        break;

    case Family::HunyuanDense:
        // tencent/Hunyuan-4B-Instruct: a system message only as the first one; each user turn already ends with
        // the assistant's prefix, so add_ass adds nothing. Other roles are left out.
        for (size_t i = 0; i < chat.size(); ++i) {
            const Message &m = chat[i];
            if (i == 0 && m.role == "system") ss.append(m.content).append("<｜hy_place▁holder▁no▁3｜>");
            if (m.role == "assistant") ss.append("<｜hy_Assistant｜>").append(m.content).append("<｜hy_place▁holder▁no▁2｜>");
            else if (m.role == "user") ss.append("<｜hy_User｜>").append(m.content).append("<｜hy_Assistant｜>");
        }
        break;

    case Family::KimiK2:
        // moonshotai/Kimi-K2-Instruct. An unknown role gets no header, only its content and <|im_end|>.
        for (const Message &m : chat) {
            if (m.role == "system") ss += "<|im_system|>system<|im_middle|>";
            else if (m.role == "user") ss += "<|im_user|>user<|im_middle|>";
            else if (m.role == "assistant") ss += "<|im_assistant|>assistant<|im_middle|>";
            else if (m.role == "tool") ss += "<|im_system|>tool<|im_middle|>";
            ss.append(m.content).append("<|im_end|>");
        }
        if (add_ass) ss += "<|im_assistant|>assistant<|im_middle|>";
        break;

    case Family::SeedOss:
        // ByteDance-Seed/Seed-OSS-36B-Instruct: only assistant messages are trimmed
        for (const Message &m : chat) {
            ss.append("<seed:bos>").append(m.role).append("\n").append(m.role == "assistant" ? trim(m.content) : m.content).append("<seed:eos>");
        }
        if (add_ass) ss += "<seed:bos>assistant\n";
        break;

    case Family::Grok2:
        // xai-org/grok-2: system and user messages are trimmed, assistant ones are not. Other roles are left out.
        for (const Message &m : chat) {
            if (m.role == "system") ss.append("System: ").append(trim(m.content)).append("<|separator|>\n\n");
            else if (m.role == "user") ss.append("Human: ").append(trim(m.content)).append("<|separator|>\n\n");
            else if (m.role == "assistant") ss.append("Assistant: ").append(m.content).append("<|separator|>\n\n");
        }
        if (add_ass) ss += "Assistant:";
        break;

    case Family::PanguEmbed:
        // openPangu-Embedded: "[unused9]<role name>：<content>[unused10]", with an empty system turn first when
        // the conversation does not start with one. Other roles are left out.
        for (size_t i = 0; i < chat.size(); ++i) {
            const Message &m = chat[i];
            if (i == 0 && m.role != "system") ss += "[unused9]系统：[unused10]";
            if (m.role == "system") ss.append("[unused9]系统：").append(m.content).append("[unused10]");
            else if (m.role == "user") ss.append("[unused9]用户：").append(m.content).append("[unused10]");
            else if (m.role == "assistant") ss.append("[unused9]助手：").append(m.content).append("[unused10]");
            else if (m.role == "tool") ss.append("[unused9]工具：").append(m.content).append("[unused10]");
            else if (m.role == "function") ss.append("[unused9]方法：").append(m.content).append("[unused10]");
        }
        if (add_ass) ss += "[unused9]助手：";
        break;
    }
    return ss;
}

}  // namespace specula::internal::chat
