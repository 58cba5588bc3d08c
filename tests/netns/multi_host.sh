#!/usr/bin/env bash
# Multi-host integration test on one machine, built with `inc testbed` (docs/TESTBED.md): two
# host namespaces with two ranks each and the Core-INC switch on the bridge between them,
# unshaped links:
#   h0 10.99.1.1  ranks 0 and 1 (rank 0 hosts the rendezvous store, as under mpirun/torchrun)
#   h1 10.99.1.2  ranks 2 and 3
#   sw 10.99.0.1  the switch
# The ranks find each other through the store hosted by rank 0 (INC_STORE=10.99.1.1:29500,
# INC_STORE_HOST=1: the testbed's own store is not used) and run verified collectives through
# the switch and on the hosts, 128 B to 4 MiB (every reduce_scatter/allgather/alltoall row has
# whole elements per rank). It fails unless
#   - the testbed (switches included) started and every rank exited 0, no WRONG result;
#   - every `-a inc` row of allreduce, reduce_scatter, allgather and broadcast ran in the
#     network, via the switch at 10.99.0.1:7710 (the report's reason), verified, count > 0;
#   - the switch's own counters (printed at its exit) show at least the payload those rows
#     had to send it: per iteration p x size for allreduce and reduce_scatter (every rank
#     contributes the whole vector), size for allgather (a block per rank) and broadcast (the
#     root), where size is the bench's size column;
# Skips, saying so, where namespaces cannot be created.
# usage: multi_host.sh path/to/inc
set -uo pipefail
inc=$(readlink -f "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
log=$dir/log
json=$dir/bench.json

if ! ip netns add "tbmh-probe$$" 2>/dev/null; then
  echo "SKIPPED: cannot create network namespaces here (needs root and iproute2)"
  exit 77
fi
ip netns del "tbmh-probe$$"

ranks=4
INC_TIMEOUT=60 "$inc" testbed --prefix tbmh --hosts 2 --ranks-per-host 2 --link none -- \
  sh -c 'INC_STORE=10.99.1.1:29500 INC_STORE_HOST=1 exec "$0" bench \
           -c allreduce,reduce_scatter,allgather,broadcast,alltoall -a inc,auto \
           -b 128 -e 4M -f 32 -n 3 -w 1 --no-progress --json "$1"' "$inc" "$json" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}  # bench exits non-zero on errors or WRONG, and the testbed returns that
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc"; exit 1; }
grep -q "WRONG" "$log" && { echo "FAIL: WRONG results"; exit 1; }
[ -s "$json" ] || { echo "FAIL: rank 0 wrote no $json"; exit 1; }

# "[switch] switch switch: packets in N out N, bytes in B out B, ..." (the switch's --stats)
bytes_in=$(sed -nE 's/^\[switch\] switch switch: packets in [0-9]+ out [0-9]+, bytes in ([0-9]+) .*/\1/p' "$log")
[ -n "$bytes_in" ] || { echo "FAIL: no switch counters in the output (did the switch run?)"; exit 1; }

python3 - "$json" "$bytes_in" "$ranks" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
bytes_in, p = int(sys.argv[2]), int(sys.argv[3])
fail = []
want_sizes = [128, 4096, 131072, 4194304]
need = 0  # payload bytes the in-network rows sent the switch, at least
inc_rows = 0
for c in ("allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall"):
    for algo in ("inc", "auto"):
        sizes = [r["size_bytes"] for r in rows if r["collective"] == c and r["requested"] == algo]
        if sizes != want_sizes:
            fail.append(f"{c} -a {algo}: sizes {sizes}, expected {want_sizes}")
for r in rows:
    where = f'{r["collective"]} {r["size_bytes"]} B (-a {r["requested"]}: {r["algo"]})'
    if r["count"] <= 0:
        fail.append(f"{where}: count {r['count']}")
    if r["correct"] != 1:
        fail.append(f"{where}: not verified (correct={r['correct']})")
    carried = r["collective"] != "alltoall"  # the switch has nothing to do for alltoall
    if r["requested"] == "inc" and carried and not (r["in_network"] and r["algo"] == "inc"):
        fail.append(f"{where}: ran on the hosts: {r['reason']}")
    if r["in_network"] and not carried:
        fail.append(f"{where}: claims the network: {r['reason']}")
    if r["in_network"]:
        if "via switch 10.99.0.1:7710" not in r["reason"]:
            fail.append(f"{where}: in the network, but not via the switch at 10.99.0.1:7710: {r['reason']}")
        runs = r["iters"] + r["warmup"]
        per_run = p * r["size_bytes"] if r["collective"] in ("allreduce", "reduce_scatter") else r["size_bytes"]
        need += runs * per_run
        inc_rows += 1
if bytes_in < need:
    fail.append(f"the switch received {bytes_in} B, less than the {need} B of payload the "
                f"{inc_rows} in-network rows sent it")
for f in fail:
    print("FAIL:", f)
if fail:
    sys.exit(1)
print(f"in-network rows: {inc_rows}, each via 10.99.0.1:7710 and verified; the switch received "
      f"{bytes_in} B >= {need} B of their payload")
PY
[ $? -eq 0 ] || exit 1
echo "multi-host: 4 ranks on 2 hosts + a switch host: all collectives verified, the in-network rows through the switch"
