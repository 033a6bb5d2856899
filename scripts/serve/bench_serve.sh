#!/usr/bin/env bash
# The serving benchmark of issue 21: ferrite-serve against llama.cpp's llama-server (the peer of
# scripts/peers/build-llamacpp.sh, built natively from the pinned sdist), same model file, same
# threads, --parallel equal, the same requests (scripts/serve/load_bench.py, seeded), in the same
# run, servers alternating round by round:
#   mixed          32 streaming clients, 64 requests of varied prompt and output lengths
#   shared-prefix  8 groups x 8 prompts with a ~1,024-token system prefix each, 128 tokens out:
#                  ferrite with its prefix cache, ferrite without (--no-prefix-cache), and
#                  llama-server with its own prompt cache (its defaults); then ferrite-warm, the
#                  same requests again on the same server (every prefix cached: what no prefill
#                  costs, the bound of the cache's gain)
# Prints one JSON line per run, then the medians per server and workload.
# EVIDENCE: C-SERVE-006 C-SERVE-007
#
# usage: scripts/serve/bench_serve.sh [ROUNDS (default 2)] [PARALLEL (default 8)] [THREADS (default 2)]
# env:   MODEL (default ~/.cache/ferrite/smollm2-135m-instruct-q4_1.gguf), REQUESTS (64), CLIENTS (32)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rounds=${1:-2} parallel=${2:-8} threads=${3:-2}
model=${MODEL:-$HOME/.cache/ferrite/smollm2-135m-instruct-q4_1.gguf}
requests=${REQUESTS:-64} clients=${CLIENTS:-32} ctx=2048
[ -f "$model" ] || { echo "bench_serve: no model at $model" >&2; exit 2; }

peer=$("$repo/scripts/peers/build-llamacpp.sh")
llama_server="$peer/build/bin/llama-server"
[ -x "$llama_server" ] || { echo "bench_serve: $llama_server missing" >&2; exit 2; }
(cd "$repo" && bazel build //:libferrite_static >&2 &&
  FERRITE_LIB_DIR=$(bazel info bazel-bin 2>/dev/null) cargo build --release -q -p ferrite-serve >&2)
ferrite="$repo/target/release/ferrite-serve"

pid=""
stop() { # the killed server's status is not a failure of this script
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=""
}
trap stop EXIT
port=18431
wait_health() {
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "bench_serve: the server on $port never became healthy" >&2; exit 1
}
start_ferrite() { # extra options...
  "$ferrite" --model "$model" --port $port --parallel "$parallel" --threads "$threads" --ctx $ctx "$@" > /dev/null 2>&1 &
  pid=$!; wait_health
}
start_llama() {
  "$llama_server" -m "$model" --host 127.0.0.1 --port $port -t "$threads" -tb "$threads" --parallel "$parallel" \
    -c $((parallel * ctx)) > /dev/null 2>&1 &
  pid=$!; wait_health
}
run() { # name workload
  local out
  out=$(python3 "$repo/scripts/serve/load_bench.py" --url "http://127.0.0.1:$port" --workload "$2" \
        --clients "$clients" --requests "$requests" --seed 1)
  echo "{\"server\": \"$1\", $(echo "$out" | cut -c2-)"
}

echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs;" \
     "peer: $(grep -m1 -o 'isa:.*' "$peer/build-flags.txt" 2>/dev/null || echo "llama.cpp, see $peer/build-flags.txt")" >&2
results=$(mktemp)
for r in $(seq "$rounds"); do
  start_ferrite;                    run ferrite mixed | tee -a "$results"; run ferrite shared-prefix | tee -a "$results"
  run ferrite-warm shared-prefix | tee -a "$results"; stop # every prefix cached already: the bound
  start_llama;                      run llama-server mixed | tee -a "$results"; run llama-server shared-prefix | tee -a "$results"; stop
  start_ferrite --no-prefix-cache;  run ferrite-no-cache shared-prefix | tee -a "$results"; stop
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
keys = sorted({(r["server"], r["workload"]) for r in rows})
print("| server | workload | runs | tokens/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | failures |")
print("|---|---|---|---|---|---|---|")
for s, w in keys:
    rs = [r for r in rows if (r["server"], r["workload"]) == (s, w)]
    med = lambda k: statistics.median(r[k] for r in rs if r[k] is not None)
    print(f"| {s} | {w} | {len(rs)} | {med('tokens_per_s'):.1f} | {med('ttft_ms_p50'):.0f} / {med('ttft_ms_p99'):.0f} | "
          f"{med('itl_ms_p50'):.1f} / {med('itl_ms_p99'):.1f} | {sum(r['failures'] for r in rs)} |")
PY
