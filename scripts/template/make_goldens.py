#!/usr/bin/env python3
"""Renders real chat templates over the committed message cases with Jinja2, exactly as Hugging Face
transformers 5.25.0's `tokenizer.apply_chat_template(conversation, tools=..., add_generation_prompt=...,
tokenize=False, **extra)` does, to make the goldens of ferrite's C template engine.

Reads:
  testdata/template/cases.json   {"bos_token", "eos_token", "now", "cases": [{"name", "messages",
                                 "tools"?, "add_generation_prompt", "extra"?}]}
  <templates>/*.jinja            llama.cpp's models/templates (scripts/template/fetch-templates.sh)
Writes into testdata/template/:
  goldens.jsonl   one line per (template, case), sorted by template file name then case name:
                  {"template": "<file>.jinja", "case": "<name>", "text": "<rendered>"} or, where
                  Jinja2 raised, {"template", "case", "error": str(exception), "error_type": its class}
  contexts.json   per case, the variables render() was given, after transformers' preprocessing
                  (below): what a C engine must be given to reproduce the goldens

What transformers does, and so this script (transformers/utils/chat_template_utils.py and
tokenization_utils_base.py of 5.25.0; transformers itself is not needed):
  * the environment: jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]); everything else
    Jinja2's defaults (Undefined prints as "", keep_trailing_newline=False, autoescape off)
  * AssistantTracker: the {% generation %}...{% endgeneration %} tag, which renders its body
    unchanged (it only records where the body was, for assistant masks)
  * filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=None, separators=None,
    sort_keys=False), keyword arguments passed through (Jinja2's own tojson HTML-escapes)
  * globals: raise_exception(msg) raises jinja2.exceptions.TemplateError(msg);
    strftime_now(fmt) = datetime.now().strftime(fmt), here the case file's fixed "now" (midnight);
    dict = a callable giving dict(*a, **kw) (with .fromkeys); namespace = jinja2's Namespace that
    refuses names starting with "_"
  * messages: keys whose value is None are dropped (content: null disappears); then a message with
    a non-None reasoning_content, thinking or reasoning (first found in that order) becomes
    {"thinking": r, **message, "reasoning_content": r}
  * render(messages=..., tools=... or None, documents=None, add_generation_prompt=...,
    bos_token=..., eos_token=..., **extra): the special tokens as the tokenizer's
    special_tokens_map gives them, the case's extra variables last (they win)

Usage: scripts/template/make-goldens.sh [--check] [--only FILE.jinja ...]
       (the wrapper installs the pinned Jinja2 and fetches the templates; it passes --templates)
  --check   render and compare with the files in testdata/template instead of writing them
            (exit 1 if they differ)
"""
import argparse
import collections
import copy
import datetime
import importlib.metadata
import json
import os
import sys

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(REPO, "testdata", "template")
VERSIONS = {"Jinja2": "3.1.6", "MarkupSafe": "3.0.4"}
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")  # transformers' _REASONING_FIELDS


class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag, without the index tracking (never active for rendering)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


class TemplateDict:
    """transformers' `dict` global: dict(...) and dict.fromkeys(...), nothing else reachable."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    """transformers' `namespace` global: refuses attribute names that start with an underscore."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute.")


