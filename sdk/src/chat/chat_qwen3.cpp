// Qwen3's chat template (Qwen3 0.6B-32B, Qwen3-30B-A3B; tokenizer.chat_template of their GGUFs), written from its
// Jinja text line by line for messages of role and content (no tools: a template given tools opens with a tools
// system prompt this formatter does not write). llama.cpp's built-in formatter treats it as chatml, which is right
// for a single user turn only: Qwen3's template also
//   - drops the thinking of assistant turns before the last user query ("<think>...</think>" is cut from their
//     content), and writes the thinking of later turns (a tool-calling round after that query) as
//     "<think>\n...\n</think>\n\n";
//   - merges consecutive "tool" messages into one user turn of <tool_response> blocks;
//   - with enable_thinking = false, opens the reply with an empty thinking block, which is how Qwen3 is told not to
//     think.
// tests/unit/test_chat_qwen3.cpp checks every byte against the Jinja template rendered by jinja2.
#include "chat/chat_template.h"

namespace specula::internal::chat {

namespace {

std::string_view strip_newlines_left(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    return s;
}

std::string_view strip_newlines_right(std::string_view s) {
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}

bool is_tool_response(std::string_view s) { return s.starts_with("<tool_response>") && s.ends_with("</tool_response>"); }

}  // namespace

std::string apply_qwen3(std::span<const Message> chat, bool add_assistant, Thinking thinking) {
    std::string out;
    const size_t n = chat.size();
    if (n > 0 && chat[0].role == "system") out.append("<|im_start|>system\n").append(chat[0].content).append("<|im_end|>\n");
    // The last user message that is not a wrapped tool response (the query): thinking before it is history.
    size_t last_query = n - 1;  // the template's default (n - 1; unsigned wrap when empty: no message compares)
    for (size_t i = n; i-- > 0;) {
        if (chat[i].role == "user" && !is_tool_response(chat[i].content)) {
            last_query = i;
            break;
        }
    }
    for (size_t i = 0; i < n; ++i) {
        const Message &m = chat[i];
        if (m.role == "user" || (m.role == "system" && i != 0)) {
            out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append("<|im_end|>\n");
        } else if (m.role == "assistant") {
            std::string_view content = m.content, reasoning;
            if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
                // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
                std::string_view before = strip_newlines_right(content.substr(0, close));
                if (const size_t open = before.rfind("<think>"); open != std::string_view::npos) before.remove_prefix(open + 7);
                reasoning = strip_newlines_left(before);
                // content.split('</think>')[-1].lstrip('\n')
                content = strip_newlines_left(content.substr(content.rfind("</think>") + 8));
            }
            out.append("<|im_start|>assistant\n");
            if (i > last_query && (i + 1 == n || !reasoning.empty()))
                out.append("<think>\n").append(strip_newlines_right(strip_newlines_left(reasoning))).append("\n</think>\n\n").append(strip_newlines_left(content));
            else
                out.append(content);
            out.append("<|im_end|>\n");
        } else if (m.role == "tool") {
            if (i == 0 || chat[i - 1].role != "tool") out.append("<|im_start|>user");
            out.append("\n<tool_response>\n").append(m.content).append("\n</tool_response>");
            if (i + 1 == n || chat[i + 1].role != "tool") out.append("<|im_end|>\n");
        }
        // Other roles (and the first message's system turn, written above) write nothing here, as in the template.
    }
    if (add_assistant) {
        out.append("<|im_start|>assistant\n");
        if (thinking == Thinking::Off) out.append("<think>\n\n</think>\n\n");
    }
    return out;
}

}  // namespace specula::internal::chat
