#!/usr/bin/env bash
# How often two builds of llama.cpp agree with each other, measured the way //c/model:llama_test
# measures ferrite (C-ENG-007, C-ENG-008): another libllama build (BUILD_DIR with build/bin and src,
# e.g. the same sdist built with other instruction sets) is teacher-forced on an agreement golden's
# tokens (default testdata/model/smollm2-agreement.txt, made by scripts/model/make_agreement_golden.sh)
# and its argmax compared with the golden's token at all 640 positions and at those where the golden's
# top-2 margin exceeds 0.5. Run with the peer itself as BUILD_DIR it must give 640 of 640 (the golden
# reproduces). The yardstick for ferrite's agreement: near-ties go either way between builds.
# usage: scripts/model/peer_cross_agreement.sh BUILD_DIR [GOLDEN]
# EVIDENCE: C-ENG-008
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
other=${1:?usage: scripts/model/peer_cross_agreement.sh BUILD_DIR [GOLDEN]}
golden=${2:-$root/testdata/model/smollm2-agreement.txt}
model="${FERRITE_DATA_DIR:-$HOME/.cache/ferrite}/smollm2-135m-instruct-q4_1.gguf"
[ -f "$other/build/bin/libllama.so" ] || { echo "no libllama in $other/build/bin" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$golden" "$tmp/golden.txt" # GOLDEN may be a pipe (<(git show ...))
c++ -O2 -std=c++17 "$root/scripts/model/llamacpp_forced.cpp" -I "$other/src/include" -I "$other/src/ggml/include" \
  -L "$other/build/bin" -lllama -Wl,-rpath,"$other/build/bin" -o "$tmp/llamacpp-forced"
"$tmp/llamacpp-forced" "$model" "$tmp/golden.txt" 2>/dev/null > "$tmp/forced.txt"
# the golden's own top-2 margin per position, in file order
awk '/^step/ { split($0, t, " top5 "); split(t[2], a, " "); split(a[1], x, ":"); split(a[2], y, ":");
               print x[2] - y[2] }' "$tmp/golden.txt" > "$tmp/margin.txt"
paste -d' ' "$tmp/forced.txt" "$tmp/margin.txt" | awk -v b="$other" '
  { n++; eq = $6 == $8; a += eq; if ($11 > 0.5) { c++; ca += eq } }
  END { printf "%s on the golden: argmax equal at %d of %d positions (%.1f%%); at %d of the %d with a golden margin above 0.5\n",
        b, a, n, n ? 100 * a / n : 0, ca, c }'
