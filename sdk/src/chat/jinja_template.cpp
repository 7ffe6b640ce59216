// Rendering a chat template's own Jinja with minja, the way llama-server's --jinja does (llama.cpp common/chat.cpp:
// common_chat_templates_init, common_chat_msgs_to_json_oaicompat, apply; release 2025-02-20).
#include "chat/jinja_template.h"

#include "core/error.h"

#include <chat-template.hpp>
#include <nlohmann/json.hpp>

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace specula::internal::chat {

const char *const kChatmlJinja =
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}";

namespace {

// The deepest nesting of brackets ( [ { inside the template's tags and of its blocks. minja's parser recurses once
// (through several functions) per level, so a hostile template of 10,000 '(' would overflow the stack before any
// error. Brackets are counted where the parser reads them: inside {{ }} and {% %}, outside string literals (a
// string of ')' must not hide the parentheses around it); comments and text are skipped.
int nesting_depth(std::string_view text) {
    int depth = 0, deepest = 0, blocks = 0, deepest_blocks = 0;
    size_t i = 0;
    const size_t n = text.size();
    while (i < n) {
        const size_t open = text.find('{', i);
        if (open == std::string_view::npos || open + 1 >= n) break;
        const char kind = text[open + 1];
        if (kind == '#') {  // a comment: skipped whole
            const size_t close = text.find("#}", open + 2);
            if (close == std::string_view::npos) break;
            i = close + 2;
            continue;
        }
        if (kind != '{' && kind != '%') {
            i = open + 1;
            continue;
        }
        size_t k = open + 2;
        if (kind == '%') {  // the block keyword: if/for/macro/... open a level, end... closes one
            size_t word = k;
            while (word < n && (text[word] == '-' || text[word] == '+' || text[word] == '~' || text[word] == ' ' || text[word] == '\t' ||
                                text[word] == '\n' || text[word] == '\r'))
                ++word;
            const std::string_view w = text.substr(word, 10);
            if (w.substr(0, 3) == "end") {
                if (blocks > 0) --blocks;
            } else if (w.substr(0, 2) == "if" || w.substr(0, 3) == "for" || w.substr(0, 5) == "macro" || w.substr(0, 6) == "filter" ||
                       w.substr(0, 4) == "call" || w.substr(0, 5) == "block" || w.substr(0, 10) == "generation") {
                // (Not `set`: its one-line form has no end tag; a block `set ... endset` is left out, which the
                // render bound of 128 levels covers.)
                deepest_blocks = std::max(deepest_blocks, ++blocks);
            }
        }
        const char close_char = kind == '{' ? '}' : '%';
        char quote = 0;
        for (; k < n; ++k) {
            const char c = text[k];
            if (quote) {
                if (c == '\\') ++k;
                else if (c == quote) quote = 0;
            } else if (c == '\'' || c == '"') {
                quote = c;
            } else if (c == close_char && k + 1 < n && text[k + 1] == '}' && depth == 0) {
                break;
            } else if (c == '(' || c == '[' || c == '{') {
                deepest = std::max(deepest, ++depth);
            } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
                --depth;
            }
        }
        depth = 0;
        i = k + 2;
    }
    return std::max(deepest, deepest_blocks);
}

}  // namespace

namespace {

// The loop iterations a parse's probes or a render may take (minja.hpp's budget): 10,000 and 1,000 per message. Real
// templates loop once over the messages and over each one's parts or tool calls: a few per message.
int64_t loop_budget(size_t n_messages) { return kJinjaLoopBase + kJinjaLoopPerMessage * int64_t(n_messages); }

// Parsed templates, shared: minja's parser is quadratic in the text (a 9 KB template took 240 ms, 37 KB 4.2 s on a
// 2-core VM), so each (text, bos, eos) is parsed once per process, as llama-server parses its template once at start.
// Rendering a shared template is read-only (each render has its own context). A few entries, least recent dropped.
class TemplateCache {
public:
    std::shared_ptr<const minja::chat_template> get(const std::string &text, const std::string &bos, const std::string &eos) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto it = entries_.begin(); it != entries_.end(); ++it) {
                if (it->text == text && it->bos == bos && it->eos == eos) {
                    std::rotate(entries_.begin(), it, it + 1);  // most recent first
                    return entries_.front().tmpl;
                }
            }
        }
        // Parsed outside the lock (it may take seconds); two threads may both parse a new text, and both results are equal.
        // The constructor also renders a few probe conversations to learn what the template supports (a system role,
        // typed content): llama.cpp's polyfills read those capabilities.
        minja::loop_iteration_budget = loop_budget(3);  // the probes have 1 to 3 messages
        auto tmpl = std::make_shared<const minja::chat_template>(text, bos, eos);
        std::lock_guard<std::mutex> lock(mutex_);
        entries_.insert(entries_.begin(), Entry{text, bos, eos, tmpl});
        if (entries_.size() > kEntries) entries_.pop_back();
        return tmpl;
    }

    static constexpr size_t kEntries = 8;

