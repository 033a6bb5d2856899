#!/usr/bin/env bash
# tp_model_mpi_test.sh: tp_model_test at 2 and 4 tensor-parallel ranks that mpirun starts on this
# host, over Open MPI's TCP transport on loopback (not shared memory), as root where CI runs as root.
# Then 4 ranks as 2 pipeline stages of 2 tensor-parallel ranks each (--mpi-grid). Then the command
# line users run: `mpirun -n 2 ferrite generate --tp 2` (and -n 4 with --tp 2 --pp 2) prints what
# one process prints (the exact route), and a start where the ranks' options differ, or one rank's file is
# missing, fails on every rank naming the rank (C-TP-005).
# usage: tp_model_mpi_test.sh TP_MODEL_TEST_BINARY FERRITE_BINARY
# FERRITE_TP_STEPS: greedy steps per prompt (4 here, to keep `make test` short; the 64 of
# docs/CLAIMS.md C-TP-003: bazel test //c/model:tp_model_mpi_test --test_env=FERRITE_TP_STEPS=64).
set -euo pipefail
bin=$1
ferrite=$2
# 3 stages: a first, a middle and a last. A sanitizer build (make test-sanitize) runs the smaller
# part: 2 ranks, no stages, no command line
asan=0
# (grep reads all of ldd's output: with -q it could stop first, and pipefail would then see ldd's SIGPIPE)
ldd "$bin" 2> /dev/null | grep libasan > /dev/null && asan=1
ranks="2 4" stages="3" only=""
# under the sanitizers: SmolLM2 alone (Gemma's 262,144-token head is the optimized build's to check)
[ "$asan" = 1 ] && ranks=2 stages="" only=smollm2
# LeakSanitizer is off under mpirun: Open MPI keeps allocations in components it unloads at
# MPI_Finalize (comm_mpi_test.sh); ASan still checks every access.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
if ! command -v mpirun > /dev/null; then
  echo "SKIPPED: tp_model_mpi_test (no mpirun: scripts/setup.sh installs openmpi-bin)"
  exit 0
fi
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
mpi=(timeout 600 mpirun "${root[@]}" --oversubscribe --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo
  --mca oob_tcp_if_include lo -x ASAN_OPTIONS)
for n in $ranks; do
  out=$(timeout 1500 mpirun "${root[@]}" --oversubscribe -n "$n" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x ASAN_OPTIONS \
    "$bin" --mpi "${FERRITE_TP_STEPS:-4}" $only 2>&1) || { echo "$out"; echo "tp_model_mpi_test: $n ranks failed"; exit 1; }
  echo "$out" | grep -E "^(tp_model_test|SKIPPED)" || true
  got=$(grep -c "^tp_model_test: all checks passed" <<< "$out" || true)
  if [ "$got" -ne "$n" ]; then echo "$out"; echo "tp_model_mpi_test: $got of $n ranks passed"; exit 1; fi
  echo "tp_model_mpi_test: $n ranks passed"
done
# pipeline stages (C-TP-009): the same bits as one process on the default 8-bit route
for n in $stages; do
  out=$(timeout 1500 mpirun "${root[@]}" --oversubscribe -n "$n" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x ASAN_OPTIONS \
    "$bin" --mpi-pp "${FERRITE_TP_STEPS:-4}" 2>&1) || { echo "$out"; echo "tp_model_mpi_test: $n stages failed"; exit 1; }
  echo "$out" | grep -E "^(tp_model_test: .*(stages|batched|micro)|SKIPPED)" || true
  got=$(grep -c "^tp_model_test: all checks passed" <<< "$out" || true)
  if [ "$got" -ne "$n" ]; then echo "$out"; echo "tp_model_mpi_test: $got of $n stages passed"; exit 1; fi
  echo "tp_model_mpi_test: $n pipeline stages passed"
done
# both (C-TP-011): 2 pipeline stages of 2 tensor-parallel ranks each, on the exact route (SmolLM2
# here; both models: bazel-bin/c/model/tp_model_test --mpi-grid under mpirun -n 4)
if [ "$asan" = 0 ]; then
  out=$(timeout 1500 mpirun "${root[@]}" --oversubscribe -n 4 --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x ASAN_OPTIONS \
    "$bin" --mpi-grid "${FERRITE_TP_STEPS:-4}" smollm2 2>&1) || { echo "$out"; echo "tp_model_mpi_test: 2 x 2 ranks failed"; exit 1; }
  echo "$out" | grep -E "^(tp_model_test: .*(stages of|batched|one token)|SKIPPED)" || true
  got=$(grep -c "^tp_model_test: all checks passed" <<< "$out" || true)
  if [ "$got" -ne 4 ]; then echo "$out"; echo "tp_model_mpi_test: $got of 4 ranks (2 stages x 2) passed"; exit 1; fi
  echo "tp_model_mpi_test: 2 stages of 2 tensor-parallel ranks passed"
