#!/usr/bin/env bash
# Greedy decoding by llama.cpp on the real model, the reference c/model/llama_test.c compares
# ferrite's forward pass with: the prompt's ids, then per step the chosen token and the top-5
# logits. Builds scripts/model/llamacpp_greedy.cpp against the peer's libllama
# (scripts/peers/build-llamacpp.sh) and writes testdata/model/.
#
# usage: scripts/model/make_greedy_golden.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$("$root/scripts/peers/build-llamacpp.sh") # builds the peer on first use (with this CPU's ISAs)
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-greedy"
"$peer/llamacpp-greedy" "$data/smollm2-135m-instruct-q4_1.gguf" "The capital of France is" 8 2>/dev/null \
  > "$root/testdata/model/smollm2-greedy.txt"
"$root/scripts/peers/record-peer.sh" "$peer" smollm2-greedy.txt
cat "$root/testdata/model/smollm2-greedy.txt"