private:
    struct Entry {
        std::string text, bos, eos;
        std::shared_ptr<const minja::chat_template> tmpl;
    };
    std::mutex mutex_;
    std::vector<Entry> entries_;
};

TemplateCache &template_cache() {
    static TemplateCache cache;
    return cache;
}

// Runs fn on a thread of its own with a stack of `bytes` (reserved, touched only as deep as fn goes) and rethrows
// what it threw. minja's parser matches tokens with std::regex, whose libstdc++ executor recurses once per
// character of a run it matches (a 60 KB comment overflowed 8 MB); with kMaxJinjaBytes of text and this stack, no
// template overflows it, whatever stack the caller's thread has.
void run_on_large_stack(size_t bytes, const std::function<void()> &fn) {
    struct Call {
        const std::function<void()> *fn;
        std::exception_ptr error;
    } call{&fn, nullptr};
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) throw Error(SPECULA_ERR_OUT_OF_MEMORY, "chat template: cannot create a thread");
    pthread_attr_setstacksize(&attr, bytes);
    pthread_t thread;
    const int rc = pthread_create(
        &thread, &attr,
        [](void *arg) -> void * {
            auto *c = static_cast<Call *>(arg);
            try {
                (*c->fn)();
            } catch (...) {
                c->error = std::current_exception();
            }
            return nullptr;
        },
        &call);
    pthread_attr_destroy(&attr);
    if (rc != 0) throw Error(SPECULA_ERR_OUT_OF_MEMORY, "chat template: cannot create a thread for the Jinja renderer");
    pthread_join(thread, nullptr);
    if (call.error) std::rethrow_exception(call.error);
}

// minja's messages end with the template's location and its line, once per nested block: the reason and the
// innermost location are what a reader needs (the rest repeats the same line, up to 128 times).
std::string short_reason(const char *what) {
    std::string s = what;
    const size_t first = s.find(" at row ");
    if (first != std::string::npos) {
        const size_t second = s.find(" at row ", first + 8);
        if (second != std::string::npos) s.resize(second);
    }
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (s.size() > 400) s = s.substr(0, 400) + "...";
    return s;
}

}  // namespace

std::string apply_jinja(const std::string &source, const std::string &bos, const std::string &eos, std::span<const Message> messages,
                        bool add_assistant, Thinking thinking) {
    const std::string text = source == "chatml" ? std::string(kChatmlJinja) : source;
    if (text.size() > kMaxJinjaBytes)
        throw Error(SPECULA_ERR_UNSUPPORTED, "chat template: the Jinja text is " + std::to_string(text.size()) + " bytes, more than the " +
                                                 std::to_string(kMaxJinjaBytes) + " this renderer takes");
    if (nesting_depth(text) > kMaxJinjaNesting)
        throw Error(SPECULA_ERR_UNSUPPORTED,
                    "chat template: the Jinja is nested deeper than " + std::to_string(kMaxJinjaNesting) + " levels of brackets or blocks");
    minja::chat_template_inputs inputs;
    inputs.messages = nlohmann::ordered_json::array();
    for (const Message &m : messages) inputs.messages.push_back({{"role", std::string(m.role)}, {"content", std::string(m.content)}});
    inputs.add_generation_prompt = add_assistant;
    if (thinking != Thinking::Default) inputs.extra_context = {{"enable_thinking", thinking == Thinking::On}};
    std::string out;
    run_on_large_stack(kJinjaStackBytes, [&] {
        std::shared_ptr<const minja::chat_template> tmpl;
        try {
            tmpl = template_cache().get(text, bos, eos);
        } catch (const std::exception &e) {
            throw Error(SPECULA_ERR_UNSUPPORTED, "chat template: the Jinja does not parse: " + short_reason(e.what()));
        }
        try {
            minja::loop_iteration_budget = loop_budget(messages.size());
            out = tmpl->apply(inputs);
        } catch (const std::exception &e) {
            throw Error(SPECULA_ERR_INVALID_ARGUMENT, "chat template: rendering failed: " + short_reason(e.what()));
        }
    });
    // As llama.cpp: the tokenizer adds BOS (and the reply's end is the model's), so a template's own BOS at the
    // start and EOS at the end are cut rather than doubled; inside the text they stay.
    if (!bos.empty() && out.compare(0, bos.size(), bos) == 0) out.erase(0, bos.size());
    if (!eos.empty() && out.size() >= eos.size() && out.compare(out.size() - eos.size(), eos.size(), eos) == 0) out.resize(out.size() - eos.size());
    return out;
}

}  // namespace specula::internal::chat
