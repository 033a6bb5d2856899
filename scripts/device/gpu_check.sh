#!/usr/bin/env bash
# gpu_check.sh: the GPU tests of ferrite, run on a machine with an NVIDIA GPU (the device tool's H200).
# EVIDENCE: C-CUDA-001, C-CUDA-002, C-CUDA-003, C-CUDA-004, C-MEM-005 (their GPU runs; CI has no
# GPU and reports them SKIPPED).
# The binaries are built here, where Bazel and Cargo are, by `scripts/device/gpu_check.sh build`
# into .dev/ (git-ignored through .git/info/exclude); on the GPU machine, `scripts/device/gpu_check.sh
# run OUTDIR` runs each of them, then rebuilds the CUDA test from source with that machine's nvcc
# as a check that the build recipe (c/cuda/BUILD.bazel's nvcc line) holds there too.
set -u
mode=${1:-}
case "$mode" in
build)
  set -e
  cd "$(dirname "$0")/../.."
  bazel build //:libferrite_static
  lib=$(bazel info bazel-bin 2>/dev/null)
  mkdir -p .dev
  for t in cuda/cuda_test cuda/cuda_ops_test mem/mem_test; do
    gcc -O2 -std=c11 -Ic -Iffi "c/$t.c" c/testing/*.c "$lib/libferrite.a" -L/usr/local/cuda/lib64 \
      -lcudart_static -lstdc++ -ldl -lpthread -lrt -lm -o ".dev/$(basename $t)"
  done
  for t in cuda mem; do
    exe=$(FERRITE_LIB_DIR=$lib cargo test -p ferrite-spec --test $t --no-run --message-format=json 2>/dev/null |
      python3 -c 'import sys,json
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["kind"]==["test"]: print(m["executable"])')
    strip -o ".dev/${t}_rs" "$exe"
  done
  ls -la .dev
  ;;
run)
  out=${2:?usage: gpu_check.sh run OUTDIR}
  cd "$(dirname "$0")/../.."
  mkdir -p "$out" && exec > >(tee "$out/gpu_check.log") 2>&1 # the log also lands in OUTDIR
  rc=0
  step() { echo "== $*"; "$@"; local r=$?; echo "== exit $r: $*"; [ $r -eq 0 ] || rc=1; }
  step nvidia-smi -L
  step nvcc --version
  step ./.dev/cuda_test
  step ./.dev/cuda_ops_test
  step ./.dev/mem_test
  step ./.dev/cuda_rs --nocapture
  step ./.dev/mem_rs --nocapture --test-threads=1
  step compute-sanitizer --tool memcheck --error-exitcode 9 ./.dev/cuda_test
  step compute-sanitizer --tool memcheck --error-exitcode 9 ./.dev/cuda_ops_test
  step compute-sanitizer --tool racecheck --error-exitcode 9 ./.dev/cuda_ops_test
  step cuobjdump --list-elf ./.dev/cuda_test
  # The recipe of c/cuda/BUILD.bazel, on this machine's nvcc, linked with the same archive's C parts.
  mkdir -p /tmp/gb
  for cu in c/cuda/*.cu; do
    step nvcc -c -O2 -fmad=false -Xcompiler -fPIC -Iffi -Xptxas --warn-on-spills,--warning-as-error \
      -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 "$cu" -o "/tmp/gb/$(basename "$cu" .cu).o"
  done
  exit $rc
  ;;
*) echo "usage: gpu_check.sh build | run OUTDIR" >&2; exit 2 ;;
esac
