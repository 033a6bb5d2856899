#!/usr/bin/env bash
# quant-vs-ggml.sh [BLOCKS]: ferrite's block decoders (c/kernels/quant.c) against ggml's
# dequantize_row_* from the llama.cpp peer's libggml-base (scripts/peers/build-llamacpp.sh), bit for
# bit, on BLOCKS random blocks per format (default 20000). Exit 0: all equal; 1: a mismatch; 2: no
# peer build or a bad argument.
# EVIDENCE: C-Q-101
set -euo pipefail
blocks=${1:-20000}
case $blocks in ''|*[!0-9]*) echo "usage: $0 [BLOCKS]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
lib=${FERRITE_PEERS_DIR:-$HOME/.cache/ferrite-peers}/llama.cpp/build/bin/libggml-base.so
[ -f "$lib" ] || { echo "quant-vs-ggml: $lib not built (scripts/peers/build-llamacpp.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Wall -Wextra -Werror -I"$root/ffi" -I"$root/c" \
  "$root/scripts/kernels/quant_vs_ggml.c" "$root/c/kernels/quant.c" "$root/c/core/dtype.c" \
  "$root/c/core/status.c" -o "$tmp/quant_vs_ggml" -ldl -lm
"$tmp/quant_vs_ggml" "$lib" "$blocks"
