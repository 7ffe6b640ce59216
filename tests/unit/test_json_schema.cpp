// JSON schemas into grammars (grammar/json_schema.h): each schema's grammar parses, and admits exactly the JSON
// texts the schema does among the ones tried (whole values; whitespace as llama.cpp's `space` rule allows).
#include "core/error.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace specula::internal;

namespace {

bool admits(const std::string &grammar, const std::string &text) {
    GrammarMatcher m(Grammar::parse(grammar));
    return m.accept(text) && m.can_end();
}

void check(const std::string &schema, const std::vector<std::string> &yes, const std::vector<std::string> &no) {
    const std::string g = json_schema_to_grammar(schema);
    INFO("schema " << schema << "\ngrammar:\n" << g);
    for (const std::string &t : yes) {
        INFO("admits " << t);
        CHECK(admits(g, t));
    }
    for (const std::string &t : no) {
        INFO("refuses " << t);
        CHECK_FALSE(admits(g, t));
    }
}

specula_status status_of(const std::string &schema, std::string *message = nullptr) {
    try {
        json_schema_to_grammar(schema);
    } catch (const Error &e) {
        if (message) *message = e.what();
        return e.status();
    }
    return SPECULA_OK;
}

}  // namespace

TEST_CASE("json schema: objects with required, optional and additional properties", "[grammar][json-schema]") {
    check("{}", {R"({"a": 1})", "{}", R"({"x": [1, {"y": null}]})"}, {"[1]", "1", R"("a")"});
    check(R"({"type": "object"})", {R"({"a": "b"})"}, {"[]"});
    check(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]})",
          {R"({"name": "Ada"})", R"({"name": "Ada", "age": 36})", R"({ "name" : "x" ,"age":-1 })", "{\n  \"name\": \"Ada\",\n  \"age\": 36\n}"},
          {R"({"age": 36})", R"({"age": 36, "name": "Ada"})", R"({"name": "Ada", "other": 1})", R"({"name": 5})", R"({"name": "Ada", "age": 1.5})", "{}"});
    check(R"({"properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}})",
          {"{}", R"({"b": null})", R"({"a": true, "c": 2.5})", R"({"a": false, "b": null, "c": -1e3})", R"({"c": 0})"},
          {R"({"b": null, "a": true})", R"({"a": true,})", R"({, "a": true})", R"({"d": 1})"});
    check(R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": true})",
          {R"({"id": 1})", R"({"id": 1, "x": [1], "y": "z"})"}, {R"({"x": 1})", R"({"x": 1, "id": 1})"});
    check(R"({"type": "object", "additionalProperties": {"type": "integer"}})", {"{}", R"({"a": 1, "b": 2})"}, {R"({"a": "x"})"});
    check(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
          {R"({"a": 1, "b": "x"})"}, {R"({"a": 1})", R"({"b": "x"})"});
    // As llama.cpp merges allOf: a listed schema's properties are required, those of an anyOf inside it optional.
    check(R"({"allOf": [{"properties": {"a": {"type": "integer"}}},
                        {"anyOf": [{"properties": {"c": {"type": "integer"}}}, {"properties": {"d": {"type": "integer"}}}]}]})",
          {R"({"a": 1})", R"({"a": 1, "c": 2})", R"({"a": 1, "c": 2, "d": 3})", R"({"a": 1, "d": 3})"}, {"{}", R"({"c": 2})", R"({"d": 3, "a": 1})"});
}

