// chat_template: chat template formatting (sdk/src/chat/chat_template.cpp) with arbitrary conversations.
//
// Input: a flags byte, a selector byte, then the conversation: messages separated by 0x1E, each "role 0x1F
// content" (a message without 0x1F is all content, role "user"). Roles and contents are raw bytes: invalid UTF-8
// and NULs included.
//   selector < number of families: that built-in family (every Family value, Dots1 included) formats the
//            conversation; its name must map back to it through from_name/detect (Dots1 has no name).
//   otherwise: the first message's content is template text (a Jinja template or a name): detect() and
//            require_family() on it, and the family found formats the rest.
//   flags bit 0: add_assistant.
// Every built-in name (builtin_names) also goes through from_name and detect once at start.
#include "fuzz_common.h"

#include "chat/chat_template.h"

using namespace specula::internal;

namespace {
constexpr int kFamilies = int(chat::Family::PanguEmbed) + 1;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    for (const char *name : chat::builtin_names()) {
        const auto f = chat::from_name(name);
        FUZZ_CHECK(f.has_value());
        FUZZ_CHECK(std::string(chat::name(*f)) == name);
        FUZZ_CHECK(chat::detect(name) == f);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Reader in(data, size);
    const uint8_t flags = in.byte();
    const uint8_t selector = in.byte();
    std::vector<std::pair<std::string_view, std::string_view>> parts;
    while (!in.empty() && parts.size() < 64) {
        const std::string_view m = in.until('\x1E');
        const size_t sep = m.find('\x1F');
        if (sep == std::string_view::npos) parts.emplace_back("user", m);
        else parts.emplace_back(m.substr(0, sep), m.substr(sep + 1));
    }
    try {
        chat::Family family;
        size_t first = 0;
        if (selector < kFamilies) {
            family = chat::Family(selector);
            if (family != chat::Family::Dots1) FUZZ_CHECK(chat::from_name(chat::name(family)) == family);
        } else {
            const std::string text = parts.empty() ? std::string() : std::string(parts[0].second);
            first = parts.empty() ? 0 : 1;
            const auto detected = chat::detect(text);
            try {
                family = chat::require_family(text);
                FUZZ_CHECK(detected == family);
            } catch (const Error &e) {
                FUZZ_CHECK(!detected.has_value() && e.status() == SPECULA_ERR_UNSUPPORTED);
                return 0;
            }
        }
        std::vector<chat::Message> messages;
        for (size_t i = first; i < parts.size(); ++i) messages.push_back({parts[i].first, parts[i].second});
        const std::string out = chat::apply(family, messages, (flags & 1) != 0);
        // Every message's content is in the output, except where the family leaves roles out or strips text:
        // nothing is claimed beyond not crashing and a bounded size.
        size_t total = 0;
        for (const auto &m : messages) total += m.role.size() + m.content.size();
        FUZZ_CHECK(out.size() <= 4 * total + 256 * (messages.size() + 1));
    } catch (const Error &e) {
        fuzz::expected_error(e);
    }
    return 0;
}
