#!/usr/bin/env bash
# Decode speed of ferrite and llama.cpp on the real model, one after the other in the same run
# (same prompt, greedy, the same thread count): the engine benchmark until the criterion one of
# issue 7 exists. Needs the libllama that scripts/tokenizer/make_goldens.py builds.
# usage: scripts/model/bench_decode.sh [TOKENS] [THREADS]
# EVIDENCE: C-ENG-006
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tokens=${1:-64}
threads=${2:-2}
peer="${FERRITE_PEERS_DIR:-$HOME/.cache/ferrite-peers}/llama.cpp"
model="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/smollm2-135m-instruct-q4_1.gguf"
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-greedy"
(cd "$root" && bazel build //c/tools:ferrite >/dev/null 2>&1)
prompt="The capital of France is"
for round in 1 2 3; do
  "$peer/llamacpp-greedy" "$model" "$prompt" "$tokens" 2>&1 >/dev/null | grep "^llama.cpp"
  "$root/bazel-bin/c/tools/ferrite" generate --model "$model" --prompt "$prompt" --max-tokens "$tokens" \
    --threads "$threads" 2>&1 >/dev/null | grep -o "prefill.*tok/s;.*decode [0-9]* tokens at [0-9.]* tok/s" | sed 's/^/ferrite: /'
done
