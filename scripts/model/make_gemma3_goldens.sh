#!/usr/bin/env bash
# llama.cpp's references for Gemma 3 270M, on the real Q4_K_M file and on its F32 copy
# (scripts/model/make_gemma3_f32.py), the goldens c/model/gemma3_test.c checks ferrite against:
#   testdata/model/gemma3-{f32,q4km}-greedy.txt      greedy decoding of one prompt, 8 steps
#   testdata/model/gemma3-{f32,q4km}-agreement.txt   10 prompts x 64 greedy steps with top-5 logits
#   testdata/model/gemma3-{f32,q4km}-perplexity.txt  every position's NLL over 2,000 tokens of the
#                                                    committed prose (past the 512-token window)
# Every prompt starts with "<bos>" (the file sets add_bos_token; the drivers tokenize with special
# tokens parsed and add none themselves). The perplexity driver adds no BOS: both sides score the
# same ids. The peer comes from scripts/peers/build-llamacpp.sh; drivers are llamacpp_greedy.cpp and
# llamacpp_perplexity.cpp.
# usage: scripts/model/make_gemma3_goldens.sh [f32|q4km ...]   (default: both)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$("$root/scripts/peers/build-llamacpp.sh") # builds the peer on first use (with this CPU's ISAs)
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-greedy"
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_perplexity.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-perplexity"
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(f32 q4km)
for v in "${variants[@]}"; do
  case "$v" in
    f32) model="$data/gemma3-270m-f32.gguf" ;;
    q4km) model="$data/gemma3-270m-q4_k_m.gguf" ;;
    *) echo "make_gemma3_goldens: unknown variant '$v' (f32 or q4km)" >&2; exit 2 ;;
  esac
  [ -f "$model" ] || { echo "make_gemma3_goldens: $model missing (scripts/fetch-test-data.sh; scripts/model/make_gemma3_f32.py)" >&2; exit 1; }
  out="$root/testdata/model/gemma3-$v"
  "$peer/llamacpp-greedy" "$model" "<bos>The capital of France is" 8 2>/dev/null > "$out-greedy.txt"
  : > "$out-agreement.txt"
  while IFS= read -r prompt; do
    "$peer/llamacpp-greedy" "$model" "<bos>$(printf '%b' "$prompt")" 64 2>/dev/null >> "$out-agreement.txt"
  done <<'PROMPTS'
The capital of France is
Once upon a time, in a small village by the sea,
def fibonacci(n):
The three primary colors are
In 1969, the first humans
Water boils at a temperature of
My favourite recipe for pancakes starts with
<start_of_turn>user\nWhat is the tallest mountain on Earth?<end_of_turn>\n<start_of_turn>model\n
Dear hiring manager, I am writing to apply for
The quick brown fox
PROMPTS
  "$peer/llamacpp-perplexity" "$model" "$root/testdata/model/perplexity-text.txt" 2000 2 2>/dev/null > "$out-perplexity.txt"
  "$root/scripts/peers/record-peer.sh" "$peer" "gemma3-$v-greedy.txt" "gemma3-$v-agreement.txt" "gemma3-$v-perplexity.txt"
  echo "gemma3-$v: $(grep -c '^prompt' "$out-agreement.txt") prompts; $(tail -1 "$out-perplexity.txt")"
done