fi

# the data directory as the C tests find it: $FERRITE_DATA_DIR, else the account's ~/.cache/ferrite
# (Bazel's sandbox may leave HOME unset)
[ "$asan" = 1 ] && { echo "tp_model_mpi_test: the command line is checked in the optimized build"; exit 0; }
home=$(getent passwd "$(id -u)" | cut -d: -f6)
model="${FERRITE_DATA_DIR:-$home/.cache/ferrite}/smollm2-135m-instruct-q4_1.gguf"
if [ ! -f "$model" ]; then
  echo "SKIPPED: tp_model_mpi_test command line ($model missing: scripts/fetch-test-data.sh)"
  exit 0
fi
gen=(generate --model "$model" --chat --prompt "What is the capital of France?" --max-tokens 12 --threads 1)
one=$("$ferrite" "${gen[@]}" --matmul exact 2> /dev/null)
two=$("${mpi[@]}" -n 2 "$ferrite" "${gen[@]}" --matmul exact --tp 2 2> /dev/null)
echo "one process: $one"
echo "two ranks:   $two"
if [ -z "$one" ] || [ "$one" != "$two" ]; then echo "tp_model_mpi_test: the two ranks' answer differs"; exit 1; fi
# the 8-bit wire (C-COMM-005): the all-reduces as Q8_0 blocks; this answer stays one process's
two8=$("${mpi[@]}" -n 2 "$ferrite" "${gen[@]}" --matmul exact --tp 2 --tp-wire q8_0 2> /dev/null)
echo "two ranks, 8-bit wire: $two8"
if [ "$one" != "$two8" ]; then echo "tp_model_mpi_test: the two ranks' answer over the 8-bit wire differs"; exit 1; fi
# 2 stages of 2 tensor-parallel ranks, 4 processes (C-TP-011): the same answer on the exact route
four=$("${mpi[@]}" -n 4 "$ferrite" "${gen[@]}" --matmul exact --tp 2 --pp 2 2> /dev/null)
echo "2 x 2 ranks: $four"
if [ "$one" != "$four" ]; then echo "tp_model_mpi_test: the 2 x 2 ranks' answer differs"; exit 1; fi
# two pipeline stages on the default 8-bit route: the same answer too
one=$("$ferrite" "${gen[@]}" 2> /dev/null)
two=$("${mpi[@]}" -n 2 "$ferrite" "${gen[@]}" --pp 2 2> /dev/null)
echo "one process (i8): $one"
echo "two stages (i8):  $two"
if [ -z "$one" ] || [ "$one" != "$two" ]; then echo "tp_model_mpi_test: the two stages' answer differs"; exit 1; fi
# different options on the two ranks (MPMD: one command line each): both fail, naming rank 1
if out=$("${mpi[@]}" -n 1 "$ferrite" "${gen[@]}" --matmul exact --tp 2 : -n 1 "$ferrite" "${gen[@]}" --matmul i8 --tp 2 2>&1); then
  echo "$out"; echo "tp_model_mpi_test: ranks with different options started"; exit 1
fi
grep -q "rank 1 of 2 on host .* opened a different model or options" <<< "$out" || {
  echo "$out"; echo "tp_model_mpi_test: no message naming the differing rank"; exit 1; }
# rank 1's file not a model (a file that is not GGUF): both fail, naming rank 1 and its reason
if out=$("${mpi[@]}" -n 1 "$ferrite" "${gen[@]}" --tp 2 : -n 1 "$ferrite" generate --model "$bin" --prompt x --tp 2 2>&1); then
  echo "$out"; echo "tp_model_mpi_test: a rank without its file started"; exit 1
fi
grep -q "rank 1 of 2 on host .* could not open its share" <<< "$out" || {
  echo "$out"; echo "tp_model_mpi_test: no message naming the rank without its file"; exit 1; }
echo "tp_model_mpi_test: the command line at 2 ranks, and its refusals, passed"
