#!/usr/bin/env bash
# Multi-host integration test on one machine, built with `inc testbed` (docs/TESTBED.md): two
# host namespaces with two ranks each and the Core-INC switch on the bridge between them,
# unshaped links:
#   h0 10.99.1.1  ranks 0 and 1 (rank 0 hosts the rendezvous store, as under mpirun/torchrun)
#   h1 10.99.1.2  ranks 2 and 3
#   sw 10.99.0.1  the switch
# The ranks find each other through the store hosted by rank 0 (INC_STORE=10.99.1.1:29500,
# INC_STORE_HOST=1: the testbed's own store is not used), run verified collectives through the
# switch and on the hosts, and must all succeed; the in-network rows must have run through the
# switch (algorithm inc*, switch counters). Skips, saying so, where namespaces cannot be created.
# usage: multi_host.sh path/to/inc
set -u
inc=$(readlink -f "$1")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if ! ip netns add "tbmh-probe$$" 2>/dev/null; then
  echo "SKIPPED: cannot create network namespaces here (needs root and iproute2)"
  exit 77
fi
ip netns del "tbmh-probe$$"

INC_TIMEOUT=60 "$inc" testbed --prefix tbmh --hosts 2 --ranks-per-host 2 --link none -- \
  sh -c 'INC_STORE=10.99.1.1:29500 INC_STORE_HOST=1 exec "$0" bench \
           -c allreduce,reduce_scatter,allgather,broadcast,alltoall -a inc,auto \
           -b 8 -e 4M -f 32 -n 3 -w 1 --no-progress' "$inc" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}  # bench exits non-zero on errors or WRONG, and the testbed returns that
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc"; exit 1; }
grep -q "WRONG" "$log" && { echo "FAIL: WRONG results"; exit 1; }
n=$(grep -cE '^\[h0 r0\] +(allreduce|reduce_scatter|allgather|broadcast) .* inc\* .* OK$' "$log")
[ "$n" -ge 8 ] || { echo "FAIL: only $n verified in-network rows"; exit 1; }
pin=$(sed -nE 's/^\[switch\] switch switch: packets in ([0-9]+).*/\1/p' "$log")
[ -n "$pin" ] && [ "$pin" -gt 0 ] || { echo "FAIL: the switch saw no packets ('$pin')"; exit 1; }
echo "multi-host: 4 ranks on 2 hosts + a switch host: all collectives verified ($n in-network rows, $pin packets at the switch)"
