#!/usr/bin/env bash
# bench-tp.sh: tensor parallelism's speed on this machine (issue 33; a benchmark, not a test).
#   1. the all-reduce (c/comm/comm_bench) between 2 hosts of our own (network namespaces and veth
#      pairs, scripts/comm/netns-hosts.sh) at the veths' full rate, then capped by tc's tbf at
#      10 and 1 Gbit/s on every link in both directions; f32 and the 8-bit wire (Q8_0 blocks);
#   2. decode of the model (default: the 8B-shaped Q4_K_M of scripts/model/make-llama8b-q4km.py):
#      one process with 2 threads against 2 ranks of 1 thread each on those hosts (full rate),
#      `ferrite generate`, the same prompt and 32 tokens, REPEAT times each, interleaved.
# Needs root, mpirun, and `bazel build //c/comm:comm_bench //c/tools:ferrite`.
# usage: scripts/comm/bench-tp.sh [MODEL] [REPEAT]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
hosts=$repo/scripts/comm/netns-hosts.sh
bench=$repo/bazel-bin/c/comm/comm_bench
ferrite=$repo/bazel-bin/c/tools/ferrite
model=${1:-${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/synthetic-llama-8b-q4km.gguf}
repeat=${2:-3}
prefix=fb$$
trap '"$hosts" down "$prefix"' EXIT
subnet=$("$hosts" up 2 "$prefix")
mpi() { # mpirun with rank i in host i, ARGS after the program
  local prog=$1; shift
  PMIX_MCA_ptl_tcp_if_include=$subnet mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" -x PMIX_MCA_ptl_tcp_if_include \
    -n 1 "$hosts" exec "$prefix-h0" "$prog" "$@" : -n 1 "$hosts" exec "$prefix-h1" "$prog" "$@"
}
cap() { # RATE BURST: tbf on both ends of every host's link (none: remove)
  for i in 0 1; do
    tc qdisc del dev "$prefix-v$i" root 2> /dev/null || true
    ip netns exec "$prefix-h$i" tc qdisc del dev eth0 root 2> /dev/null || true
    if [ "$1" != none ]; then
      tc qdisc add dev "$prefix-v$i" root tbf rate "$1" burst "$2" latency 50ms
      ip netns exec "$prefix-h$i" tc qdisc add dev eth0 root tbf rate "$1" burst "$2" latency 50ms
    fi
  done
}
echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $(mpirun --version | head -1)"
for rate in none 10gbit 1gbit; do
  label="capped at $rate"
  case $rate in 10gbit) cap 10gbit 4mb ;; 1gbit) cap 1gbit 1mb ;; *) cap none 0; label="at the full rate of the veths" ;; esac
  echo "== all-reduce between 2 hosts, link $label"
  mpi "$bench" 200 2>&1 | grep '^comm_bench'
  mpi "$bench" --q8 200 2>&1 | grep '^comm_bench' # the 8-bit wire (--tp-wire q8_0)
done
cap none 0
[ -f "$model" ] || { echo "bench-tp: $model missing (scripts/model/make-llama8b-q4km.py)"; exit 0; }
gen=(generate --model "$model" --prompt "The history of the printing press" --max-tokens 32 --ignore-eos)
echo "== decode of $(basename "$model"), 32 tokens: 1 process x 2 threads against 2 ranks x 1 thread"
for ((k = 0; k < repeat; k++)); do
  one=$("$ferrite" "${gen[@]}" --threads 2 2>&1 | sed -n 's/.*decode [0-9]* tokens at \([0-9.]*\) tok\/s.*/\1/p')
  two=$(mpi "$ferrite" "${gen[@]}" --threads 1 --tp 2 2>&1 | sed -n 's/.*decode [0-9]* tokens at \([0-9.]*\) tok\/s.*/\1/p')
  awk -v a="$one" -v b="$two" 'BEGIN { printf "bench-tp: 1 x 2 threads %.2f tok/s, 2 ranks x 1 thread %.2f tok/s: %.2fx\n", a, b, b / a }'
done