TEST_CASE("json schema: an additional property's key is any JSON string but a declared key", "[grammar][json-schema]") {
    // A declared key does not come again with the additional properties' type; other keys are JSON strings, escapes
    // included, and never raw control characters (llama.cpp's converter lets those through).
    check(R"({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"], "additionalProperties": {"type": "string"}})",
          {R"({"a": 1, "b": "x"})", R"({"a": 1, "ab": "x", "": "y"})", R"({"a": 1, "\"q\\\\": "x"})", R"({"a": 1, "é": "x"})"},
          {R"({"a": 1, "a": "x"})", R"({"a": 1, "b": 2})", "{\"a\": 1, \"\tb\": \"x\"}", R"({"a": 1, "\q": "x"})"});
    // Keys with a character class's metacharacters and non-ASCII ones, and keys that prefix each other.
    check(R"({"properties": {"a-b": {"type": "integer"}, "]": {"type": "integer"}, "é": {"type": "integer"}, "ab": {"type": "integer"},
                             "abc": {"type": "integer"}}, "additionalProperties": {"type": "integer"}})",
          {R"({"a-b": 1, "]": 2})", R"({"]x": 2})", R"({"éa": 1})", R"({"a": 1, "abcd": 2, "b": 3})", R"({"ab": 1, "abc": 2, "x^": 3})"},
          {R"({"]": 1, "]": 2})", R"({"a-b": 1, "a-b": 2})", R"({"ab": 1, "ab": 2})", R"({"abc": 1, "abc": 1})"});
    // A declared key of 100,000 characters (the rules would recurse once per character): any other key then.
    const std::string huge(100000, 'k');
    check(R"({"properties": {")" + huge + R"(": {"type": "integer"}}, "additionalProperties": {"type": "integer"}})",
          {R"({"x": 1})", "{\"" + huge + "\": 1}"}, {R"({"x": "y"})"});
    // With additionalProperties true the other keys' values are any JSON value.
    check(R"({"properties": {"k": {"type": "boolean"}}, "additionalProperties": true})", {R"({"k": true, "x": [1]})", R"({"x": "k"})"},
          {R"({"k": true, "k": 1})", R"({"x": 1, "k": true})"});
}

TEST_CASE("json schema: arrays, tuples, strings, enums, constants, alternatives and formats", "[grammar][json-schema]") {
    check(R"({"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3})", {"[1]", "[1, 2.5, -3e2]", "[ 0 ]"},
          {"[]", "[1, 2, 3, 4]", R"(["1"])", "[1,]"});
    check(R"({"type": "array", "items": {"type": "boolean"}})", {"[]", "[true, false, true]"}, {"[null]"});
    check(R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"});
    check(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]})", {R"(["a", 1])"}, {R"(["a"])", R"([1, "a"])"});
    // As llama.cpp reads them: "items" as a list is a tuple too, "prefixItems" as one schema is every item's, and a
    // schema with a known "format" and no type is that string.
    check(R"({"items": [{"format": "date"}, {"type": "integer"}]})", {R"(["2024-02-29", 1])"}, {R"([1, "2024-02-29"])", R"([true, 1])"});
    check(R"({"type": "array", "prefixItems": {"type": "string"}})", {"[]", R"(["a", "b"])"}, {"[1]"});
    check(R"({"format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {"1", R"("x")"});
    check(R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("a\nb")", R"("\u00e9tk")"}, {R"("a")", R"("abcd")", "ab"});
    check(R"({"enum": ["red", 1, null, {"k": [true]}]})", {R"("red")", "1", "null", R"({"k":[true]})"}, {R"("blue")", "2", R"({"k": [true]})"});
    check(R"({"const": "fixed"})", {R"("fixed")"}, {R"("other")"});
    check(R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", {R"("x")", "42"}, {"4.2", "true"});
    check(R"({"oneOf": [{"type": "null"}, {"type": "array", "items": {"type": "integer"}}]})", {"null", "[1, 2]"}, {R"(["1"])"});
    check(R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1"});
    check(R"({"type": "string", "format": "date"})", {R"("2024-02-29")"}, {R"("2024-13-01")", R"("24-01-01")"});
    check(R"({"type": "string", "format": "date-time"})", {R"("2024-02-29T13:45:00Z")", R"("2024-02-29T13:45:00.123+02:00")"},
          {R"("2024-02-29 13:45:00")"});
    check(R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"});
    check("true", {"1", R"({"a": [null]})"}, {});
}

TEST_CASE("json schema: references, recursion included", "[grammar][json-schema]") {
    const std::string list = R"({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                           "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                           "required": ["v", "next"]}},
        "$ref": "#/$defs/node"})";
    check(list, {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": {"v": 3, "next": null}}})"},
          {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})"});
    // A definition named like a built-in rule keeps its own meaning.
    check(R"({"definitions": {"string": {"type": "integer"}}, "type": "object", "properties": {"s": {"$ref": "#/definitions/string"},
            "t": {"type": "string"}}, "required": ["s", "t"]})",
          {R"({"s": 1, "t": "x"})"}, {R"({"s": "x", "t": "x"})", R"({"s": 1, "t": 1})"});
}

