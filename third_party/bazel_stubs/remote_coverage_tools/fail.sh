#!/bin/sh
echo "bazel coverage is not available offline; use gcov or llvm-cov directly" >&2
exit 1
