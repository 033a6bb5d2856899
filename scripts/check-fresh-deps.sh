#!/usr/bin/env bash
# Would `make test` resolve everything on a FRESH machine, or only on this one?
#  1. Every registry crate that Cargo.lock pins must come from a Debian package that
#     scripts/setup.sh's list pulls in through Depends alone (setup installs with
#     --no-install-recommends), not from a package left on this machine by an install by hand.
#     The crate's directory in the local registry, `dpkg -S` for its owner, and the Depends closure
#     of setup's list (`apt-cache depends --recurse --no-recommends`).
#  2. Every `pip install` / `pip download` in scripts/ is pinned and hashed (--require-hashes).
# Exit 0 when both hold; otherwise each gap on its own line and exit 1. Runs after setup (the
# packages must be installed for dpkg -S to name their owners). Adapted from
# ../shared/tools/check-fresh-deps.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[ -f scripts/setup.sh ] && [ -f Cargo.lock ] || { echo "check-fresh-deps: no scripts/setup.sh or Cargo.lock"; exit 1; }
registry=${FERRITE_CARGO_REGISTRY:-/usr/share/cargo/registry}

pkgs=$(sed -n '/^packages=(/,/^)/p' scripts/setup.sh | sed 's/#.*//' | tr ' ()' '\n\n\n' \
  | grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -v '^packages=$')
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances $pkgs 2>/dev/null | grep -vE '^ ' | sed 's/:amd64$//' | sort -u)
[ -n "$closure" ] || { echo "check-fresh-deps: apt-cache gave no Depends closure for setup's list"; exit 1; }

# One dpkg -S for every crate directory (each call reads the whole package database: one per
# crate took half a minute): "package: path" lines, mapped back to each crate below
locked=$(awk '/^\[\[package\]\]/{n="";v=""} /^name = /{gsub(/"/,"",$3);n=$3}
              /^version = /{gsub(/"/,"",$3);v=$3} /^source = "registry/{print n, v}' Cargo.lock)
declare -A owner_of=()
dirs=()
while read -r name ver; do
  [ -n "$name" ] && [ -d "$registry/$name-$ver" ] && dirs+=("$registry/$name-$ver")
done <<<"$locked"
if [ ${#dirs[@]} -gt 0 ]; then
  while IFS= read -r line; do
    pkg=${line%%: *}; path=${line#*: }
    [ -n "${owner_of[$path]:-}" ] || owner_of[$path]=${pkg%%:*}
  done < <(dpkg -S "${dirs[@]}" 2>/dev/null)
fi

miss=0; n=0
while read -r name ver; do
  [ -n "$name" ] || continue
  d=$registry/$name-$ver
  n=$((n+1))
  [ -d "$d" ] || { echo "crate $name $ver: not in the local registry ($d)"; miss=$((miss+1)); continue; }
  owner=${owner_of[$d]:-}
  if [ -z "$owner" ] || ! grep -qxF "$owner" <<<"$closure"; then
    echo "crate $name $ver comes from ${owner:-no package} (not pulled in by scripts/setup.sh's list)"
    miss=$((miss+1))
  fi
done <<<"$locked"
[ "$n" -gt 0 ] || { echo "check-fresh-deps: no registry crates found in Cargo.lock"; exit 1; }
echo "check-fresh-deps: $((n-miss))/$n locked registry crates pulled in by setup.sh's packages"

# pip: every command in setup's scripts that runs `pip install` or `pip download` (continuation
# lines joined) must pass --require-hashes, so each requirement carries ==version --hash=sha256.
unpinned=""
for f in scripts/setup.sh scripts/fetch-*.sh; do
  hits=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$f" | grep -nE 'pip3?[[:space:]]+(install|download)[[:space:]]+-' \
    | grep -vE '^[0-9]+:[[:space:]]*#' | grep -v -- '--require-hashes' || true)
  [ -z "$hits" ] || unpinned+="$f: $hits"$'\n'
done
if [ -n "$unpinned" ]; then
  printf 'check-fresh-deps: pip calls without --require-hashes:\n%s' "$unpinned"; miss=$((miss+1))
else
  echo "check-fresh-deps: every pip install/download in setup's scripts is pinned and hashed"
fi
[ $miss -eq 0 ]
