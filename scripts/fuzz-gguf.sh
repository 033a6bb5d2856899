#!/usr/bin/env bash
# fuzz-gguf.sh [SECONDS] [LIBFUZZER_ARGS...]: fuzzes the GGUF parser (c/gguf/gguf_fuzz.c) with
# libFuzzer under ASan and UBSan for SECONDS (default 60) on one core.
#
# Builds the harness and a seed writer with clang, writes a few valid images as seeds, then runs
# with -max_total_time. The work directory (FUZZ_DIR, default ${TMPDIR:-/tmp}/ferrite-fuzz-gguf)
# keeps the corpus between runs; crashes land in $FUZZ_DIR/crashes/ and make the script exit 1.
# Reproduce one with: $FUZZ_DIR/gguf_fuzz $FUZZ_DIR/crashes/crash-...
set -euo pipefail

secs=${1:-60}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FUZZ_DIR:-${TMPDIR:-/tmp}/ferrite-fuzz-gguf}
CLANG=${CLANG:-clang}
mkdir -p "$dir/corpus" "$dir/seeds" "$dir/crashes"

srcs=("$root/c/gguf/gguf.c" "$root/c/core/status.c")
flags=(-std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -I"$root/ffi" -I"$root/c")

echo "fuzz-gguf: building in $dir"
"$CLANG" "${flags[@]}" -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -DFERI_GGUF_SEED_MAIN \
  "$root/c/gguf/gguf_fuzz.c" "${srcs[@]}" -o "$dir/gguf_seeds"
"$CLANG" "${flags[@]}" -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$root/c/gguf/gguf_fuzz.c" "${srcs[@]}" -o "$dir/gguf_fuzz"
"$dir/gguf_seeds" "$dir/seeds"

cat > "$dir/gguf.dict" <<'DICT'
"GGUF"
"general.alignment"
"general.architecture"
"tokenizer.ggml.tokens"
"\x03\x00\x00\x00"
"\x02\x00\x00\x00"
"\x09\x00\x00\x00"
"\x08\x00\x00\x00"
"\x20\x00\x00\x00"
"\xff\xff\xff\xff\xff\xff\xff\xff"
"\x00\x00\x00\x00\x00\x00\x00\x40"
DICT

"$root/scripts/fuzz-run.sh" fuzz-gguf "$dir" gguf_fuzz "$secs" 16384 -dict=gguf.dict "$@"
