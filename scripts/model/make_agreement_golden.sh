#!/usr/bin/env bash
# llama.cpp's greedy decoding of 10 prompts x 64 tokens on the real model, with the top-5 logits of
# every step: the reference c/model/llama_test.c checks ferrite against, teacher-forced (ferrite
# is fed llama.cpp's tokens and must pick the same argmax wherever llama.cpp's top-2 margin exceeds
# 0.5, and at 98% of all positions). The peer comes from
# scripts/peers/build-llamacpp.sh.
# With TYPE (q4_k_m, q5_k_m, q6_k, q8_0, q2_k, iq4_xs: the files of scripts/model/make-quant-files.sh)
# the same reference for smollm2-135m-instruct-TYPE.gguf, into testdata/model/smollm2-TYPE-agreement.txt;
# without it the Q4_1 file as fetched, into testdata/model/smollm2-agreement.txt.
# usage: scripts/model/make_agreement_golden.sh [TYPE]
set -euo pipefail
type=${1:-q4_1}
# llama.cpp's threads (2 as before; its output is the same with 1, which a loaded machine runs
# far faster: 2 spinning threads on 2 busy cores)
threads=${FERRITE_PEER_THREADS:-2}
[[ "$threads" =~ ^[1-9][0-9]?$ ]] || { echo "FERRITE_PEER_THREADS must be 1..99" >&2; exit 2; }
[[ "$type" =~ ^[a-z0-9_]+$ ]] && [ $# -le 1 ] || { echo "usage: scripts/model/make_agreement_golden.sh [TYPE]" >&2; exit 2; }
golden=smollm2-agreement.txt
[ "$type" = q4_1 ] || golden=smollm2-$type-agreement.txt
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$("$root/scripts/peers/build-llamacpp.sh") # builds the peer on first use (with this CPU's ISAs)
model="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/smollm2-135m-instruct-$type.gguf"
[ -f "$model" ] || { echo "make_agreement_golden.sh: no $model (scripts/model/make-quant-files.sh makes the requantized ones)" >&2; exit 1; }
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-greedy"
out="$root/testdata/model/$golden"
: > "$out"
while IFS= read -r prompt; do
  "$peer/llamacpp-greedy" "$model" "$prompt" 64 "$threads" 2>/dev/null >> "$out"
done <<'PROMPTS'
The capital of France is
Once upon a time, in a small village by the sea,
def fibonacci(n):
The three primary colors are
In 1969, the first humans
Water boils at a temperature of
My favourite recipe for pancakes starts with
The mitochondria is the powerhouse of the cell because
Dear hiring manager, I am writing to apply for
The quick brown fox
PROMPTS
"$root/scripts/peers/record-peer.sh" "$peer" "$golden"
grep -c '^prompt' "$out"
