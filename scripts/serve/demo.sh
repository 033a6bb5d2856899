#!/usr/bin/env bash
# The serving part of `make run`: starts ferrite-serve on the model on a free loopback port, asks it
# two questions through the OpenAI API at once (one streamed), prints the answers and a few of its
# /metrics, and stops it: it returns by itself (serve/tests/demo.rs runs it under a time limit and
# checks that no server is left).
#
# usage: scripts/serve/demo.sh FERRITE_SERVE MODEL
set -euo pipefail
bin=$1 model=$2
out=$(mktemp)
"$bin" --model "$model" --port 0 --parallel 2 > "$out" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$out" "$out.a"' EXIT
for _ in $(seq 600); do # up to a minute (a sanitizer build loads slowly); a server that died ends it
  grep -q "^listening on" "$out" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
url=$(sed -n 's/^listening on //p' "$out")
[ -n "$url" ] || { cat "$out" >&2; exit 1; }
echo "ferrite-serve (pid $pid) on $url ($model)"
ask() { # question stream
  curl -sN "$url/v1/chat/completions" -H 'Content-Type: application/json' -d "{\"messages\": [{\"role\": \"system\",
    \"content\": \"You are a helpful assistant.\"}, {\"role\": \"user\", \"content\": \"$1\"}], \"max_tokens\": 48,
    \"temperature\": 0, \"stream\": $2}"
}
ask "Name three colours." false > "$out.a" &
colours=$! # waited for by pid: job %1 is the server itself, which never ends by itself
echo "POST /v1/chat/completions, streamed: What is the capital of France?"
ask "What is the capital of France?" true | python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("data: {"):
        d = json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
        print(d, end="", flush=True)
print()'
wait "$colours" || true
echo "POST /v1/chat/completions, at the same time: Name three colours."
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["choices"][0]["message"]["content"]); print("usage:", r["usage"])' "$out.a"
rm -f "$out.a"
curl -s "$url/metrics" | grep -E "^ferrite_(requests_total|generation_tokens_total|prefix_cache_hit_tokens_total|engine_steps_total)"
