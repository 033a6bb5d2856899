#!/usr/bin/env bash
# How close ferrite's routes and llama.cpp come to the exact computation on each real file
# (issue 30; c/engine/faithfulness.h says what is measured): the corpus (the committed prose's
# first N_PROSE tokens and testdata/model/faithfulness-chats.txt rendered with the file's chat
# template) is teacher-forced through ferrite's exact route with f32 KV (the reference), through
# ferrite's other routes, and through llama.cpp as its users run it (the peer of
# scripts/peers/build-llamacpp.sh, default context parameters: f16 K/V, its flash-attention
# choice), and the KL divergence to the reference and the top-1 agreement are printed per route.
# The output (stdout) is the format of testdata/model/faithfulness.txt, the golden that
# c/engine/faithfulness_test.c keeps ferrite to.
#
# usage: scripts/model/faithfulness.sh [ROUTES (i8/f16,i8/f32,i8/bf16,i8/q8_0,exact/f16,exact/bf16,exact/q8_0)] [FILE...]
#   FILE: a name under the data directory (default: every real file the tests use)
# env: FERRITE_DATA_DIR, FERRITE_PEERS_DIR, FERRITE_PEER_THREADS (2), N_PROSE (512), MAX_CHATS (0: all)
# The golden of the test is this with N_PROSE=128 MAX_CHATS=8 ROUTES=i8/f16 (the engine's default
# route: 8-bit activations, f16 K and V); docs/BENCHMARKS.md's table the defaults.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
routes=${1:-i8/f16,i8/f32,i8/bf16,i8/q8_0,exact/f16,exact/bf16,exact/q8_0}
shift || true
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(smollm2-135m-instruct-q4_1.gguf smollm2-135m-instruct-q4_k_m.gguf
  smollm2-135m-instruct-q5_k_m.gguf smollm2-135m-instruct-q6_k.gguf smollm2-135m-instruct-q8_0.gguf
  smollm2-135m-instruct-q2_k.gguf smollm2-135m-instruct-iq4_xs.gguf gemma3-270m-q4_k_m.gguf)
threads=${FERRITE_PEER_THREADS:-2}
n_prose=${N_PROSE:-512}
max_chats=${MAX_CHATS:-0}
[[ "$threads" =~ ^[1-9][0-9]?$ && "$n_prose" =~ ^[0-9]+$ && "$max_chats" =~ ^[0-9]+$ ]] \
  || { echo "FERRITE_PEER_THREADS 1..99, N_PROSE and MAX_CHATS counts" >&2; exit 2; }

peer=$("$root/scripts/peers/build-llamacpp.sh")
helper="$peer/llamacpp-kl-logits"
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_kl_logits.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$helper"
(cd "$root" && bazel build //c/engine:faithfulness >&2)
tool="$root/bazel-bin/c/engine/faithfulness"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# faithfulness: KL(exact route, f32 KV || route) per position, in nats, and top-1 agreement"
echo "# made by scripts/model/faithfulness.sh on $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# corpus: the first n_prose tokens of testdata/model/perplexity-text.txt and the first max_chats (0: all) conversations of testdata/model/faithfulness-chats.txt"
echo "corpus n_prose $n_prose max_chats $max_chats"
echo "# peer: $(grep -m1 '^llama.cpp' "$peer/build-flags.txt" 2>/dev/null || echo llama.cpp) ; $(grep -m1 'system_info\|isa' "$peer/build-flags.txt" 2>/dev/null | cut -c1-200)"
for f in "${files[@]}"; do
  model="$data/$f"
  [ -f "$model" ] || { echo "faithfulness.sh: no $model (scripts/setup.sh makes it)" >&2; exit 1; }
  template=()  # the Gemma 3 base file carries no chat template: ferrite's rendering of llama.cpp's gemma format
  [[ "$f" != gemma3-* ]] || template=(--chat-template "$root/testdata/template/gemma-turns.jinja")
  "$tool" --model "$model" "${template[@]}" --prose "$root/testdata/model/perplexity-text.txt" --n-prose "$n_prose" \
    --chats "$root/testdata/model/faithfulness-chats.txt" --max-chats "$max_chats" --write-corpus "$tmp/ids.txt" 2>/dev/null
  "$helper" "$model" "$threads" "$tmp/ids.txt" "$tmp/peer.bin" 2> "$tmp/peer.log" \
    || { tail -20 "$tmp/peer.log" >&2; exit 1; }
  fa=$(grep -q "Flash Attention enabled" "$tmp/peer.log" && echo "flash attention on" || echo "flash attention off")
  kv=$(grep -o "K ([a-z0-9_]*):.*V ([a-z0-9_]*)" "$tmp/peer.log" | head -1 | sed 's/:[^V]*/ /' || true)
  echo "# $f: llama.cpp ran with $fa, ${kv:-K/V type not reported}"
  "$tool" --model "$model" --corpus "$tmp/ids.txt" --threads "$threads" --routes "$routes" \
    --peer "llama.cpp=$tmp/peer.bin" | sed "s|^route |file $f route |"
  rm -f "$tmp/peer.bin"
done
