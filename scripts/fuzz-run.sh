#!/usr/bin/env bash
# fuzz-run.sh NAME DIR BINARY SECONDS MAX_LEN [LIBFUZZER_ARGS...]: the common end of the fuzz-*.sh
# scripts. Runs DIR/BINARY (a libFuzzer build) on DIR/corpus and DIR/seeds for SECONDS on one core,
# keeps the full log in DIR/last.log and prints its summary lines; exits 1 when the run failed or
# left an input in DIR/crashes/.
set -euo pipefail
name=$1 dir=$2 bin=$3 secs=$4 max_len=$5
shift 5
echo "$name: running for ${secs}s"
set +e
(cd "$dir" && "./$bin" -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix=crashes/ "$@" corpus seeds 2>&1) | tee "$dir/last.log" |
  grep -E "^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$dir/crashes")" ]; then
  echo "$name: FAILED (exit $rc); log $dir/last.log, inputs in $dir/crashes/" >&2
  exit 1
fi
echo "$name: no crash in ${secs}s; corpus $(ls "$dir/corpus" | wc -l) inputs"
