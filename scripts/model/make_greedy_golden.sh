#!/usr/bin/env bash
# Greedy decoding by llama.cpp on the real model, the reference c/model/llama_test.c compares
# ferrite's forward pass with: the prompt's ids, then per step the chosen token and the top-5
# logits. Builds scripts/model/llamacpp_greedy.cpp against the libllama that
# scripts/tokenizer/make_goldens.py builds (run that first) and writes testdata/model/.
#
# usage: scripts/model/make_greedy_golden.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peer="${FERRITE_PEERS_DIR:-$HOME/.cache/ferrite-peers}/llama.cpp"
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
[ -f "$peer/build/bin/libllama.so" ] || { echo "no libllama in $peer: run scripts/tokenizer/make_goldens.py first" >&2; exit 1; }
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-greedy"
"$peer/llamacpp-greedy" "$data/smollm2-135m-instruct-q4_1.gguf" "The capital of France is" 8 2>/dev/null \
  > "$root/testdata/model/smollm2-greedy.txt"
cat "$root/testdata/model/smollm2-greedy.txt"
