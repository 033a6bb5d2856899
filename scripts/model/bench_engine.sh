#!/usr/bin/env bash
# ferrite against llama.cpp on the real model, one after the other in the same run, alternating,
# same threads, same file, greedy: (1) the issue's benchmark: a 512-token prompt (English prose cut
# to 512 tokens by `ferrite tokenize`), prefill then 128 decoded tokens (end-of-text ignored);
# (2) a short prompt ("The capital of France is") and 64 decoded tokens. Each line reports prefill
# and decode tokens/s and the process's peak RSS, and beside it the instruction sets that side runs:
# llama.cpp's from its build (build-flags.txt), ferrite's from `ferrite info` (the CPU's features it
# detected and its kernel table; the 8-bit GEMV and attention pick AVX-512 tables of their own where
# the CPU has AVX512F, and AVX512VL+VNNI for the GEMV). The load average is printed before and after
# each round: on a shared machine compare within rounds. Builds the peer on first use
# (scripts/peers/build-llamacpp.sh) and prints its flags beside each llama.cpp line.
#
# With a third argument `cpu` it measures CPU time instead of wall time (for a shared, loaded
# machine, where a process waiting for a core shows up in wall time but not in CPU time; use it at 1
# thread, since spinning threads burn CPU time): each side runs the short prompt + 1 and + 65
# tokens, the long prompt + 1 and + 129, and the differences of the runs' user+system seconds give
# the CPU seconds per decoded token and of the 512-token prefill (load and setup cancel out).
# FERRITE_BENCH_PEER_B=DIR adds a second libllama build (DIR/build/bin, DIR/src) as a third side.
# First, the rate at which the threads read the mapped file (scripts/model/read_rate.c: decode's
# memory ceiling, weight bytes per token over it) and llama.cpp's own llama-bench (pp512, tg128) on
# the same file and threads.
# FERRITE_BENCH_MODEL=FILE measures another GGUF file (a path, or a name in the data directory;
# default SmolLM2-135M-Instruct Q4_1).
# usage: scripts/model/bench_engine.sh [ROUNDS (5)] [THREADS (2)] [cpu]
# EVIDENCE: C-ENG-006 C-ENG-018 C-ENG-019 C-ENG-104 C-ENG-105 C-ENG-106 C-ENG-107
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}
threads=${2:-2}
if ! [[ "$rounds" =~ ^[1-9][0-9]{0,2}$ && "$threads" =~ ^[1-9][0-9]{0,2}$ && "${3:-}" =~ ^(|cpu)$ ]]; then
  echo "usage: scripts/model/bench_engine.sh [ROUNDS (1..999, default 5)] [THREADS (1..999, default 2)] [cpu]" >&2
  exit 2
fi
data="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}"
model="${FERRITE_BENCH_MODEL:-smollm2-135m-instruct-q4_1.gguf}"
case "$model" in */*) ;; *) model="$data/$model" ;; esac
[ -f "$model" ] || { echo "bench_engine.sh: no model file $model" >&2; exit 2; }
peer=$("$root/scripts/peers/build-llamacpp.sh") # builds the peer on first use (with this CPU's ISAs)
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
peer_isa=$(sed -n 's/^isa: //p' "$peer/build-flags.txt")
# `ferrite info` prints its features, then benchmarks: stop reading after the kernel table's line
fer_isa=$("$ferrite" info 2>/dev/null | sed -n 's/^cpu features : //p; /^kernel isa/{s/^kernel isa *: \([^ ]*\).*/kernel isa \1/p;q}' \
  | tr -s ' \n' ' ' | sed 's/ *$//') || true
# ferrite's own tables beyond that line (its dispatch rules in c/kernels/quant_i8.c and
# attention_portable.c; `ferrite info` does not list avx512vl or avx512vnni)
cpuflags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-) "
gemv=avx2; att=avx2
[[ "$cpuflags" == *" avx512vl "* && "$cpuflags" == *" avx512_vnni "* ]] && gemv=avx512vnni
[[ "$cpuflags" == *" avx512f "* ]] && att=avx512
fer_isa="$fer_isa; 8-bit GEMV $gemv, attention $att"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1) (family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) CPUs"
echo "model: $model ($(stat -c %s "$model") bytes)"
echo "peer: $(sed -n 's/^peer: //p' "$peer/build-flags.txt")"
echo "peer isa: $peer_isa"
echo "peer system_info: $(sed -n 's/^system_info: //p' "$peer/build-flags.txt")"
echo "ferrite: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); cpu features $fer_isa"
echo "prompt: $("$ferrite" tokenize --model "$model" --text "$long" --count) tokens of English prose; threads $threads"
# the memory ceiling of decode: the rate at which the same threads read the mapped file
cc -O2 -pthread "$root/scripts/model/read_rate.c" -o "$peer/read-rate"
"$peer/read-rate" "$model" "$threads"
# llama.cpp's own benchmark on the same file and threads (pp512: a 512-token prompt; tg128: 128
# tokens decoded from an empty context; 3 repetitions), beside ferrite's numbers below
if [ -x "$peer/build/bin/llama-bench" ]; then
  LD_LIBRARY_PATH="$peer/build/bin" "$peer/build/bin/llama-bench" -m "$model" -t "$threads" -p 512 -n 128 -r 3 2>/dev/null \
    | awk -F'|' '/ (pp512|tg128) /{gsub(/^ +| +$/, "", $7); gsub(/^ +| +$/, "", $8); print "llama-bench " $7 ": " $8 " tok/s"}'
