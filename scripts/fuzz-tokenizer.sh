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

"$root/scripts/fuzz-run.sh" "fuzz-tokenizer $mode" "$dir" fuzz "$secs" 65536 "$@"
