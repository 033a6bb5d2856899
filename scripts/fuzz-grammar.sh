#!/usr/bin/env bash
# fuzz-grammar.sh MODE [SECONDS] [LIBFUZZER_ARGS...]: fuzzes the grammar compilers and the matcher
# with libFuzzer under ASan and UBSan on one core (c/grammar/grammar_fuzz.c), MODE one of
#   regex  arbitrary regular expressions
#   json   arbitrary JSON schemas
#   gbnf   arbitrary GBNF grammars (with a dictionary of GBNF's punctuation)
#   matcher  a fixed grammar (chosen by the first byte) and arbitrary bytes as matcher operations
# Work directory FUZZ_DIR (default ${TMPDIR:-/tmp}/ferrite-fuzz-grammar-MODE) keeps the corpus;
# crashes land in $FUZZ_DIR/crashes/ and make the script exit 1. Seeds: the expressions and schemas
# of the golden files (testdata/grammar).
# EVIDENCE: C-GRM-006
set -euo pipefail

mode=${1:?usage: fuzz-grammar.sh regex|json|gbnf|matcher [SECONDS]}
case "$mode" in regex|json|gbnf|matcher) ;; *) echo "fuzz-grammar.sh: mode regex, json, gbnf or matcher" >&2; exit 2 ;; esac
secs=${2:-60}
shift 2 || shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FUZZ_DIR:-${TMPDIR:-/tmp}/ferrite-fuzz-grammar-$mode}
CLANG=${CLANG:-clang}
mkdir -p "$dir/corpus" "$dir/seeds" "$dir/crashes"

srcs=("$root/c/core/status.c" "$root/c/core/file.c" "$root/c/gguf/gguf.c")
for f in "$root"/c/grammar/*.c "$root"/c/tokenizer/*.c; do
  case "$f" in *_test.c|*_fuzz.c) ;; *) srcs+=("$f") ;; esac
done
# seeds from the golden files: one file per expression or schema
key=$(case "$mode" in regex) echo rx ;; json) echo schema ;; gbnf) echo gbnf ;; matcher) echo none ;; esac)
python3 - "$root/testdata/grammar" "$dir/seeds" "$key" <<'PY'
import json, os, sys
src, out, key = sys.argv[1:]
n = 0
if key == "none":  # the matcher mode: one seed per fixed grammar, a few operations each
    for g in range(4):
        open(os.path.join(out, f"seed{g}"), "wb").write(bytes([g] + [0, 1, 0, 2, 3, 5, 1, 97, 2, 1, 0, 7] * 3))
for f in sorted(os.listdir(src)):
    if not f.endswith(".txt"): continue
    for line in open(os.path.join(src, f), encoding="utf-8"):
        if line.startswith(key + " "):
            open(os.path.join(out, f"seed{n}"), "w", encoding="utf-8").write(json.loads(line[len(key) + 1:]))
            n += 1
PY
dict=()
if [ "$mode" = gbnf ]; then
  printf '%s\n' '"::="' '"root"' '" | "' '"("' '")"' '"*"' '"+"' '"?"' '"{2,5}"' '"{3}"' '"{1,}"' '"["' '"[^"' \
    '"]"' '"a-z"' '"\\x41"' '"\\u00e9"' '"\\U0001F600"' '"\\n"' '"\\\""' '"\\["' '"."' '"\""' '"\x0a"' \
    '"# c\x0a"' '" ::= "' '"ws"' '"x"' >"$dir/gbnf.dict"
  dict=(-dict="$dir/gbnf.dict")
fi
echo "fuzz-grammar: building $mode in $dir"
"$CLANG" -std=c11 -D_GNU_SOURCE -g -O1 -I"$root/ffi" -I"$root/c" -DFERI_FUZZ_$(echo "$mode" | tr a-z A-Z) \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$root/c/grammar/grammar_fuzz.c" "${srcs[@]}" -lpcre2-8 -lcjson -lutf8proc -lm -o "$dir/fuzz"
echo "fuzz-grammar: running $mode for $secs s"
set +e
"$dir/fuzz" "$dir/corpus" "$dir/seeds" -max_total_time="$secs" -max_len=4096 -timeout=20 -rss_limit_mb=2048 \
  -artifact_prefix="$dir/crashes/" -print_final_stats=1 "${dict[@]}" "$@" 2>&1 | tail -25
rc=${PIPESTATUS[0]}
set -e
# slow-unit-* files are inputs over libFuzzer's 10 s report threshold (bounded work, not a hang: the
# -timeout above fails those): listed, not failed
for f in "$dir/crashes/"slow-unit-*; do [ -e "$f" ] && echo "fuzz-grammar: slow input (not a failure): $f" >&2; done
if ls "$dir/crashes/"{crash,leak,timeout,oom}-* >/dev/null 2>&1; then echo "fuzz-grammar: crashes in $dir/crashes" >&2; exit 1; fi
exit "$rc"
