#!/usr/bin/env bash
# Greedy decoding by llama.cpp on the real model, the reference c/model/llama_test.c compares
# ferrite's forward pass with: the prompt's ids, then per step the chosen token and the top-5
# logits. Builds scripts/model/llamacpp_greedy.cpp against the peer's libllama
# (scripts/peers/build-llamacpp.sh) and writes testdata/model/.
#
# With TYPE (q4_k_m, q5_k_m, q6_k, q8_0, q2_k, iq4_xs: the files of scripts/model/make-quant-files.sh)
# the same reference for smollm2-135m-instruct-TYPE.gguf, into testdata/model/smollm2-TYPE-greedy.txt;
# without it the Q4_1 file as fetched, into testdata/model/smollm2-greedy.txt.
# usage: scripts/model/make_greedy_golden.sh [TYPE]
set -euo pipefail
type=${1:-q4_1}
# llama.cpp's threads (2 as before; its output is the same with 1, which a loaded machine runs
# far faster: 2 spinning threads on 2 busy cores)
threads=${FERRITE_PEER_THREADS:-2}
[[ "$threads" =~ ^[1-9][0-9]?$ ]] || { echo "FERRITE_PEER_THREADS must be 1..99" >&2; exit 2; }
[[ "$type" =~ ^[a-z0-9_]+$ ]] && [ $# -le 1 ] || { echo "usage: scripts/model/make_greedy_golden.sh [TYPE]" >&2; exit 2; }
golden=smollm2-greedy.txt
[ "$type" = q4_1 ] || golden=smollm2-$type-greedy.txt
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$("$root/scripts/peers/build-llamacpp.sh") # builds the peer on first use (with this CPU's ISAs)
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
[ -f "$data/smollm2-135m-instruct-$type.gguf" ] || { echo "make_greedy_golden.sh: no $data/smollm2-135m-instruct-$type.gguf (scripts/model/make-quant-files.sh makes the requantized ones)" >&2; exit 1; }
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-greedy"
"$peer/llamacpp-greedy" "$data/smollm2-135m-instruct-$type.gguf" "The capital of France is" 8 "$threads" 2>/dev/null \
  > "$root/testdata/model/$golden"
"$root/scripts/peers/record-peer.sh" "$peer" "$golden"
cat "$root/testdata/model/$golden"
