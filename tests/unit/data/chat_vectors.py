"""What make_qwen3_chat_vectors.py and make_gemma3_chat_vectors.py share: a chat template (a .jinja file beside them)
in jinja2 configured as Hugging Face transformers' apply_chat_template configures it, and C string literals for the
generated .inc files."""
import os

import jinja2
import jinja2.ext
import jinja2.sandbox

here = os.path.dirname(os.path.abspath(__file__))


def load_template(file_name):
    """(the template's text, the compiled template); raise_exception raises as transformers' does."""
    text = open(os.path.join(here, file_name), encoding="utf-8").read()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return text, env.from_string(text)


def c_string(s):
    """s as a C string literal: printable ASCII as is, quotes, backslashes and newlines escaped, other bytes in octal."""
    out = []
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c == "\\": out.append("\\\\")
        elif c == "\"": out.append("\\\"")
        elif c == "\n": out.append("\\n")
        elif 32 <= ch < 127: out.append(c)
        else: out.append("\\%03o" % ch)
    return "\"" + "".join(out) + "\""


def write_inc(file_name, lines):
    with open(os.path.join(here, file_name), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
