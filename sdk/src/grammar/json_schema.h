// JSON Schema to a GBNF grammar (grammar.h) of the JSON text the schema admits, as llama.cpp's
// json-schema-to-grammar converts the schemas of its `json_schema` and `response_format` requests.
//
// Supported: "type" (object, array, string, number, integer, boolean, null, and lists of them), "properties" with
// "required" (required keys in their order, then any subset of the optional ones in theirs) and
// "additionalProperties" (false or absent: no other keys; true or a schema: other keys after those), "items" and
// "prefixItems" with "minItems"/"maxItems", "minLength"/"maxLength", "enum", "const", "anyOf"/"oneOf",
// "allOf" of objects, "$ref" into "#/$defs/..." or "#/definitions/..." (recursion included), the string formats
// date, time, date-time and uuid, a string's "pattern" (json_pattern.h), and an integer's "minimum"/"maximum" (and
// exclusive ones). An empty schema or
// {"type": "object"} admits any JSON object... as llama.cpp's converter. Text is compact JSON with optional
// whitespace after each value and punctuation (llama.cpp's `space` rule).
//
// Refused: text that is not JSON (Error INVALID_ARGUMENT "json schema: ..."), nesting deeper than 64, a "$ref" that
// does not resolve (INVALID_ARGUMENT), and features not supported (UNSUPPORTED: patterns json_pattern.h cannot
// translate, remote references; a number's bounds are ignored as llama.cpp ignores them).
#pragma once

#include <string>
#include <string_view>

namespace specula::internal {

// The grammar (start rule "root") of the JSON values `schema` (JSON text) admits.
std::string json_schema_to_grammar(std::string_view schema);

}  // namespace specula::internal
