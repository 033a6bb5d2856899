#!/usr/bin/env bash
# tp_model_mpi_test.sh: tp_model_test at 2 and 4 tensor-parallel ranks that mpirun starts on this
# host, over Open MPI's TCP transport on loopback (not shared memory), as root where CI runs as root.
# usage: tp_model_mpi_test.sh TP_MODEL_TEST_BINARY
# FERRITE_TP_STEPS: greedy steps per prompt (12 here, to keep `make test` short; the 64 of
# docs/CLAIMS.md C-TP-003: bazel test //c/model:tp_model_mpi_test --test_env=FERRITE_TP_STEPS=64).
set -euo pipefail
bin=$1
# LeakSanitizer is off under mpirun: Open MPI keeps allocations in components it unloads at
# MPI_Finalize (comm_mpi_test.sh); ASan still checks every access.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
if ! command -v mpirun > /dev/null; then
  echo "SKIPPED: tp_model_mpi_test (no mpirun: scripts/setup.sh installs openmpi-bin)"
  exit 0
fi
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
for n in 2 4; do
  out=$(timeout 1500 mpirun "${root[@]}" --oversubscribe -n "$n" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x ASAN_OPTIONS -x HOME -x FERRITE_DATA_DIR \
    "$bin" --mpi "${FERRITE_TP_STEPS:-12}" 2>&1) || { echo "$out"; echo "tp_model_mpi_test: $n ranks failed"; exit 1; }
  echo "$out" | grep -E "^(tp_model_test|SKIPPED)" || true
  got=$(grep -c "^tp_model_test: all checks passed" <<< "$out" || true)
  if [ "$got" -ne "$n" ]; then echo "$out"; echo "tp_model_mpi_test: $got of $n ranks passed"; exit 1; fi
  echo "tp_model_mpi_test: $n ranks passed"
done