fi

run() { # PROMPT DECODE_TOKENS
  "$peer/llamacpp-greedy" "$model" "$1" "$(( $2 + 1 ))" "$threads" 2>&1 >/dev/null | grep "^llama.cpp" \
    | sed "s/\$/ [$peer_isa]/"
  "$ferrite" generate --model "$model" --prompt "$1" --max-tokens "$(( $2 + 1 ))" --ignore-eos --threads "$threads" 2>&1 \
    >/dev/null | grep -o "prefill.*tok/s; matmul\|peak RSS.*" | tr '\n' ' ' | sed 's/; matmul/;/; s/^/ferrite:   /; s/ *$//'
  echo " [$fer_isa]"
}
if [ "${3:-}" = cpu ]; then
  peer_b=${FERRITE_BENCH_PEER_B:-}
  if [ -n "$peer_b" ]; then
    c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_greedy.cpp" -I "$peer_b/src/include" -I "$peer_b/src/ggml/include" \
      -L "$peer_b/build/bin" -lllama -Wl,-rpath,"$peer_b/build/bin" -o "$peer_b/llamacpp-greedy"
    peer_b_isa=$(sed -n 's/^isa: //p' "$peer_b/build-flags.txt" 2>/dev/null || true)
    [ -n "$peer_b_isa" ] || peer_b_isa="ggml-cpu.c compiled with $(grep -o '"command": "[^"]*ggml-cpu/ggml-cpu.c' \
      "$peer_b/build/compile_commands.json" 2>/dev/null | grep -o ' -m[a-z0-9.-]*' | awk '!s[$0]++' | tr -d '\n')"
    echo "peer B: $peer_b: $peer_b_isa"
  fi
  cpu_s() { # SIDE PROMPT STEPS: user+system seconds of one whole run
    local t; t=$(mktemp)
    case $1 in
      llama.cpp) /usr/bin/time -f '%U %S' -o "$t" "$peer/llamacpp-greedy" "$model" "$2" "$3" "$threads" >/dev/null 2>&1 ;;
      peerB) /usr/bin/time -f '%U %S' -o "$t" "$peer_b/llamacpp-greedy" "$model" "$2" "$3" "$threads" >/dev/null 2>&1 ;;
      ferrite) /usr/bin/time -f '%U %S' -o "$t" "$ferrite" generate --model "$model" --prompt "$2" --max-tokens "$3" \
        --ignore-eos --threads "$threads" >/dev/null 2>&1 ;;
    esac
    awk '{printf "%.2f", $1 + $2}' "$t"; rm -f "$t"
  }
  sides="llama.cpp ferrite"
  [ -n "$peer_b" ] && sides="peerB $sides"
  for round in $(seq "$rounds"); do
    echo "round $round (load $(cut -d' ' -f1-3 /proc/loadavg)):"
    for side in $sides; do
      s1=$(cpu_s "$side" "The capital of France is" 1); s65=$(cpu_s "$side" "The capital of France is" 65)
      l1=$(cpu_s "$side" "$long" 1); l129=$(cpu_s "$side" "$long" 129)
      tag=$peer_isa; [ "$side" = ferrite ] && tag=$fer_isa; [ "$side" = peerB ] && tag=$peer_b_isa
      awk -v side="$side" -v s1="$s1" -v s65="$s65" -v l1="$l1" -v l129="$l129" -v tag="$tag" 'BEGIN {
        printf "%-9s CPU s: short+1 %.2f, short+65 %.2f, long+1 %.2f, long+129 %.2f; prefill 512: %.3f s (%.1f tok/CPU-s); decode after 512: %.2f ms/tok (%.1f tok/CPU-s); after 5: %.2f ms/tok (%.1f tok/CPU-s) [%s]\n",
          side ":", s1, s65, l1, l129, l1 - s1, 512 / (l1 - s1), (l129 - l1) / 128 * 1000, 128 / (l129 - l1),
          (s65 - s1) / 64 * 1000, 64 / (s65 - s1), tag }'
    done
  done
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
for round in $(seq "$rounds"); do
  echo "round $round, 512-token prompt + 128 tokens (load $(cut -d' ' -f1-3 /proc/loadavg)):"
  run "$long" 128
  echo "round $round, short prompt + 64 tokens (load $(cut -d' ' -f1-3 /proc/loadavg)):"
  run "The capital of France is" 64
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
