#!/usr/bin/env python3
"""Edits an abidw dump (stdin -> stdout) the way a change of specula.h would change it, for the ABI check's
self-test (tools/abi/abi.sh self-test): each edit is what abidw would write for the library after that change.

  remove-function NAME            the function is gone (symbol and declaration)
  add-function EXISTING NEW       a new function with EXISTING's signature
  insert-member STRUCT MEMBER     an int32 field inserted before MEMBER (the later fields move, the struct grows)
  append-member STRUCT            an int32 field appended at the end (the versioned-struct way)
  retype-parameter FUNC           FUNC's second parameter becomes a double
  soname NEW                      the library's SONAME is NEW
"""
import re
import sys


def struct_block(text, name):
    m = re.search(r"( *)<class-decl name='%s' size-in-bits='(\d+)'[^>]*>.*?\n\1</class-decl>\n" % re.escape(name), text, re.S)
    if not m:
        sys.exit(f"no struct {name} in the dump")
    return m


def function_block(text, name):
    m = re.search(r" *<function-decl name='%s' .*?</function-decl>\n" % re.escape(name), text, re.S)
    if not m:
        sys.exit(f"no function {name} in the dump")
    return m


def symbol_line(text, name):
    m = re.search(r" *<elf-symbol name='%s' [^\n]*\n" % re.escape(name), text)
    if not m:
        sys.exit(f"no symbol {name} in the dump")
    return m


def type_id_of(text, type_name):
    m = re.search(r"<type-decl name='%s' [^>]*id='([^']+)'" % re.escape(type_name), text)
    if not m:
        sys.exit(f"no type {type_name} in the dump")
    return m.group(1)


def main():
    op, args = sys.argv[1], sys.argv[2:]
    text = sys.stdin.read()
    if op == "remove-function":
        text = text.replace(symbol_line(text, args[0]).group(0), "", 1)
        text = text.replace(function_block(text, args[0]).group(0), "", 1)
    elif op == "add-function":
        old, new = args
        sym = symbol_line(text, old).group(0)
        text = text.replace(sym, sym + sym.replace(f"'{old}'", f"'{new}'"), 1)
        fn = function_block(text, old).group(0)
        text = text.replace(fn, fn + fn.replace(f"'{old}'", f"'{new}'").replace(f"'{old}@@", f"'{new}@@"), 1)
    elif op in ("insert-member", "append-member"):
        m = struct_block(text, args[0])
        block, size = m.group(0), int(m.group(2))
        members = list(re.finditer(r"( *)<data-member access='public' layout-offset-in-bits='(\d+)'>\n *<var-decl name='([^']+)' type-id='([^']+)'[^\n]*\n *</data-member>\n", block))
        indent = members[0].group(1)
        if op == "insert-member":
            target = next((x for x in members if x.group(3) == args[1]), None)
            if target is None:
                sys.exit(f"no member {args[1]} in {args[0]}")
            at = int(target.group(2))
            new_member = (f"{indent}<data-member access='public' layout-offset-in-bits='{at}'>\n{indent}  <var-decl name='inserted' "
                          f"type-id='{target.group(4)}' visibility='default'/>\n{indent}</data-member>\n")
            out = block[:target.start()] + new_member
            for x in members[members.index(target):]:
                out += x.group(0).replace(f"layout-offset-in-bits='{x.group(2)}'", f"layout-offset-in-bits='{int(x.group(2)) + 64}'", 1)
            out += block[members[-1].end():]
            out = out.replace(f"size-in-bits='{size}'", f"size-in-bits='{size + 64}'", 1)
        else:
            int_id = type_id_of(text, "int")
            new_member = (f"{indent}<data-member access='public' layout-offset-in-bits='{size}'>\n{indent}  <var-decl name='appended' "
                          f"type-id='{int_id}' visibility='default'/>\n{indent}</data-member>\n")
            out = block[:members[-1].end()] + new_member + block[members[-1].end():]
            out = out.replace(f"size-in-bits='{size}'", f"size-in-bits='{size + 64}'", 1)
        text = text.replace(block, out, 1)
    elif op == "retype-parameter":
        fn = function_block(text, args[0]).group(0)
        params = list(re.finditer(r"<parameter type-id='([^']+)'", fn))
        if len(params) < 2:
            sys.exit(f"{args[0]} has fewer than two parameters")
        p = params[1]
        new_fn = fn[:p.start(1)] + type_id_of(text, "double") + fn[p.end(1):]
        text = text.replace(fn, new_fn, 1)
    elif op == "soname":
        text = re.sub(r"soname='[^']*'", f"soname='{args[0]}'", text, count=1)
    else:
        sys.exit(f"unknown edit {op}")
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
