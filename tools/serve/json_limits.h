// Bounds on a request body's JSON, checked by a SAX pass over the text before any tree is built. nlohmann's parser
// is iterative, but what is done with a tree afterwards (copies, comparisons, serialisation) recurses once per level:
// a well-formed 800 KB body nested 300,000 deep overflowed the stack in a copy. With the depth bounded here every
// walk of request JSON is bounded too; the element and size caps keep a 16 MiB body from becoming a tree many times
// its size (each value is ~16 bytes plus its container's bookkeeping) or many seconds of parsing.
#pragma once

#include <cstddef>
#include <string>

namespace specula_serve {

struct JsonLimits {
    size_t max_depth = 64;                 // nested arrays/objects; llama-server's deepest request field is 3 levels
    size_t max_values = size_t(1) << 20;   // values in the whole body (containers included): 1M token ids at most
    size_t max_array_elements = size_t(1) << 20;
    // Members per object and in the whole body. The server's JSON keeps objects' members in order (ordered_json:
    // a vector searched for duplicates on every insertion), so an object's parse costs its members squared: one
    // object of 63,496 members took over 10 s (found by the serve_json fuzz target). Bounded here, the worst body
    // costs about 65,536 x 1,024 / 2 key comparisons.
    size_t max_object_members = 1024;
    size_t max_members = size_t(1) << 16;
    size_t max_string_bytes = size_t(8) << 20;    // one string value (a prompt of ~2M tokens)
    size_t max_key_bytes = 1024;
};

// What a body violates, or "" when it is within the limits or is not JSON at all (the parser then says so).
// Reads the text once and builds nothing; stops at the first violation.
std::string json_limits_violation(const std::string &text, const JsonLimits &limits = JsonLimits());

}  // namespace specula_serve
