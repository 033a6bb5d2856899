#!/usr/bin/env bash
# tp_netns_test.sh: tp_model_test (SmolLM2 over tensor-parallel ranks against one process) with
# each rank in a host of its own: network namespaces joined by veth pairs to a bridge
# (scripts/comm/netns-hosts.sh), mpirun forced onto TCP over that subnet (no shared memory; PMIx's
# channel too). The same checks pass on 2 and 4 hosts, and the bytes each host's veth carried agree
# with what the rank handed MPI within 10% plus 128 bytes of framing a message (C-TP-007). Needs root (CI runs as root): SKIPPED
# otherwise.
# usage: tp_netns_test.sh TP_MODEL_TEST_BINARY NETNS_HOSTS_SCRIPT
set -euo pipefail
bin=$(realpath "$1")
hosts=$(realpath "$2")
# LeakSanitizer is off under mpirun (comm_mpi_test.sh says why); ASan still checks every access.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
if ! command -v mpirun > /dev/null; then echo "SKIPPED: tp_netns_test (no mpirun)"; exit 0; fi
if [ "$(id -u)" -ne 0 ] || ! ip netns add fer-probe-$$ 2> /dev/null; then
  echo "SKIPPED: tp_netns_test (network namespaces need root)"; exit 0
fi
ip netns del fer-probe-$$
home=$(getent passwd "$(id -u)" | cut -d: -f6)
export FERRITE_DATA_DIR=${FERRITE_DATA_DIR:-$home/.cache/ferrite}
if [ ! -f "$FERRITE_DATA_DIR/smollm2-135m-instruct-q4_1.gguf" ]; then
  echo "SKIPPED: tp_netns_test (smollm2-135m-instruct-q4_1.gguf missing: scripts/fetch-test-data.sh)"; exit 0
fi
prefix=ft$$
trap '"$hosts" down "$prefix"' EXIT
# what crosses the veths is the optimized build's to count; the sanitizer build checks memory elsewhere
# (grep reads all of ldd's output: with -q it could stop first, and pipefail would then see ldd's
# SIGPIPE and run the sanitizer build here after all: 214 s of make test-sanitize)
if ldd "$bin" 2> /dev/null | grep libasan > /dev/null; then echo "SKIPPED: tp_netns_test in the sanitizer build"; exit 0; fi
hosts_counts="2 4"
for n in $hosts_counts; do
  subnet=$("$hosts" up "$n" "$prefix")
  apps=()
  for ((i = 0; i < n; i++)); do
    [ "$i" -gt 0 ] && apps+=(:)
    apps+=(-n 1 "$hosts" exec "$prefix-h$i" "$bin" --mpi 4 smollm2)
  done
  declare -A before
  while read -r v tx rx; do before[$v]=$rx; done < <("$hosts" bytes "$prefix")
  out=$(PMIX_MCA_ptl_tcp_if_include=$subnet timeout 900 mpirun --allow-run-as-root --oversubscribe --mca pml ob1 \
    --mca btl self,tcp --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
    -x PMIX_MCA_ptl_tcp_if_include -x ASAN_OPTIONS -x FERRITE_DATA_DIR "${apps[@]}" 2>&1) \
    || { echo "$out"; echo "tp_netns_test: $n hosts failed"; exit 1; }
  grep -E "^tp_model_test: SmolLM2" <<< "$out" || true
  got=$(grep -c "^tp_model_test: all checks passed" <<< "$out" || true)
  [ "$got" -eq "$n" ] || { echo "$out"; echo "tp_netns_test: $got of $n hosts passed"; exit 1; }
  while read -r v tx rx; do
    i=${v#"$prefix-v"}
    layer=$(sed -n "s/^tp_traffic: rank $i sent \([0-9]*\) in .*/\1/p" <<< "$out")
    msgs=$(sed -n "s/^tp_traffic: rank $i sent [0-9]* in \([0-9]*\) messages$/\1/p" <<< "$out")
    wire=$((rx - before[$v])) # what the host sent, as its veth received it on the bridge side
    # a decode step's messages are small (a 4-rank ring's chunk of SmolLM2's 576 floats is 576
    # bytes), so each one's framing counts: Ethernet, IP, TCP and Open MPI's headers and the ACKs
    # it draws, allowed at 128 bytes a message on top of the 10%
    awk -v l="$layer" -v w="$wire" -v m="$msgs" -v n="$n" -v i="$i" 'BEGIN {
      d = w - l; if (d < 0) d = -d
      printf "tp_netns_test: %d hosts: host %d handed MPI %d bytes in %d messages, its veth carried %d (%+.1f%%, %.0f bytes a message)\n", n, i, l, m, w, 100 * (w - l) / l, (w - l) / m
      exit !(l > 0 && d <= 0.10 * l + 128 * m) }' \
      || { echo "tp_netns_test: host $i: the veth and the layer differ by more than 10% and the framing"; exit 1; }
  done < <("$hosts" bytes "$prefix")
  "$hosts" down "$prefix"
done
echo "tp_netns_test: passed"
