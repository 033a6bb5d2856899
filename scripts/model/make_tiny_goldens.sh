#!/usr/bin/env bash
# llama.cpp's logits for the seeded tiny models of the four architectures (llama, qwen2 with q/k/v
# biases, qwen3 with QK-norm and a separate head size, gemma3 with a sliding window of 16 on five
# of its six layers), teacher-forced on a fixed id sequence with f32 K and V: the reference
# c/model/arch_test.c checks ferrite's forward pass against. The models are written by `ferrite
# tiny-model` (seed 1; gemma3 by //c/model:tiny_write), so both programs run the same file. The peer (libllama,
# built with this CPU's instruction sets) comes from scripts/peers/build-llamacpp.sh.
# usage: scripts/model/make_tiny_goldens.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$("$root/scripts/peers/build-llamacpp.sh") # builds the peer on first use (with this CPU's ISAs)
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_logits.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-logits"
(cd "$root" && bazel build //c/tools:ferrite //c/model:tiny_write >/dev/null 2>&1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 24 ids: bytes of "the quick brown fox", the merges (256-259) and the end-of-text id (260)
ids="116 104 101 32 113 117 105 99 107 32 98 114 111 119 110 256 257 258 259 32 102 111 120 260"
for arch in llama qwen2 qwen3; do
  "$root/bazel-bin/c/tools/ferrite" tiny-model --arch "$arch" --seed 1 --out "$tmp/$arch.gguf" 2>/dev/null
  "$peer/llamacpp-logits" "$tmp/$arch.gguf" 1 $ids 2>/dev/null > "$root/testdata/model/tiny-$arch-logits.txt"
  echo "$arch: $(grep -c '^logits' "$root/testdata/model/tiny-$arch-logits.txt") rows"
done
"$root/bazel-bin/c/model/tiny_write" gemma3 1 "$tmp/gemma3.gguf"
"$peer/llamacpp-logits" "$tmp/gemma3.gguf" 1 $ids 2>/dev/null > "$root/testdata/model/tiny-gemma3-logits.txt"
echo "gemma3: $(grep -c '^logits' "$root/testdata/model/tiny-gemma3-logits.txt") rows"
"$root/scripts/peers/record-peer.sh" "$peer" tiny-llama-logits.txt tiny-qwen2-logits.txt tiny-qwen3-logits.txt \
  tiny-gemma3-logits.txt
