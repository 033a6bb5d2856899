#!/usr/bin/env python3
"""extract_llamacpp_cases.py: llama.cpp's own chat-template test cases as JSON.

Reads tests/test-chat-template.cpp (from the pinned llama-cpp-python sdist's vendored llama.cpp;
fetch-templates.sh passes it) and writes the jinja cases of its automated test (main_automated_tests:
the conversation, each case's template, bos/eos, extra messages and the expected jinja output) as
  {"conversation": [[role, content], ...],
   "cases": [{"name", "template", "expected", "bos_token", "eos_token", "extra": [[role, content]]}]}
A case marked supported_with_jinja = false is left out, as llama.cpp's jinja loop leaves it out.
The C++ initializer is read with a small lexer (string literals with their escapes and u8/U8C
forms, adjacent literals joined, braces, true/false), so nothing of llama.cpp's code is compiled.
Usage: extract_llamacpp_cases.py TEST_CPP OUT_JSON
"""
import json
import re
import sys

ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0", "a": "\a", "b": "\b",
       "f": "\f", "v": "\v", "?": "?"}


def lex(src):
    """Tokens: ('str', text), ('bool', v), ('{',), ('}',), (',',), ('word', w). Comments dropped."""
    i, n, out = 0, len(src), []
    while i < n:
        c = src[i]
        if src.startswith("/*", i):
            i = src.index("*/", i) + 2
        elif src.startswith("//", i):
            i = src.index("\n", i)
        elif c.isspace():
            i += 1
        elif c == '"' or src.startswith('u8"', i):
            i = src.index('"', i) + 1
            buf = bytearray()
            while src[i] != '"':
                if src[i] == "\\":
                    e = src[i + 1]
                    if e == "x":
                        m = re.match(r"[0-9a-fA-F]+", src[i + 2:])
                        buf.append(int(m.group(0), 16))
                        i += 2 + len(m.group(0))
                        continue
                    if e in "uU":
                        k = 4 if e == "u" else 8
                        buf += chr(int(src[i + 2:i + 2 + k], 16)).encode()
                        i += 2 + k
                        continue
                    buf += ESC[e].encode()
                    i += 2
                else:
                    buf += src[i].encode()
                    i += 1
            i += 1
            text = buf.decode("utf-8")
            if out and out[-1][0] == "str":  # adjacent literals are one string
                out[-1] = ("str", out[-1][1] + text)
            else:
                out.append(("str", text))
        elif c in "{},()":
            out.append((c,))
            i += 1
        else:
            m = re.match(r"[A-Za-z_][A-Za-z_0-9]*", src[i:])
            if not m:
                raise SystemExit(f"extract: unexpected {src[i:i + 40]!r}")
            w = m.group(0)
            out.append(("bool", w == "true") if w in ("true", "false") else ("word", w))
            i += len(w)
    return out


def parse(tokens, i=0):
    """A brace list from tokens[i] ('{') into nested Python lists; U8C(x) is x."""
    assert tokens[i] == ("{",), tokens[i]
    i += 1
    items = []
    while tokens[i] != ("}",):
        t = tokens[i]
        if t == ("{",):
            v, i = parse(tokens, i)
        elif t == ("word", "U8C"):
            assert tokens[i + 1] == ("(",) and tokens[i + 2][0] == "str" and tokens[i + 3] == (")",)
            v, i = tokens[i + 2][1], i + 4
            if tokens[i][0] == "str":  # U8C("a") "b": joined as literals are
                v, i = v + tokens[i][1], i + 1
        elif t[0] in ("str", "bool"):
            v, i = t[1], i + 1
        else:
            raise SystemExit(f"extract: unexpected token {t}")
        items.append(v)
        if tokens[i] == (",",):
            i += 1
    return items, i + 1


def main():
    src = open(sys.argv[1], encoding="utf-8").read()
    body = src[src.index("int main_automated_tests"):]
    conv_at = body.index("std::vector<llama_chat_message> conversation")
    conv, _ = parse(lex(body[body.index("{", conv_at):body.index("};", conv_at) + 1]))
    cases_at = body.index("std::vector<TestCase> test_cases")
    start = body.index("{", cases_at)
    tokens = lex(body[start:body.index("\n    };", start) + 6])
    raw, _ = parse(tokens)
    cases = []
    for c in raw:
        # members not given keep TestCase's defaults (aggregate initialization)
        name, tmpl, expected, expected_jinja, bos, eos, supported, extra = c + ["", "", "", "", True, []][len(c) - 2:]
        if not supported:
            continue
        cases.append({"name": name, "template": tmpl, "expected": expected_jinja or expected,
                      "bos_token": bos, "eos_token": eos, "extra": extra})
    json.dump({"source": "llama.cpp tests/test-chat-template.cpp (llama-cpp-python 0.3.36 sdist)",
               "conversation": conv, "cases": cases}, open(sys.argv[2], "w"), ensure_ascii=False, indent=1)
    print(f"extract_llamacpp_cases: {len(cases)} jinja cases of {len(raw)}", file=sys.stderr)


if __name__ == "__main__":
    main()
