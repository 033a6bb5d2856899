#!/usr/bin/env bash
# Builds c/core and c/kernels of a ferrite tree as one shared library for attention_ab.c, with the
# flags of c/defs.bzl and -O2 (bazel's opt mode).
# usage: scripts/kernels/attention_ab_lib.sh SRCROOT OUT.so   (EXTRA="-DNAME=..." adds flags)
set -euo pipefail
src=$1; out=$2; tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$src"/c/core/*.c "$src"/c/kernels/*.c; do
  case $f in *_test.c) continue;; esac
  gcc -O2 -DNDEBUG ${EXTRA:-} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wpedantic -Wno-overlength-strings \
    -ffp-contract=off -fPIC -I"$src/ffi" -I"$src/c" -c "$f" -o "$tmp/$(basename "$f" .c).o" &
done
wait
gcc -shared -o "$out" "$tmp"/*.o -lpthread -lm