TEST_CASE("json schema: integer bounds admit exactly the integers in range", "[grammar][json-schema]") {
    struct Range {
        const char *schema;
        int64_t lo, hi;  // inclusive; INT64_MIN / INT64_MAX: unbounded
    };
    const Range ranges[] = {
        {R"({"type": "integer", "minimum": 1, "maximum": 9})", 1, 9},
        {R"({"type": "integer", "minimum": -15, "maximum": 120})", -15, 120},
        {R"({"type": "integer", "minimum": 0})", 0, INT64_MAX},
        {R"({"type": "integer", "exclusiveMinimum": 0})", 1, INT64_MAX},
        {R"({"type": "integer", "minimum": 100})", 100, INT64_MAX},
        {R"({"type": "integer", "maximum": -3})", INT64_MIN, -3},
        {R"({"type": "integer", "maximum": 57})", INT64_MIN, 57},
        {R"({"type": "integer", "minimum": -101, "exclusiveMaximum": -7})", -101, -8},
        {R"({"type": "integer", "minimum": 1.5, "maximum": 20.5})", 2, 20},
        {R"({"type": "integer", "minimum": 7, "maximum": 7})", 7, 7},
    };
    for (const Range &r : ranges) {
        const std::string g = json_schema_to_grammar(r.schema);
        INFO(r.schema << "\n" << g);
        GrammarMatcher m(Grammar::parse(g));
        for (int64_t v = -1200; v <= 1200; ++v) {
            INFO(v);
            const bool in = v >= r.lo && v <= r.hi;
            GrammarMatcher t = m;
            CHECK((t.accept(std::to_string(v)) && t.can_end()) == in);
        }
        for (const int64_t v : {int64_t(123456789), int64_t(-123456789)}) {
            GrammarMatcher t = m;
            CHECK((t.accept(std::to_string(v)) && t.can_end()) == (v >= r.lo && v <= r.hi));
        }
        GrammarMatcher lead = m;
        CHECK_FALSE((lead.accept("007") && lead.can_end()));  // no leading zeros
    }
}

