#!/usr/bin/env python3
"""Reads the cases of llama.cpp's tests/test-json-schema-to-grammar.cpp (a checkout of the release we compare with,
2025-02-20) and writes them as JSON lines: {"name", "expect": "SUCCESS"|"FAILURE", "schema", "grammar"}, where
"grammar" is the GBNF llama.cpp's converter produces for "schema" (its test asserts exactly that text).

bench_schema_grammars reads those lines and compares the language of our converter's grammar with llama.cpp's
(docs/grammars.md). llama.cpp's cases are its code's data: they are read from a checkout given by hand, never kept
in this repository.

    python3 bench/schema_cases_from_llama_cpp.py LLAMA_CPP/tests/test-json-schema-to-grammar.cpp > cases.jsonl
"""
import json
import re
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    text = open(sys.argv[1], encoding="utf-8").read()
    # test({ STATUS, "name", R"""(schema)""", R"""(grammar)""" });
    # A string is a raw literal R"""(...)""" or an ordinary "..." one (C escapes).
    literal = r'(R"""\(.*?\)"""|"(?:[^"\\]|\\.)*")'
    case = re.compile(r'test\(\{\s*(SUCCESS|FAILURE),\s*' + literal + r',\s*' + literal + r',\s*' + literal + r'\s*\}\);', re.S)

    def value(lit: str) -> str:
        if lit.startswith('R"""('):
            return lit[5:-4]
        return bytes(lit[1:-1], "utf-8").decode("unicode_escape")

    n = 0
    for m in case.finditer(text):
        status, name, schema, grammar = m.group(1), value(m.group(2)), value(m.group(3)), value(m.group(4))
        # The test trims each grammar line's indentation before comparing; do the same.
        grammar = "\n".join(line.strip() for line in grammar.strip().splitlines())
        print(json.dumps({"name": name, "expect": status, "schema": schema, "grammar": grammar}))
        n += 1
    print(f"{n} cases", file=sys.stderr)
    return 0 if n > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