def make_env(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


def prepare_messages(messages):
    """transformers' _normalize_chat_messages (drop None-valued keys) then _alias_reasoning_fields."""
    out = []
    for m in copy.deepcopy(messages):
        m = {k: v for k, v in m.items() if v is not None}
        r = next((m[k] for k in REASONING_FIELDS if m.get(k) is not None), None)
        if r is not None:
            m = {"thinking": r, **m, "reasoning_content": r}
        out.append(m)
    return out


def case_context(doc, case):
    ctx = {
        "messages": prepare_messages(case["messages"]),
        "tools": copy.deepcopy(case.get("tools")),
        "documents": None,
        "add_generation_prompt": case["add_generation_prompt"],
        "bos_token": doc["bos_token"],
        "eos_token": doc["eos_token"],
    }
    ctx.update(copy.deepcopy(case.get("extra", {})))
    return ctx


def render_all(template_dir, doc, only):
    now = datetime.datetime.strptime(doc["now"], "%Y-%m-%d")
    env = make_env(now)
    names = sorted(f for f in os.listdir(template_dir) if f.endswith(".jinja"))
    if only:
        missing = set(only) - set(names)
        if missing:
            sys.exit(f"make_goldens: no such template(s): {', '.join(sorted(missing))}")
        names = [n for n in names if n in only]
    cases = sorted(doc["cases"], key=lambda c: c["name"])
    if len({c["name"] for c in cases}) != len(cases):
        sys.exit("make_goldens: case names must be unique")
    contexts = {c["name"]: case_context(doc, c) for c in cases}
    rows = []
    for name in names:
        with open(os.path.join(template_dir, name), encoding="utf-8") as f:
            source = f.read()
        try:
            tmpl = env.from_string(source)
        except Exception as e:  # a template Jinja2 cannot compile: every case gets the error
            tmpl, compile_error = None, e
        for c in cases:
            row = {"template": name, "case": c["name"]}
            try:
                if tmpl is None:
                    raise compile_error
                # a fresh copy per render: nothing a template does can leak into the next one
                row["text"] = tmpl.render(**copy.deepcopy(contexts[c["name"]]))
            except Exception as e:
                row["error"] = str(e)
                row["error_type"] = type(e).__name__
            rows.append(row)
    return names, cases, contexts, rows


def dump_goldens(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def dump_contexts(doc, contexts):
    return json.dumps({"now": doc["now"], "contexts": contexts}, ensure_ascii=False, indent=1) + "\n"


def summary(names, cases, rows):
    errors = collections.defaultdict(list)
    for r in rows:
        if "error" in r:
            errors[r["template"]].append(r)
    n_err = sum(len(v) for v in errors.values())
    print(f"templates: {len(names)}  cases: {len(cases)}  renders: {len(rows)}  "
          f"ok: {len(rows) - n_err}  errors: {n_err}")
    for name in names:
        errs = errors.get(name)
        if not errs:
            continue
        print(f"  {name}: {len(errs)} error(s)")
        by_msg = collections.defaultdict(list)
        for r in errs:
            by_msg[(r["error_type"], r["error"].splitlines()[0][:150])].append(r["case"])
        for (etype, msg), which in by_msg.items():
            shown = "all cases" if len(which) == len(cases) else ", ".join(which)
            print(f"    {etype}: {msg}  [{shown}]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--templates", default=os.path.join(
        os.environ.get("FERRITE_DATA_DIR", os.path.expanduser("~/.cache/ferrite")), "templates"))
    ap.add_argument("--cases", default=os.path.join(OUT, "cases.json"))
    ap.add_argument("--only", nargs="+", metavar="FILE.jinja", help="render only these (writes nothing)")
    ap.add_argument("--check", action="store_true", help="compare with the files in testdata/template, write nothing")
    args = ap.parse_args()

    got = {k: importlib.metadata.version(k) for k in VERSIONS}
    if got != VERSIONS:
        sys.exit(f"make_goldens: need {VERSIONS}, have {got} (run scripts/template/make-goldens.sh)")
    with open(args.cases, encoding="utf-8") as f:
        doc = json.load(f)
    names, cases, contexts, rows = render_all(args.templates, doc, args.only)
    summary(names, cases, rows)

    outputs = {"goldens.jsonl": dump_goldens(rows), "contexts.json": dump_contexts(doc, contexts)}
    if args.only:
        return 0
    if args.check:
        bad = []
        for fname, text in outputs.items():
            path = os.path.join(OUT, fname)
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if old != text:
                bad.append(fname)
        if bad:
            print(f"make_goldens: {', '.join(bad)} differ(s) from what Jinja2 renders now", file=sys.stderr)
            return 1
        print("make_goldens: testdata/template matches what Jinja2 renders now")
        return 0
    for fname, text in outputs.items():
        path = os.path.join(OUT, fname)
        with open(path + ".tmp", "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
        print(f"wrote {os.path.relpath(path, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
