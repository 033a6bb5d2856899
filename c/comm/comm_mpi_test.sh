#!/usr/bin/env bash
# comm_mpi_test.sh: comm_test's collectives across 2, 3 and 4 ranks that mpirun starts on this host,
# over Open MPI's TCP transport on loopback (not shared memory), as root where CI runs as root.
# usage: comm_mpi_test.sh COMM_TEST_BINARY
set -euo pipefail
bin=$1
# In a sanitizer build ASan checks every access, but LeakSanitizer is off under mpirun: Open MPI
# keeps allocations until exit in components it unloads at MPI_Finalize, so their stacks cannot
# even be named for a suppression (comm_test alone, without MPI, is leak-checked).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
if ! command -v mpirun > /dev/null; then
  echo "SKIPPED: comm_mpi_test (no mpirun: scripts/setup.sh installs openmpi-bin)"
  exit 0
fi
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
for n in 2 3 4; do
  out=$(timeout 120 mpirun "${root[@]}" --oversubscribe -n "$n" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x ASAN_OPTIONS "$bin" --mpi 2>&1) || {
    echo "$out"; echo "comm_mpi_test: $n ranks failed"; exit 1; }
  got=$(grep -c "^comm_test: all checks passed" <<< "$out" || true)
  if [ "$got" -ne "$n" ]; then echo "$out"; echo "comm_mpi_test: $got of $n ranks passed"; exit 1; fi
  echo "comm_mpi_test: $n ranks passed"
done
