#!/usr/bin/env bash
# fuzz-tokenizer.sh MODE [SECONDS] [LIBFUZZER_ARGS...]: fuzzes the tokenizer with libFuzzer under
# ASan and UBSan on one core, MODE one of
#   encode  arbitrary text through encode / decode / streaming (c/tokenizer/tokenizer_fuzz.c); set
#           FERRITE_FUZZ_TOKENIZER to a tokenizer.json or GGUF to fuzz a real vocabulary
#   json    arbitrary tokenizer.json files
#   gguf    arbitrary GGUF images turned into tokenizers
# Work directory FUZZ_DIR (default ${TMPDIR:-/tmp}/ferrite-fuzz-tokenizer-MODE) keeps the corpus;
# crashes land in $FUZZ_DIR/crashes/ and make the script exit 1.
# EVIDENCE: C-TOK-013
set -euo pipefail

mode=${1:?usage: fuzz-tokenizer.sh encode|json|gguf [SECONDS]}
secs=${2:-60}
shift 2 || shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FUZZ_DIR:-${TMPDIR:-/tmp}/ferrite-fuzz-tokenizer-$mode}
CLANG=${CLANG:-clang}
mkdir -p "$dir/corpus" "$dir/seeds" "$dir/crashes"

srcs=("$root/c/gguf/gguf.c" "$root/c/core/status.c")
for f in "$root"/c/tokenizer/*.c; do
  case "$f" in *_test.c|*_fuzz.c) ;; *) srcs+=("$f") ;; esac
done
flags=(-std=c11 -D_GNU_SOURCE -g -I"$root/ffi" -I"$root/c")
libs=(-lpcre2-8 -lcjson -lutf8proc)
macro=FERI_FUZZ_$(echo "$mode" | tr a-z A-Z)

echo "fuzz-tokenizer: building $mode in $dir"
"$CLANG" "${flags[@]}" -O1 -DFERI_FUZZ_SEED_MAIN "$root/c/tokenizer/tokenizer_fuzz.c" "${srcs[@]}" "${libs[@]}" -o "$dir/seeds_main"
"$CLANG" "${flags[@]}" -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -D"$macro" \
  "$root/c/tokenizer/tokenizer_fuzz.c" "${srcs[@]}" "${libs[@]}" -o "$dir/fuzz"
case "$mode" in
  encode) head -c 4000 "$root/testdata/tokenizer/corpus.txt" | tr '\036' '\n' | split -l 8 - "$dir/seeds/text-" ;;
  json) "$dir/seeds_main" json "$dir/seeds" ;;
  gguf) "$dir/seeds_main" gguf "$dir/seeds" ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac

echo "fuzz-tokenizer: running $mode for ${secs}s"
set +e
(cd "$dir" && ./fuzz -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix=crashes/ "$@" corpus seeds 2>&1) | tee "$dir/last.log" |
  grep -E "^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$dir/crashes")" ]; then
  echo "fuzz-tokenizer: FAILED (exit $rc); log $dir/last.log, inputs in $dir/crashes/" >&2
  exit 1
fi
echo "fuzz-tokenizer: no crash in ${secs}s; corpus $(ls "$dir/corpus" | wc -l) inputs"
