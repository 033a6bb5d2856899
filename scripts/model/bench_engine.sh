#!/usr/bin/env bash
# ferrite against llama.cpp on the real model, one after the other in the same run, alternating,
# same threads, same file, greedy: (1) the issue's benchmark: a 512-token prompt (English prose cut
# to 512 tokens by `ferrite tokenize`), prefill then 128 decoded tokens (end-of-text ignored);
# (2) a short prompt ("The capital of France is") and 64 decoded tokens. Each line reports prefill
# and decode tokens/s and the process's peak RSS. Needs the libllama that
# scripts/tokenizer/make_goldens.py builds.
# usage: scripts/model/bench_engine.sh [ROUNDS (3)] [THREADS (2)]
# EVIDENCE: C-ENG-006 C-ENG-018 C-ENG-019
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
threads=${2:-2}
peer="${FERRITE_PEERS_DIR:-$HOME/.cache/ferrite-peers}/llama.cpp"
model="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/smollm2-135m-instruct-q4_1.gguf"
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer/src/include" -I "$peer/src/ggml/include" \
  -L "$peer/build/bin" -lllama -Wl,-rpath,"$peer/build/bin" -o "$peer/llamacpp-greedy"
(cd "$root" && bazel build //c/tools:ferrite >/dev/null 2>&1)
ferrite="$root/bazel-bin/c/tools/ferrite"

# the longest prefix (in words) of the prose whose tokens number at most 512
read -r -d '' -a words < "$root/testdata/model/perplexity-text.txt" || true  # every word (EOF ends the read)
lo=1 hi=${#words[@]}
while [ $lo -lt $hi ]; do
  mid=$(( (lo + hi + 1) / 2 ))
  n=$("$ferrite" tokenize --model "$model" --text "${words[*]:0:$mid}" --count)
  if [ "$n" -le 512 ]; then lo=$mid; else hi=$((mid - 1)); fi
done
long="${words[*]:0:$lo}"
next="${words[$lo]:-}"
for ((i = 1; i <= ${#next}; i++)); do # then characters of the next word, to reach 512 exactly
  n=$("$ferrite" tokenize --model "$model" --text "$long ${next:0:$i}" --count)
  if [ "$n" -gt 512 ]; then break; fi
  if [ "$n" -eq 512 ]; then long="$long ${next:0:$i}"; break; fi
done
echo "prompt: $("$ferrite" tokenize --model "$model" --text "$long" --count) tokens of English prose; threads $threads"

run() { # PROMPT DECODE_TOKENS
  "$peer/llamacpp-greedy" "$model" "$1" "$(( $2 + 1 ))" "$threads" 2>&1 >/dev/null | grep "^llama.cpp"
  "$ferrite" generate --model "$model" --prompt "$1" --max-tokens "$(( $2 + 1 ))" --ignore-eos --threads "$threads" 2>&1 \
    >/dev/null | grep -o "prefill.*tok/s; matmul\|peak RSS.*" | tr '\n' ' ' | sed 's/; matmul/;/; s/^/ferrite:   /; s/ *$/\n/'
}
for round in $(seq "$rounds"); do
  echo "round $round, 512-token prompt + 128 tokens:"
  run "$long" 128
  echo "round $round, short prompt + 64 tokens:"
  run "The capital of France is" 64
done
