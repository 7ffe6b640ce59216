// A JSON schema's string "pattern" (an ECMAScript regular expression) as a GBNF expression of the JSON string's
// contents, as llama.cpp's json-schema-to-grammar translates patterns, but for the JSON text: a character the
// string may hold that JSON must escape (a quote, a backslash) is admitted in its escaped form (\" and \\), and
// control characters not at all.
//
// Supported: the whole pattern anchored (^...$, as llama.cpp requires), literals (UTF-8 too), `.` (any character
// but a line break), classes ([a-z_], [^,], with \d \w \s inside), \d \D \w \W \s \S, escaped punctuation and
// \t \n \r \f \v \xHH \uHHHH, groups ((...) and (?:...)), alternation, and the quantifiers * + ? {m} {m,} {m,n}
// (lazy ones mean the same set of strings). Refused with UNSUPPORTED: a pattern not anchored at both ends,
// backreferences, lookarounds, word boundaries, anchors inside it, named groups. Syntax errors (an unclosed group
// or class, a quantifier with nothing before it, a range out of order) are INVALID_ARGUMENT. A repeated group that
// can match the empty string (^(a|)*$) translates into a rule the grammar parser refuses as left-recursive
// (INVALID_ARGUMENT when the grammar is used).
#pragma once

#include <string>

namespace specula::internal {

// The expression (no rule name, no quotes around it) of the JSON-escaped strings `pattern` matches whole.
std::string json_pattern_to_gbnf(const std::string &pattern);

}  // namespace specula::internal
