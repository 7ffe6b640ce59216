#include "grammar/json_schema.h"

#include "grammar/json_pattern.h"

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace specula::internal {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void invalid(const std::string &what) { throw Error(SPECULA_ERR_INVALID_ARGUMENT, "json schema: " + what); }
[[noreturn]] void unsupported(const std::string &what) { throw Error(SPECULA_ERR_UNSUPPORTED, "json schema: " + what); }

// The rules every grammar may use (llama.cpp's json-schema-to-grammar primitives, same language).
const std::map<std::string, std::string> &primitives() {
    static const std::map<std::string, std::string> rules = {
        {"space", R"(| " " | "\n" [ \t]{0,20})"},
        {"boolean", R"(("true" | "false") space)"},
        {"null", R"("null" space)"},
        {"decimal-part", R"([0-9]{1,16})"},
        {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
        {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space)"},
        {"integer", R"(("-"? integral-part) space)"},
        {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))"},
        {"string", R"("\"" char* "\"" space)"},
        {"value", R"(object | array | string | number | boolean | null)"},
        {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? "}" space)"},
        {"array", R"("[" space ( value ("," space value)* )? "]" space)"},
        {"uuid", R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space)"},
        {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))"},
        {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
        {"date-time", R"(date "T" time)"},
        {"date-string", R"("\"" date "\"" space)"},
        {"time-string", R"("\"" time "\"" space)"},
        {"date-time-string", R"("\"" date-time "\"" space)"},
    };
    return rules;
}
// What each primitive uses.
const std::map<std::string, std::vector<std::string>> &primitive_deps() {
    static const std::map<std::string, std::vector<std::string>> deps = {
        {"boolean", {"space"}}, {"null", {"space"}}, {"number", {"integral-part", "decimal-part", "space"}},
        {"integer", {"integral-part", "space"}}, {"string", {"char", "space"}}, {"uuid", {"space"}},
        {"value", {"object", "array", "string", "number", "boolean", "null"}}, {"object", {"string", "value", "space"}},
        {"array", {"value", "space"}}, {"date-time", {"date", "time"}}, {"date-string", {"date", "space"}},
        {"time-string", {"time", "space"}}, {"date-time-string", {"date-time", "space"}},
    };
    return deps;
}

// A GBNF literal of text (UTF-8 passes through; quotes, backslashes and control characters escaped).
std::string literal(const std::string &text) {
    std::string out = "\"";
    for (const char ch : text) {
        const unsigned char c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7F) {
            static const char *hex = "0123456789ABCDEF";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

// The code points of text when none of them is one JSON writes escaped (a quote, a backslash, a control character).
bool plain_code_points(const std::string &text, std::vector<uint32_t> &out) {
    out.clear();
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > text.size()) return false;
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        if (cp == '"' || cp == '\\' || cp < 0x20 || cp == 0x7F) return false;
        out.push_back(cp);
        i += n;
    }
    return true;
}

// A code point inside a GBNF character class: the class's own metacharacters as \xHH, others as UTF-8.
std::string class_char(uint32_t cp) {
    if (cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == '\\') {
        static const char *hex = "0123456789ABCDEF";
        return std::string("\\x") + hex[cp >> 4] + hex[cp & 15];
    }
    std::string out;
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
    return out;
}

std::string rule_name_of(const std::string &s) {
    std::string out;
    for (const char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    return out.empty() ? "x" : out;
}

// Integers in [lo, hi] of the same number of digits (no leading zeros beyond those of lo and hi themselves).
std::string digits_between(const std::string &a, const std::string &b) {
    if (a.size() == 1) return a == b ? literal(a) : "[" + a + "-" + b + "]";
    if (a[0] == b[0]) return literal(a.substr(0, 1)) + " (" + digits_between(a.substr(1), b.substr(1)) + ")";
    const size_t rest = a.size() - 1;
    std::vector<std::string> alts;
    alts.push_back(literal(a.substr(0, 1)) + " (" + digits_between(a.substr(1), std::string(rest, '9')) + ")");
    if (a[0] + 1 <= b[0] - 1) {
        const std::string mid = a[0] + 1 == b[0] - 1 ? literal(std::string(1, char(a[0] + 1))) : "[" + std::string(1, char(a[0] + 1)) + "-" + std::string(1, char(b[0] - 1)) + "]";
        alts.push_back(mid + " [0-9]{" + std::to_string(rest) + "}");
    }
    alts.push_back(literal(b.substr(0, 1)) + " (" + digits_between(std::string(rest, '0'), b.substr(1)) + ")");
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out;
}

// Non-negative integers in [lo, hi] (hi < 0: no upper bound), written without leading zeros.
std::string non_negative_between(int64_t lo, int64_t hi) {
    const std::string l = std::to_string(lo);
    std::vector<std::string> alts;
    const size_t max_len = hi < 0 ? 16 : std::to_string(hi).size();
    for (size_t len = l.size(); len <= max_len; ++len) {
        const std::string smallest = len == 1 ? "0" : "1" + std::string(len - 1, '0');
        const std::string largest(len, '9');
        const std::string a = len == l.size() ? l : smallest;
        const std::string b = hi >= 0 && len == max_len ? std::to_string(hi) : largest;
        if (hi < 0 && len > l.size() && len == max_len) {
            alts.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + ",15}");
            break;
        }
        alts.push_back("(" + digits_between(a, b) + ")");
    }
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return "(" + out + ")";
}

class Converter {
public:
    explicit Converter(json root) : root_(std::move(root)) {}

    std::string run() {
        const std::string top = visit(root_, "root");
        if (top != "root") add("root", top);
        std::string out;
        for (const auto &[name, body] : rules_) out += name + " ::= " + body + "\n";
        return out;
    }

private:
    json root_;
    std::map<std::string, std::string> rules_;
    std::map<std::string, std::string> ref_rules_;  // "$ref" -> its rule's name
    int depth_ = 0;

    // Adds `name ::= body` under name, or name0, name1, ... when the name is taken by another body (a primitive's
    // name included); the same body under the same name is one rule.
    std::string add(const std::string &name, const std::string &body) {
        const std::string key = rule_name_of(name);
        for (int i = -1;; ++i) {
            const std::string k = i < 0 ? key : key + std::to_string(i);
            const auto p = primitives().find(k);
            if (p != primitives().end() && p->second != body) continue;
            const auto it = rules_.find(k);
            if (it == rules_.end() || it->second == body) {
                rules_[k] = body;
                return k;
            }
        }
    }
    // A name no rule has yet (for a reference's rule, filled once its schema is converted).
    std::string reserve(const std::string &name) {
        const std::string key = rule_name_of(name);
        for (int i = -1;; ++i) {
            const std::string k = i < 0 ? key : key + std::to_string(i);
            if (primitives().count(k) || rules_.count(k)) continue;
            rules_[k] = "\"\"";
            return k;
        }
    }
    std::string primitive(const std::string &name) {
        if (rules_.count(name)) return name;
        rules_[name] = primitives().at(name);
        const auto deps = primitive_deps().find(name);
        if (deps != primitive_deps().end())
            for (const std::string &d : deps->second) primitive(d);
        return name;
    }

    const json &resolve(const std::string &ref) {
        std::string path;
        if (ref.rfind("#/", 0) == 0) path = ref.substr(1);
        else if (ref == "#") path = "";
        else unsupported("the reference '" + ref + "' is not inside this schema (only \"#/...\" references are supported)");
        try {
            return root_.at(json::json_pointer(path));
        } catch (const json::exception &) {
            invalid("the reference '" + ref + "' does not resolve");
        }
    }

    std::string visit(const json &schema, const std::string &name) {
        if (++depth_ > 256) invalid("the schema nests deeper than 256 subschemas");
        struct Leave {
            int &d;
            ~Leave() { --d; }
        } leave{depth_};
        if (schema.is_boolean()) {
            if (!schema.get<bool>()) invalid("a schema of false admits nothing");
            return primitive("value");
        }
        if (!schema.is_object()) invalid("a schema must be an object or a boolean, not " + std::string(schema.type_name()));
        if (schema.contains("$ref")) {
            const json &r = schema.at("$ref");
            if (!r.is_string()) invalid("\"$ref\" must be a string");
            const std::string ref = r.get<std::string>();
            const auto known = ref_rules_.find(ref);
            if (known != ref_rules_.end()) return known->second;
            const std::string rule = reserve(ref.substr(ref.find_last_of('/') + 1));
            ref_rules_[ref] = rule;  // before converting it: a recursive schema refers to this rule
            rules_[rule] = visit(resolve(ref), rule + "-def");
            return rule;
        }
        for (const char *alt : {"oneOf", "anyOf"}) {
            if (!schema.contains(alt)) continue;
            const json &list = schema.at(alt);
            if (!list.is_array() || list.empty()) invalid(std::string("\"") + alt + "\" must be a non-empty array");
            std::string body;
            for (size_t i = 0; i < list.size(); ++i) body += (i ? " | " : "") + visit(list[i], name + "-" + std::to_string(i));
            return add(name, body);
        }
        if (schema.contains("const")) {
            primitive("space");
            return add(name, literal(schema.at("const").dump()) + " space");
        }
        if (schema.contains("enum")) {
            const json &list = schema.at("enum");
            if (!list.is_array() || list.empty()) invalid("\"enum\" must be a non-empty array");
            std::string body = "(";
            for (size_t i = 0; i < list.size(); ++i) body += (i ? " | " : "") + literal(list[i].dump());
            primitive("space");
            return add(name, body + ") space");
        }
        if (schema.contains("pattern") && (!schema.contains("type") || schema.at("type") == "string")) {
            const json &pattern = schema.at("pattern");
            if (!pattern.is_string()) invalid("\"pattern\" must be a string");
            primitive("space");
            return add(name, "\"\\\"\" (" + json_pattern_to_gbnf(pattern.get<std::string>()) + ") \"\\\"\" space");
        }
        json type = schema.contains("type") ? schema.at("type") : json();
        if (type.is_array()) {
            std::string body;
            for (size_t i = 0; i < type.size(); ++i) {
                json one = schema;
                one["type"] = type[i];
                body += (i ? " | " : "") + visit(one, name + "-" + (type[i].is_string() ? type[i].get<std::string>() : std::to_string(i)));
            }
            return add(name, body);
        }
        if (!type.is_null() && !type.is_string()) invalid("\"type\" must be a string or an array of strings");
        const std::string t = type.is_string() ? type.get<std::string>() : "";
        if (schema.contains("allOf")) return object_rule(merged_all_of(schema), name);
        if (t == "object" || (t.empty() && (schema.contains("properties") || schema.contains("additionalProperties")))) {
            if (!schema.contains("properties") && (!schema.contains("additionalProperties") || schema.at("additionalProperties") == true))
                return primitive("object");
            return object_rule(schema, name);
        }
        if (t == "array" || (t.empty() && (schema.contains("items") || schema.contains("prefixItems")))) return array_rule(schema, name);
        if (t == "string" || (t.empty() && known_format(schema))) return string_rule(schema, name);
        if (t == "integer") return integer_rule(schema, name);
        if (t == "number") return primitive("number");
        if (t == "boolean") return primitive("boolean");
        if (t == "null") return primitive("null");
        if (t.empty()) return schema.empty() ? primitive("object") : primitive("value");  // {}: an object, as llama.cpp
        invalid("unknown type '" + t + "'");
    }

    // allOf of object schemas, as llama.cpp merges it: every property of a listed schema (a $ref resolved) is
    // required, those of the schemas of an anyOf inside the list optional; the schema's own properties and required
    // keys are added to them.
    json merged_all_of(const json &schema) {
        json merged = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
        const json &list = schema.at("allOf");
        if (!list.is_array()) invalid("\"allOf\" must be an array");
        const std::function<void(const json &, bool, int)> add_part = [&](const json &part0, bool required, int depth) {
            if (depth > 64) invalid("\"allOf\" nested deeper than 64");
            const json *part = &part0;
            if (part->is_object() && part->contains("$ref")) part = &resolve(part->at("$ref").get<std::string>());
            if (part->is_object() && part->contains("anyOf") && required) {
                const json &alternatives = part->at("anyOf");
                if (!alternatives.is_array()) invalid("\"anyOf\" must be an array");
                for (const json &alternative : alternatives) add_part(alternative, false, depth + 1);
                return;
            }
            if (!part->is_object() || (part->contains("type") && part->at("type") != "object"))
                unsupported("\"allOf\" of schemas other than objects is not supported");
            if (!part->contains("properties")) return;
            const json &props = part->at("properties");
            if (!props.is_object()) invalid("\"properties\" must be an object");
            for (const auto &[k, v] : props.items()) {
                merged["properties"][k] = v;
                if (required) merged["required"].push_back(k);
            }
        };
        for (const json &part : list) add_part(part, true, 0);
        if (schema.contains("properties"))
            for (const auto &[k, v] : schema.at("properties").items()) merged["properties"][k] = v;
        if (schema.contains("required"))
            for (const json &r : schema.at("required")) merged["required"].push_back(r);
        return merged;
    }

    std::string object_rule(const json &schema, const std::string &name) {
        primitive("space");
        const json props = schema.contains("properties") ? schema.at("properties") : json::object();
        if (!props.is_object()) invalid("\"properties\" must be an object");
        std::set<std::string> required;
        if (schema.contains("required")) {
            const json &r = schema.at("required");
            if (!r.is_array()) invalid("\"required\" must be an array");
            for (const json &k : r) {
                if (!k.is_string()) invalid("\"required\" must list strings");
                required.insert(k.get<std::string>());
            }
        }
        // One rule per key: "key" : value.
        std::vector<std::string> req_kv, opt_kv;
        for (const auto &[key, sub] : props.items()) {
            const std::string value = visit(sub, name + "-" + key);
            const std::string kv = add(name + "-" + key + "-kv", literal(json(key).dump()) + " space \":\" space " + value);
            (required.count(key) ? req_kv : opt_kv).push_back(kv);
        }
        const json additional = schema.contains("additionalProperties") ? schema.at("additionalProperties") : json();
        bool extra = false;  // the last optional entry is any other key, repeatable
        if (additional.is_object() || (additional.is_boolean() && additional.get<bool>())) {
            const std::string value = additional.is_object() ? visit(additional, name + "-additional-value") : primitive("value");
            primitive("string");
            std::vector<std::string> declared;
            for (const auto &[key, sub] : props.items()) declared.push_back(key);
            opt_kv.push_back(add(name + "-additional-kv", other_key_rule(declared, name + "-additional-k") + " \":\" space " + value));
            extra = true;
        }
        std::string body = "\"{\" space ";
        for (size_t i = 0; i < req_kv.size(); ++i) body += (i ? " \",\" space " : "") + req_kv[i];
        if (!opt_kv.empty()) {
            // Any subset of the optional keys in their order: tail[i] is one of keys[i..] after another, each with its
            // comma (linear in the number of keys: a rule per position).
            const size_t n = opt_kv.size();
            std::vector<std::string> tail(n + 1);
            for (size_t i = n; i-- > 0;) {
                const bool repeatable = extra && i + 1 == n;
                tail[i] = add(name + "-tail-" + std::to_string(i),
                              "(\",\" space " + opt_kv[i] + ")" + (repeatable ? "*" : "?") + (tail[i + 1].empty() ? "" : " " + tail[i + 1]));
            }
            if (!req_kv.empty()) {
                body += " " + tail[0];
            } else {
                std::string alts;
                for (size_t j = 0; j < n; ++j) {
                    const bool repeatable = extra && j + 1 == n;
                    alts += (j ? " | " : "") + opt_kv[j] + (repeatable ? " (\",\" space " + opt_kv[j] + ")*" : "") +
                            (tail[j + 1].empty() ? "" : " " + tail[j + 1]);
                }
                body += "(" + alts + ")?";
            }
        }
        return add(name, body + " \"}\" space");
    }

    // The key of an additional property: a JSON string other than the declared keys, so that a declared key cannot
    // come again with the additional properties' type (llama.cpp's converter excludes them too, but with a raw
    // character class that lets control characters and bad escapes through; this one admits exactly JSON's
    // strings). Over a trie of the keys' characters: at each node a declared next character, or any other character
    // (an escape included) followed by anything, or the end where no key ends. A key spelled with escapes (\u0061 for
    // "a") is not recognised as the declared one; a declared key with characters JSON escapes, or longer than 256
    // characters, falls back to any string.
    std::string other_key_rule(const std::vector<std::string> &declared, const std::string &name) {
        primitive("char");
        primitive("space");
        struct Node {
            std::map<uint32_t, size_t> next;  // code point -> child
            bool key_ends = false;
        };
        std::vector<Node> trie(1);
        for (const std::string &key : declared) {
            std::vector<uint32_t> cps;
            // (Beyond 256 characters a key also falls back: the rules below recurse once per character.)
            if (!plain_code_points(key, cps) || cps.size() > 256) return primitive("string");
            size_t at = 0;
            for (const uint32_t cp : cps) {
                auto it = trie[at].next.find(cp);
                if (it == trie[at].next.end()) {
                    trie.push_back(Node{});
                    it = trie[at].next.emplace(cp, trie.size() - 1).first;
                }
                at = it->second;
            }
            trie[at].key_ends = true;
        }
        const std::function<std::string(size_t)> rest = [&](size_t at) -> std::string {
            const Node &node = trie[at];
            std::string alts, excluded;
            for (const auto &[cp, child] : node.next) {
                const std::string next = rest(child);
                alts.append("[").append(class_char(cp)).append("] ").append(next).append(" | ");
                excluded += class_char(cp);
            }
            alts += "[^\"\\\\\\x7F\\x00-\\x1F" + excluded + "] char* | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) char*";
            return add(name + "-" + std::to_string(at), "(" + alts + ")" + (node.key_ends ? "" : "?"));
        };
        return add(name, "\"\\\"\" " + rest(0) + " \"\\\"\" space");
    }

    // A schema without a type whose "format" is one string_rule knows is a string of it (as llama.cpp).
    static bool known_format(const json &schema) {
        if (!schema.contains("format") || !schema.at("format").is_string()) return false;
        const std::string f = schema.at("format").get<std::string>();
        return f == "date" || f == "time" || f == "date-time" || f == "uuid";
    }

    std::string array_rule(const json &schema, const std::string &name) {
        primitive("space");
        // As llama.cpp: "items" before "prefixItems"; a list of schemas is a tuple, one schema each item's.
        const json no_items;
        const json &listed = schema.contains("items") ? schema.at("items") : schema.contains("prefixItems") ? schema.at("prefixItems") : no_items;
        if (listed.is_array()) {
            const json &items = listed;
            std::string body = "\"[\" space ";
            for (size_t i = 0; i < items.size(); ++i)
                body += (i ? " \",\" space " : "") + visit(items[i], name + "-tuple-" + std::to_string(i));
            return add(name, body + " \"]\" space");
        }
        const std::string item = listed.is_object() ? visit(listed, name + "-item") : primitive("value");
        const int64_t min = schema.contains("minItems") ? schema.at("minItems").get<int64_t>() : 0;
        const int64_t max = schema.contains("maxItems") ? schema.at("maxItems").get<int64_t>() : -1;
        if (min < 0 || (max >= 0 && max < min) || min > 10000 || max > 10000) invalid("minItems/maxItems out of range");
        std::string list;
        if (max == 0) {
            list = "";
        } else {
            const std::string rest = " (\",\" space " + item + ")" + repetition(min > 0 ? min - 1 : 0, max > 0 ? max - 1 : -1);
            list = min > 0 ? item + rest : "(" + item + rest + ")?";
        }
        return add(name, "\"[\" space " + list + " \"]\" space");
    }

    static std::string repetition(int64_t min, int64_t max) {
        if (max < 0) return min == 0 ? "*" : min == 1 ? "+" : "{" + std::to_string(min) + ",}";
        if (min == max) return min == 1 ? "" : "{" + std::to_string(min) + "}";
        return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
    }

    std::string string_rule(const json &schema, const std::string &name) {
        if (schema.contains("format")) {
            const std::string f = schema.at("format").is_string() ? schema.at("format").get<std::string>() : "";
            if (f == "date" || f == "time" || f == "date-time") return primitive(f + "-string");
            if (f == "uuid") return primitive("uuid");
        }
        const int64_t min = schema.contains("minLength") ? schema.at("minLength").get<int64_t>() : 0;
        const int64_t max = schema.contains("maxLength") ? schema.at("maxLength").get<int64_t>() : -1;
        if (min < 0 || (max >= 0 && max < min) || min > 10000 || max > 10000) invalid("minLength/maxLength out of range");
        if (min == 0 && max < 0) return primitive("string");
        primitive("char");
        primitive("space");
        return add(name, "\"\\\"\" char" + repetition(min, max) + " \"\\\"\" space");
    }

    std::string integer_rule(const json &schema, const std::string &name) {
        // An integer bound: minimum rounds up, maximum down; exclusive ones move one past.
        auto bound = [&](const char *key, bool upper, bool exclusive, bool &has, int64_t &out) {
            if (!schema.contains(key)) return;
            const json &v = schema.at(key);
            if (!v.is_number()) invalid(std::string("\"") + key + "\" must be a number");
            const double d = v.get<double>();
            if (!(d > -1e15 && d < 1e15)) unsupported(std::string("\"") + key + "\" beyond 10^15");
            int64_t b = int64_t(upper ? std::floor(d) : std::ceil(d));
            if (exclusive && double(b) == d) b += upper ? -1 : 1;
            out = has ? (upper ? std::min(out, b) : std::max(out, b)) : b;
            has = true;
        };
        bool has_lo = false, has_hi = false;
        int64_t lo = 0, hi = 0;
        bound("minimum", false, false, has_lo, lo);
        bound("exclusiveMinimum", false, true, has_lo, lo);
        bound("maximum", true, false, has_hi, hi);
        bound("exclusiveMaximum", true, true, has_hi, hi);
        if (!has_lo && !has_hi) return primitive("integer");
        if (has_lo && has_hi && hi < lo) invalid("an integer range with maximum below minimum");
        primitive("space");
        std::vector<std::string> alts;
        // Negative part: "-" and the magnitudes in [max(1, -hi), -lo] (no lower bound: any magnitude).
        if (!has_lo || lo < 0) {
            const int64_t mag_lo = has_hi && hi < 0 ? -hi : 1;
            alts.push_back("\"-\" " + non_negative_between(mag_lo, has_lo ? -lo : -1));
        }
        // Non-negative part: [max(0, lo), hi].
        if (!has_hi || hi >= 0) alts.push_back(non_negative_between(has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1));
        std::string body = "(";
        for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
        return add(name, body + ") space");
    }
};

// Nesting of arrays and objects, outside strings (checked before parsing: the parser and the value it builds
// recurse).
bool nests_deeper_than(std::string_view text, int limit) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limit) return true;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return false;
}

}  // namespace

std::string json_schema_to_grammar(std::string_view schema) {
    if (schema.size() > (size_t(1) << 20)) invalid("longer than 1 MiB");
    if (nests_deeper_than(schema, 64)) invalid("nested deeper than 64 arrays and objects");
    json parsed;
    try {
        parsed = json::parse(schema);
    } catch (const json::exception &e) {
        invalid(std::string("not JSON (") + e.what() + ")");
    }
    try {
        return Converter(std::move(parsed)).run();
    } catch (const json::exception &e) {
        invalid(std::string("a keyword of the wrong type (") + e.what() + ")");
    }
}

}  // namespace specula::internal
