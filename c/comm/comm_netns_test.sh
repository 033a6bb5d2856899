#!/usr/bin/env bash
# comm_netns_test.sh: comm_test's collectives with each rank in a host of its own: network
# namespaces joined by veth pairs to a bridge (scripts/comm/netns-hosts.sh), mpirun forced onto TCP
# over that subnet (no shared memory, which would cross namespaces through /dev/shm; PMIx's own
# channel too). Then a traffic run: the bytes each host's veth carried agree with what the layer
# counted within 10%. Needs root (CI runs as root): SKIPPED otherwise.
# usage: comm_netns_test.sh COMM_TEST_BINARY NETNS_HOSTS_SCRIPT
set -euo pipefail
bin=$(realpath "$1")
hosts=$(realpath "$2")
# In a sanitizer build ASan checks every access, but LeakSanitizer is off under mpirun: Open MPI
# keeps allocations until exit in components it unloads at MPI_Finalize, so their stacks cannot
# even be named for a suppression (comm_test alone, without MPI, is leak-checked).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
if ! command -v mpirun > /dev/null; then echo "SKIPPED: comm_netns_test (no mpirun)"; exit 0; fi
if [ "$(id -u)" -ne 0 ] || ! ip netns add fer-probe-$$ 2> /dev/null; then
  echo "SKIPPED: comm_netns_test (network namespaces need root)"; exit 0
fi
ip netns del fer-probe-$$
prefix=fc$$
trap '"$hosts" down "$prefix"' EXIT
run() { # N ARGS...: mpirun with rank i in host i
  local n=$1; shift
  local apps=()
  for ((i = 0; i < n; i++)); do
    [ "$i" -gt 0 ] && apps+=(:)
    apps+=(-n 1 "$hosts" exec "$prefix-h$i" "$bin" "$@")
  done
  PMIX_MCA_ptl_tcp_if_include=$subnet timeout 120 mpirun --allow-run-as-root --oversubscribe --mca pml ob1 \
    --mca btl self,tcp --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
    -x PMIX_MCA_ptl_tcp_if_include -x ASAN_OPTIONS "${apps[@]}" 2>&1
}
for n in 2 4; do
  subnet=$("$hosts" up "$n" "$prefix")
  out=$(run "$n" --mpi) || { echo "$out"; echo "comm_netns_test: $n hosts failed"; exit 1; }
  got=$(grep -c "^comm_test: all checks passed" <<< "$out" || true)
  [ "$got" -eq "$n" ] || { echo "$out"; echo "comm_netns_test: $got of $n hosts passed"; exit 1; }
  echo "comm_netns_test: the collectives on $n hosts passed"
  # traffic: 20 all-reduces of 1M floats; each host's veth against the layer's count
  declare -A before
  while read -r v tx rx; do before[$v]=$rx; done < <("$hosts" bytes "$prefix")
  out=$(run "$n" --mpi-traffic 1048576 20) || { echo "$out"; exit 1; }
  while read -r v tx rx; do
    i=${v#"$prefix-v"}
    layer=$(sed -n "s/^comm_traffic: rank $i sent \([0-9]*\) .*/\1/p" <<< "$out")
    wire=$((rx - before[$v])) # what the host sent, as its veth received it on the bridge side
    echo "comm_netns_test: host $i sent $layer bytes by the layer's count, $wire on its veth"
    awk -v l="$layer" -v w="$wire" 'BEGIN { d = (w - l) / l; if (d < 0) d = -d; exit !(l > 0 && d <= 0.10) }' \
      || { echo "comm_netns_test: host $i: the veth and the layer differ by more than 10%"; exit 1; }
  done < <("$hosts" bytes "$prefix")
  "$hosts" down "$prefix"
done
echo "comm_netns_test: passed"
