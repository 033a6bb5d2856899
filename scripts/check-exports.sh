#!/usr/bin/env bash
# Fails when a shared library exports a symbol outside the fer_ namespace, or exports no fer_abi_version.
# EVIDENCE: C-ABI-005
set -euo pipefail
lib=${1:?usage: check-exports.sh libferrite.so}
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//')
bad=$(printf '%s\n' "$syms" | grep -v '^fer_' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports symbols outside fer_*:" >&2
  printf '  %s\n' $bad >&2
  exit 1
fi
# a here-string, not a pipe: grep -q exits at the first match, and under pipefail the writer's
# SIGPIPE would then read as a failure (seen once on a loaded machine)
grep -qx fer_abi_version <<<"$syms" || { echo "FAIL: fer_abi_version not exported" >&2; exit 1; }
echo "ok: $(printf '%s\n' "$syms" | wc -l) symbols, all fer_*"
