#!/usr/bin/env bash
# Every Bazel test's time, in the release and the sanitizer configuration, at rest and with LOAD
# other CPU-bound processes running (default 2: on these 2-core machines that halves each test's
# share of the CPU, the condition under which //c/kernels:attention_test once timed out).
# Prints one table: test | release | release+load | asan | asan+load | timeout | headroom, where
# headroom = the Bazel timeout over the slowest of the four. Exit 1 when any headroom is under 3.
# usage: scripts/ci/test-times.sh [LOAD (2)] [TARGETS (//...)]
set -euo pipefail
cd "$(dirname "$0")/../.."
load=${1:-2}
targets=${2:-//...}
[[ "$load" =~ ^[0-9]+$ ]] && [ "$load" -le 64 ] \
  || { echo "usage: scripts/ci/test-times.sh [LOAD (0..64 busy processes, default 2)] [TARGETS (//...)]" >&2; exit 2; }
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT

busy() { for _ in $(seq "$load"); do (while :; do :; done) & done; }
unbusy() { kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; }

run() { # NAME [bazel options...]: one uncached run of every test; times from the summary lines
  local name=$1; shift
  bazel test "$@" --nocache_test_results --test_output=summary --test_timeout=3600 "$targets" 2>&1 \
    | grep -E '^//.* (PASSED|FAILED|TIMEOUT) in ' | awk '{print $1, $(NF)}' | sed 's/s$//' > "$out/$name" || true
  echo "test-times: $name: $(wc -l < "$out/$name") tests" >&2
}

bazel build "$targets" >/dev/null 2>&1; bazel build --config=asan "$targets" >/dev/null 2>&1
run release
busy; run release_load; unbusy
run asan --config=asan
busy; run asan_load --config=asan; unbusy

# The timeout each test gets: its explicit timeout, else the one its size implies.
bazel query --output=label_kind "tests($targets)" 2>/dev/null | awk '{print $3}' | while read -r t; do
  attrs=$(bazel query --output=build "$t" 2>/dev/null)
  size=$(sed -n 's/.*size = "\(.*\)".*/\1/p' <<<"$attrs"); timeout=$(sed -n 's/.*timeout = "\(.*\)".*/\1/p' <<<"$attrs")
  [ -n "$timeout" ] || case ${size:-medium} in small) timeout=short;; medium) timeout=moderate;; large) timeout=long;; enormous) timeout=eternal;; esac
  case $timeout in short) s=60;; moderate) s=300;; long) s=900;; eternal) s=3600;; esac
  echo "$t $s"
done > "$out/timeouts"

printf '%-42s %8s %8s %8s %8s %8s %9s\n' test release +load asan +load timeout headroom
bad=0
while read -r t s; do
  row=() max=0
  for c in release release_load asan asan_load; do
    v=$(awk -v t="$t" '$1==t {print $2}' "$out/$c"); v=${v:-?}; row+=("$v")
    [ "$v" = "?" ] || max=$(awk -v a="$max" -v b="$v" 'BEGIN{print (b>a)?b:a}')
  done
  head=$(awk -v s="$s" -v m="$max" 'BEGIN{ if (m > 0) printf "%.1f", s/m; else print "inf" }')
  printf '%-42s %8s %8s %8s %8s %8s %9s\n' "$t" "${row[@]}" "${s}s" "$head"
  awk -v h="$head" 'BEGIN{exit !(h != "inf" && h < 3)}' && bad=$((bad+1))
done < "$out/timeouts"
[ $bad -eq 0 ] || { echo "test-times: $bad tests with under 3x headroom"; exit 1; }
