#!/usr/bin/env bash
# Multi-host integration test on one machine: three network namespaces joined by veth pairs
# through a bridge, each a "host" with its own address:
#   incH0 10.77.0.1  rank 0 (hosts the rendezvous store) and rank 1
#   incH1 10.77.0.2  ranks 2 and 3
#   incSW 10.77.0.3  the Core-INC switch daemon
# The ranks find each other through the store as under mpirun on real hosts (INC_RANK,
# INC_WORLD_SIZE, INC_STORE), run verified collectives through the switch and on the hosts,
# and must all succeed. Skips, saying so, where namespaces cannot be created.
# usage: multi_host.sh path/to/inc
set -u
inc=$(readlink -f "$1")
pfx=inc$$
ns_h0=${pfx}H0 ns_h1=${pfx}H1 ns_sw=${pfx}SW ns_br=${pfx}BR

cleanup() {
  for ns in "$ns_h0" "$ns_h1" "$ns_sw" "$ns_br"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT

if ! ip netns add "$ns_br" 2>/dev/null; then
  echo "SKIPPED: cannot create network namespaces here (needs root and iproute2)"
  exit 0
fi
set -e
ip -n "$ns_br" link add br0 type bridge
ip -n "$ns_br" link set br0 up
i=1
for ns in "$ns_h0" "$ns_h1" "$ns_sw"; do
  ip netns add "$ns"
  ip link add "v${pfx}${i}" type veth peer name "b${pfx}${i}"
  ip link set "v${pfx}${i}" netns "$ns"
  ip link set "b${pfx}${i}" netns "$ns_br"
  ip -n "$ns_br" link set "b${pfx}${i}" master br0 up
  ip -n "$ns" link set "v${pfx}${i}" name eth0
  ip -n "$ns" addr add "10.77.0.${i}/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  i=$((i + 1))
done
set +e

port=$((20000 + $$ % 20000))
echo "== switch in $ns_sw at 10.77.0.3:7710; store at 10.77.0.1:$port"
ip netns exec "$ns_sw" "$inc" switch --bind 10.77.0.3:7710 --job 1:4:16 --slot-elements 4096 --stats &
sw_pid=$!

env_for() {  # rank
  echo INC_RANK=$1 INC_WORLD_SIZE=4 INC_STORE=10.77.0.1:$port INC_SWITCH=10.77.0.3:7710 INC_TIMEOUT=60
}
pids=()
run_rank() {  # namespace rank
  (
    set -o pipefail
    ip netns exec "$1" env $(env_for "$2") "$inc" bench -c allreduce,reduce_scatter,allgather,broadcast,alltoall \
      -a inc,auto -b 8 -e 4M -f 32 -n 3 -w 1 --no-progress 2>&1 | sed "s/^/[${1: -2} rank $2] /"
  ) &
  pids+=($!)
}
run_rank "$ns_h0" 0
run_rank "$ns_h0" 1
run_rank "$ns_h1" 2
run_rank "$ns_h1" 3
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done  # bench exits non-zero on errors or WRONG
kill -TERM "$sw_pid" 2>/dev/null
wait "$sw_pid" 2>/dev/null
if [ $rc -eq 0 ]; then echo "multi-host: 4 ranks on 2 hosts + a switch host: all collectives verified"; fi
exit $rc
