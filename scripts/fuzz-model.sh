#!/usr/bin/env bash
# fuzz-model.sh [SECONDS] [LIBFUZZER_ARGS...]: fuzzes the model loader (c/model/llama_fuzz.c: GGUF
# images turned into a Llama model, small ones run one forward step) with libFuzzer under ASan and
# UBSan. Seeds are tiny models (c/model/tiny.c). Work directory FUZZ_DIR (default
# ${TMPDIR:-/tmp}/ferrite-fuzz-model); crashes land in $FUZZ_DIR/crashes/ and make it exit 1.
# EVIDENCE: C-ENG-003, C-GEM-012
set -euo pipefail
secs=${1:-60}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FUZZ_DIR:-${TMPDIR:-/tmp}/ferrite-fuzz-model}
CLANG=${CLANG:-clang}
mkdir -p "$dir/corpus" "$dir/seeds" "$dir/crashes"
srcs=()
for f in "$root"/c/core/*.c "$root"/c/kernels/*.c "$root"/c/mem/*.c "$root"/c/kv/*.c "$root"/c/weights/*.c "$root"/c/gguf/gguf.c \
         "$root"/c/tokenizer/*.c "$root"/c/model/*.c; do
  case "$f" in *_test.c|*_fuzz.c) ;; *) srcs+=("$f") ;; esac
done
flags=(-std=c11 -D_GNU_SOURCE -g -O1 -ffp-contract=off -I"$root/ffi" -I"$root/c")
libs=(-lpcre2-8 -lcjson -lutf8proc -lm -lpthread -ldl)
echo "fuzz-model: building in $dir"
"$CLANG" "${flags[@]}" -DFERI_FUZZ_SEED_MAIN "$root/c/model/llama_fuzz.c" "${srcs[@]}" "${libs[@]}" -o "$dir/seeds_main"
"$CLANG" "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$root/c/model/llama_fuzz.c" "${srcs[@]}" "${libs[@]}" -o "$dir/fuzz"
"$dir/seeds_main" "$dir/seeds"
"$root/scripts/fuzz-run.sh" fuzz-model "$dir" fuzz "$secs" 131072 "$@"
