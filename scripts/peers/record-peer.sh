#!/usr/bin/env bash
# Records which llama.cpp build made a golden: one line per golden in testdata/model/llamacpp-peer.txt,
# "<golden>: <peer version>; <isa>; <cpu>", taken from the build's build-flags.txt (written by
# scripts/peers/build-llamacpp.sh). The golden scripts of scripts/model/ call it after writing.
# usage: scripts/peers/record-peer.sh PEER_DIR GOLDEN_FILE_NAME...
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$1; shift
flags="$peer/build-flags.txt"
[ -f "$flags" ] || { echo "record-peer: no $flags (run scripts/peers/build-llamacpp.sh)" >&2; exit 1; }
out="$root/testdata/model/llamacpp-peer.txt"
field() { sed -n "s/^$1: //p" "$flags" | head -1; }
line="$(field peer); $(field isa); system_info: $(field system_info); cpu: $(field cpu)"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
  echo "# Which llama.cpp build made each golden of testdata/model/ (scripts/peers/record-peer.sh)."
  [ -f "$out" ] && grep -v '^#' "$out" | grep -vF "$(printf '%s:\n' "$@")" || true
  for g in "$@"; do echo "$g: $line"; done
} > "$tmp"
{ head -1 "$tmp"; tail -n +2 "$tmp" | sort; } > "$out"
