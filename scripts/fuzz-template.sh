#!/usr/bin/env bash
# fuzz-template.sh MODE [SECONDS] [LIBFUZZER_ARGS...]: fuzzes the chat-template engine (c/template)
# with libFuzzer under ASan and UBSan on one core (c/template/template_fuzz.c), MODE one of
#   source   arbitrary bytes as a template, rendered against a fixed context (with a dictionary of
#            Jinja2's tags, operators, filters and tests)
#   context  arbitrary bytes as the context JSON of fixed real-world templates
# Work directory FUZZ_DIR (default ${TMPDIR:-/tmp}/ferrite-fuzz-template-MODE) keeps the corpus;
# crashes land in $FUZZ_DIR/crashes/ and make the script exit 1. Seeds: the 70 real templates of
# the data directory (scripts/template/fetch-templates.sh) for source, the golden cases' contexts
# (testdata/template/contexts.json) for context. EVIDENCE: C-TMPL-003
set -euo pipefail

mode=${1:?usage: fuzz-template.sh source|context [SECONDS]}
case "$mode" in source|context) ;; *) echo "fuzz-template.sh: mode source or context" >&2; exit 2 ;; esac
secs=${2:-60}
shift 2 || shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FUZZ_DIR:-${TMPDIR:-/tmp}/ferrite-fuzz-template-$mode}
CLANG=${CLANG:-clang}
mkdir -p "$dir/corpus" "$dir/seeds" "$dir/crashes"

srcs=("$root/c/core/status.c")
for f in "$root"/c/template/*.c; do
  case "$f" in *_test.c|*_fuzz.c) ;; *) srcs+=("$f") ;; esac
done
templates="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/templates"
python3 - "$mode" "$templates" "$root/testdata/template/contexts.json" "$dir/seeds" <<'PY'
import json, os, sys
mode, templates, contexts, out = sys.argv[1:]
if mode == "source":
    if os.path.isdir(templates):
        for f in sorted(os.listdir(templates)):
            if f.endswith(".jinja"):
                open(os.path.join(out, f), "wb").write(open(os.path.join(templates, f), "rb").read())
    for i, t in enumerate(["{{ x }}", "{% for m in messages %}{{ m.role }}{% endfor %}", "{% set ns = namespace(a=1) %}{{ ns.a }}",
                           "{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ m(1) }}", "{{ tools|tojson(indent=2) }}"]):
        open(os.path.join(out, f"small{i}"), "w").write(t)
else:
    for i, (name, ctx) in enumerate(sorted(json.load(open(contexts, encoding="utf-8"))["contexts"].items())):
        for k in range(3):
            open(os.path.join(out, f"{name}-{k}"), "wb").write(bytes([k]) + json.dumps(ctx, ensure_ascii=False).encode())
        open(os.path.join(out, f"x-{i}"), "wb").write(bytes([2]) + json.dumps({"x": ctx["messages"]}).encode())
PY
dict=()
if [ "$mode" = source ]; then
  printf '%s\n' '"{{"' '"}}"' '"{%"' '"%}"' '"{#"' '"#}"' '"{%-"' '"-%}"' '"{{-"' '"-}}"' '"{%+"' '" if "' '" else "' \
    '" elif "' '"endif"' '" for "' '" in "' '"endfor"' '"set "' '"endset"' '"macro "' '"endmacro"' '"call"' '"endcall"' \
    '"filter "' '"endfilter"' '"break"' '"continue"' '"generation"' '"endgeneration"' '"namespace("' '"range("' \
    '"loop.index"' '"loop.last"' '"|tojson"' '"|trim"' '"|join"' '"|map"' '"|selectattr"' '"|default"' '"|length"' \
    '"|safe"' '"|items"' '"|dictsort"' '"|indent"' '" is defined"' '" is not none"' '" is string"' '" is mapping"' \
    '" and "' '" or "' '" not "' '"~"' '"**"' '"//"' '"[::-1]"' '".split("' '".strip("' '".items()"' '".get("' \
    '"messages"' '"caller()"' '"raise_exception("' '"strftime_now("' '"\x0a"' >"$dir/template.dict"
  dict=(-dict="$dir/template.dict")
fi
echo "fuzz-template: building $mode in $dir"
"$CLANG" -std=c11 -D_GNU_SOURCE -g -O1 -I"$root/ffi" -I"$root/c" -DFERI_FUZZ_$(echo "$mode" | tr a-z A-Z) \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$root/c/template/template_fuzz.c" "${srcs[@]}" -lm -o "$dir/fuzz"
echo "fuzz-template: running $mode for $secs s"
set +e
"$dir/fuzz" "$dir/corpus" "$dir/seeds" -max_total_time="$secs" -max_len=16384 -timeout=20 -rss_limit_mb=2048 \
  -artifact_prefix="$dir/crashes/" -print_final_stats=1 "${dict[@]}" "$@" 2>&1 | tail -25
rc=${PIPESTATUS[0]}
set -e
for f in "$dir/crashes/"slow-unit-*; do [ -e "$f" ] && echo "fuzz-template: slow input (not a failure): $f" >&2; done
if ls "$dir/crashes/"{crash,leak,timeout,oom}-* >/dev/null 2>&1; then echo "fuzz-template: crashes in $dir/crashes" >&2; exit 1; fi
exit "$rc"
