#!/usr/bin/env bash
# fuzz-quant.sh [SECONDS] [LIBFUZZER_ARGS...]: fuzzes the block-quantized entry points
# (c/kernels/quant_fuzz.c: fer_qmatrix_check, fer_dequantize, fer_embedding_quant and the fused
# GEMV of every block format) with libFuzzer under ASan and UBSan for SECONDS (default 60) on one
# core. Work directory FUZZ_DIR (default ${TMPDIR:-/tmp}/ferrite-fuzz-quant) keeps the corpus;
# crashes land in $FUZZ_DIR/crashes/ and make the script exit 1.
set -euo pipefail
secs=${1:-60}
shift || true
case $secs in ''|*[!0-9]*) echo "usage: $0 [SECONDS] [LIBFUZZER_ARGS...]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${FUZZ_DIR:-${TMPDIR:-/tmp}/ferrite-fuzz-quant}
CLANG=${CLANG:-clang}
mkdir -p "$dir/corpus" "$dir/seeds" "$dir/crashes"

# what the harness reaches (the matmul tables, embedding's row copies, the pool), not every kernel.
# The per-ISA files are compiled apart at -O0 without coverage: clang -O1 with ASan and UBSan spent
# over 20 minutes on matmul_avx2.c's inlined per-format kernels (at -O0: 40 s); they keep ASan.
srcs=()
for f in embedding kernel_util matmul matmul_portable quant rows rowops_portable; do
  srcs+=("$root/c/kernels/$f.c")
done
isa_srcs=("$root/c/kernels/matmul_avx2.c" "$root/c/kernels/rowops_avx2.c")
[ -f "$root/c/kernels/matmul_avx512.c" ] && isa_srcs+=("$root/c/kernels/matmul_avx512.c")
for f in "$root"/c/core/*.c; do
  case $f in *_test.c) ;; *) srcs+=("$f") ;; esac
done
# -Wno-unused-function: clang flags helpers the per-ISA files keep for other levels
flags=(-std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -Wno-unused-function -ffp-contract=off -I"$root/ffi" -I"$root/c")

echo "fuzz-quant: building in $dir"
# the seed writer needs only the block tables
"$CLANG" "${flags[@]}" -O1 -DFERI_QUANT_SEED_MAIN "$root/c/kernels/quant_fuzz.c" "$root/c/kernels/quant.c" \
  "$root/c/core/dtype.c" "$root/c/core/status.c" -o "$dir/quant_seeds" -lm
objs=()
for f in "${isa_srcs[@]}"; do
  o="$dir/$(basename "$f" .c).o"
  "$CLANG" "${flags[@]}" -O0 -fsanitize=address,undefined -fno-sanitize-recover=all -c "$f" -o "$o"
  objs+=("$o")
done
"$CLANG" "${flags[@]}" -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  "$root/c/kernels/quant_fuzz.c" "${srcs[@]}" "${objs[@]}" -o "$dir/quant_fuzz" -lm -lpthread
"$dir/quant_seeds" "$dir/seeds"

"$root/scripts/fuzz-run.sh" fuzz-quant "$dir" quant_fuzz "$secs" 4096 "$@"
