#!/usr/bin/env bash
# netns-hosts.sh: hosts of our own for multi-rank tests, as network namespaces joined by veth pairs
# to a bridge (root is needed; iproute2). Loopback and these addresses only: nothing else is ever a
# target, and the namespaces reach nothing outside.
#   netns-hosts.sh up N [PREFIX]   namespaces PREFIX-h0 .. PREFIX-h(N-1) at 10.213.K.(i+1)/24, the
#                                  bridge PREFIX-br at 10.213.K.254 (K from the prefix, 1..250);
#                                  prints the subnet
#   netns-hosts.sh down [PREFIX]   removes them (idempotent)
#   netns-hosts.sh exec HOST CMD.. runs CMD in host HOST's namespace (an mpirun launch agent can
#                                  be this)
#   netns-hosts.sh bytes [PREFIX]  per host: the bytes its veth carried (tx rx), as the kernel counts
set -euo pipefail
cmd=${1:-}
prefix=${3:-${PREFIX:-fer}}
[ "$cmd" = down ] || [ "$cmd" = bytes ] && prefix=${2:-${PREFIX:-fer}}
subnet_id() { # a stable 1..250 from the prefix, so parallel tests with other prefixes do not clash
  echo $(( ($(printf '%s' "$1" | cksum | cut -d' ' -f1) % 250) + 1 ))
}
k=$(subnet_id "$prefix")
case "$cmd" in
up)
  n=${2:?usage: netns-hosts.sh up N [PREFIX]}
  "$0" down "$prefix"
  ip link add "$prefix-br" type bridge
  ip addr add "10.213.$k.254/24" dev "$prefix-br"
  ip link set "$prefix-br" up
  for ((i = 0; i < n; i++)); do
    ns="$prefix-h$i"
    ip netns add "$ns"
    ip link add "$prefix-v$i" type veth peer name eth0 netns "$ns"
    ip link set "$prefix-v$i" master "$prefix-br" up
    ip -n "$ns" addr add "10.213.$k.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  echo "10.213.$k.0/24"
  ;;
down)
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix-h[0-9]*$" || true); do ip netns del "$ns"; done
  for l in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^$prefix-(v[0-9]+|br)$" || true); do
    ip link del "$l" 2> /dev/null || true
  done
  ;;
exec)
  host=${2:?usage: netns-hosts.sh exec HOST CMD...}
  shift 2
  exec ip netns exec "$host" "$@"
  ;;
bytes)
  for v in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^$prefix-v[0-9]+$" | sort -V); do
    echo "$v $(cat /sys/class/net/$v/statistics/tx_bytes) $(cat /sys/class/net/$v/statistics/rx_bytes)"
  done
  ;;
*)
  sed -n '2,12p' "$0"
  exit 2
  ;;
esac