TEST_CASE("json schema: malformed and unsupported schemas are refused with a message", "[grammar][json-schema]") {
    std::string message;
    CHECK(status_of(R"({"type": )", &message) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(message, Catch::Contains("json schema: not JSON"));
    CHECK(status_of(R"({"type": "string", "pattern": "a+"})", &message) == SPECULA_ERR_UNSUPPORTED);
    CHECK_THAT(message, Catch::Contains("must start with '^' and end with '$'"));
    CHECK(status_of(R"({"$ref": "#/$defs/missing"})", &message) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(message, Catch::Contains("does not resolve"));
    CHECK(status_of(R"({"$ref": "https://example.com/schema.json"})") == SPECULA_ERR_UNSUPPORTED);
    CHECK(status_of(R"({"type": "thing"})", &message) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(message, Catch::Contains("unknown type 'thing'"));
    CHECK(status_of(R"({"type": "array", "minItems": 3, "maxItems": 2})") == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of(R"({"type": "integer", "minimum": 5, "maximum": 4})") == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of("[1, 2]") == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of("false") == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of(std::string(100, '[') + std::string(100, ']'), &message) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(message, Catch::Contains("nested deeper than 64"));
    CHECK(status_of(R"({"type": "object", "properties": 5})") == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(status_of(R"({"type": "array", "minItems": "x"})") == SPECULA_ERR_INVALID_ARGUMENT);
}

TEST_CASE("json schema: string patterns (regular expressions) admit the JSON strings they match whole", "[grammar][json-schema]") {
    check(R"({"type": "string", "pattern": "^a+$"})", {R"("a")", R"("aaa")"}, {R"("")", R"("ab")", R"("b")", "\"a\"x"});
    check(R"({"pattern": "^[A-Z]{2}-\\d{3,4}$"})", {R"("AB-123")", R"("ZZ-0000")"}, {R"("ab-123")", R"("AB-12")", R"("AB-12345")", R"("AB123")"});
    check(R"({"type": "string", "pattern": "^(?:cat|dog)s?( [0-9]+)*$"})", {R"("cat")", R"("dogs 1 22")", R"("cats")"},
          {R"("cow")", R"("cat ")", R"("dogss")"});
    // Characters JSON writes escaped are admitted escaped only; '.' is any character but a line break.
    check(R"({"type": "string", "pattern": "^a.c$"})", {R"("abc")", R"("a c")", R"("a\"c")", R"("a\\c")", "\"a\xC3\xA9" "c\""},
          {R"("a"c")", "\"a\nc\"", R"("ac")", R"("abbc")"});
    check(R"({"type": "string", "pattern": "^[^,]*$"})", {R"("")", R"("x y")", R"("say \"hi\"")"}, {R"("a,b")", R"("a"b")"});
    check(R"({"type": "string", "pattern": "^\\\"\\w+\\\"$"})", {R"("\"word_1\"")"}, {R"(""word"")", R"("\"a b\"")"});
    check(R"({"type": "string", "pattern": "^\\S+@\\S+\\.[a-z]{2,}$"})", {R"("ada@example.org")"}, {R"("ada@example")", R"("a da@x.org")"});
    check(R"({"type": "string", "pattern": "^[\\u00e9\\-x]{2}$"})", {"\"\xC3\xA9-\"", R"("xx")", R"("-x")"}, {R"("ab")", R"("x")"});
    check(R"({"type": "string", "pattern": "^a{2,}b??$"})", {R"("aa")", R"("aaab")"}, {R"("a")", R"("aabb")"});
    check(R"({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[0-9]{3}$"}}, "required": ["code"]})",
          {R"({"code": "007"})"}, {R"({"code": "07"})", R"({"code": 7})"});
}

TEST_CASE("json schema: patterns that cannot be translated or do not parse are refused with a message", "[grammar][json-schema]") {
    const std::pair<const char *, specula_status> cases[] = {
        {"^(a)\\\\1$", SPECULA_ERR_UNSUPPORTED},      // a backreference
        {"^(?=a)a$", SPECULA_ERR_UNSUPPORTED},        // a lookahead
        {"^a\\\\bb$", SPECULA_ERR_UNSUPPORTED},       // a word boundary
        {"^a$|^b$", SPECULA_ERR_UNSUPPORTED},         // anchors inside
        {"^a{1,20000}$", SPECULA_ERR_UNSUPPORTED},    // past the grammar's repetition bound
        {"^(a$", SPECULA_ERR_INVALID_ARGUMENT},       // unclosed group
        {"^a)$", SPECULA_ERR_INVALID_ARGUMENT},       // unmatched parenthesis
        {"^[a-$", SPECULA_ERR_INVALID_ARGUMENT},      // unclosed class
        {"^[z-a]$", SPECULA_ERR_INVALID_ARGUMENT},    // range out of order
        {"^*a$", SPECULA_ERR_INVALID_ARGUMENT},       // nothing to repeat
        {"^a**$", SPECULA_ERR_INVALID_ARGUMENT},      // a quantifier after a quantifier
        {"^a{3,1}$", SPECULA_ERR_INVALID_ARGUMENT},   // n < m
        {"^\\\\q$", SPECULA_ERR_INVALID_ARGUMENT},    // unknown escape
        {"^\\\\x4$", SPECULA_ERR_INVALID_ARGUMENT},   // truncated escape
        {"^\\\\n$", SPECULA_ERR_INVALID_ARGUMENT},    // a control character JSON would escape
    };
    for (const auto &[pattern, want] : cases) {
        std::string message;
        const std::string schema = std::string(R"({"type": "string", "pattern": ")") + pattern + "\"}";
        INFO(schema);
        CHECK(status_of(schema, &message) == want);
        CHECK_THAT(message, Catch::Contains("pattern"));
    }
    std::string message;
    CHECK(status_of(R"({"type": "string", "pattern": 5})", &message) == SPECULA_ERR_INVALID_ARGUMENT);
}
