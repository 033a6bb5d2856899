#!/usr/bin/env bash
# Regenerates ffi/ferrite-sys/src/bindings.rs from ffi/ferrite.h with the bindgen CLI.
#
#   scripts/gen-bindings.sh          rewrite the checked-in bindings
#   scripts/gen-bindings.sh --check  regenerate into a temp file and diff with the checked-in one;
#                                    exit 1 on any difference (claim C-ABI-001)
#
# Deterministic: fixed bindgen flags, a fixed rustfmt (RUSTFMT, else ~/.cargo/bin/rustfmt, else PATH)
# run with no project config (bindgen runs from an empty temp dir), header passed by absolute path.
# The __int32_t-style aliases bindgen adds are left in: blocklisting them stops bindgen deriving
# Copy/Clone/Debug for fer_tensor and fer_threadpool_options.
# Enums come out as plain integer constants without the enum-name prefix (FER_STATUS_OK, not
# fer_status_code_FER_STATUS_OK); Rust enums over C values would be UB on an unknown value.
# No bindgen layout tests: rust_tests/tests/abi.rs asserts sizes, alignments and offsets itself.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
header="$repo/ffi/ferrite.h"
target="$repo/ffi/ferrite-sys/src/bindings.rs"

mode=write
case "${1:-}" in
  "") ;;
  --check) mode=check ;;
  -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
  *) echo "gen-bindings.sh: unknown argument '$1' (use --check or nothing)" >&2; exit 2 ;;
esac

if ! command -v bindgen >/dev/null 2>&1; then
  echo "gen-bindings.sh: bindgen not found (apt-get install bindgen; version 0.60 expected)" >&2
  exit 2
fi
if [[ -z "${RUSTFMT:-}" ]]; then
  if [[ -x "$HOME/.cargo/bin/rustfmt" ]]; then
    RUSTFMT="$HOME/.cargo/bin/rustfmt"
  elif command -v rustfmt >/dev/null 2>&1; then
    RUSTFMT="$(command -v rustfmt)"
  else
    echo "gen-bindings.sh: rustfmt not found (rustup component add rustfmt, or set RUSTFMT)" >&2
    exit 2
  fi
fi
export RUSTFMT

tmpdir="$(mktemp -d)"
trap 'rm -rf "$tmpdir"' EXIT
out="$tmpdir/bindings.rs"

# Run from the empty temp dir so rustfmt picks up no rustfmt.toml from the caller's directory.
(
  cd "$tmpdir"
  bindgen "$header" \
    --output "$out" \
    --allowlist-function 'fer_.*' \
    --allowlist-type 'fer_.*' \
    --allowlist-var 'FER_.*' \
    --default-enum-style consts \
    --no-prepend-enum-name \
    --no-layout-tests \
    --size_t-is-usize \
    -- -x c -std=c11
)

if [[ "$mode" == write ]]; then
  cp "$out" "$target"
  echo "gen-bindings.sh: wrote ${target#"$repo"/}"
  exit 0
fi

if [[ ! -f "$target" ]]; then
  echo "gen-bindings.sh --check: ${target#"$repo"/} is missing; run scripts/gen-bindings.sh" >&2
  exit 1
fi
if ! diff -u --label "checked-in ${target#"$repo"/}" --label "regenerated from ffi/ferrite.h" \
    "$target" "$out"; then
  echo >&2
  echo "gen-bindings.sh --check: FAILED: ${target#"$repo"/} differs from what ffi/ferrite.h" \
       "generates (diff above); run scripts/gen-bindings.sh and commit the result" >&2
  exit 1
fi
echo "gen-bindings.sh --check: bindings up to date"
