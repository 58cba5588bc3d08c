#!/usr/bin/env bash
# Small-message allreduce latency at 8 ranks (8 B to 4 KiB, f32 sum), side by side on this
# machine: INC through a software Core-INC switch (`inc launch --switch`), INC's host
# algorithms, Gloo and Open MPI over TCP. Median of REPS runs per cell; prints one table.
# usage: scripts/compare-inc-latency.sh [BUILD_DIR] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPS=${2:-3}
N=8
INC=$BUILD/tools/inc
GLOO=$BUILD/bench/peers/inc_gloo_allreduce
MPI=$BUILD/bench/peers/inc_mpi_allreduce
cmake --build "$BUILD" --target inc_tool inc_gloo_allreduce inc_mpi_allreduce >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(-b 8 -e 4K -f 2)
for ((r = 1; r <= REPS; r++)); do
  echo "== repetition $r/$REPS" >&2
  "$INC" launch -n $N --switch --no-prefix -- "$INC" bench -c allreduce -a inc "${args[@]}" -n 200 -w 20 \
    --format csv --no-progress 2>/dev/null | grep '^allreduce' >> "$tmp/inc_switch.csv"
  "$INC" launch -n $N --no-prefix -- "$INC" bench -c allreduce -a recursive_doubling,rabenseifner,ring \
    "${args[@]}" -n 200 -w 20 --format csv --no-progress 2>/dev/null | grep '^allreduce' >> "$tmp/inc_host.csv"
  "$GLOO" -n $N -a ring,halving_doubling,bcube "${args[@]}" -i 200 -w 20 --no-header 2>/dev/null \
    | grep '^allreduce' >> "$tmp/gloo.csv"
  mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo -np $N \
    "$MPI" "${args[@]}" -i 200 -w 20 --no-header 2>/dev/null | grep '^allreduce' >> "$tmp/mpi.csv"
done
python3 - "$tmp" <<'PY'
import csv, statistics, sys, collections
d = sys.argv[1]
def best(name):
    cells = collections.defaultdict(list)          # (size, algo) -> times
    for row in csv.reader(open(f"{d}/{name}.csv")):
        if row[11] != "1": continue                # only verified results
        cells[(int(row[1]), row[5])].append(float(row[8]))
    out = {}
    for (size, algo), ts in cells.items():
        m = statistics.median(ts)
        if size not in out or m < out[size][0]: out[size] = (m, algo)
    return out
inc, host, gloo, mpi = best("inc_switch"), best("inc_host"), best("gloo"), best("mpi")
print(f"{'size':>6} | {'INC switch us':>13} | {'INC host best us':>24} | {'Gloo best us':>22} | {'MPI us':>8} | INC/host INC/min(peers)")
for s in sorted(inc):
    peers = min(gloo.get(s, (float('inf'),))[0], mpi.get(s, (float('inf'),))[0])
    h = host.get(s, (float('nan'), '-'))
    g = gloo.get(s, (float('nan'), '-'))
    m = mpi.get(s, (float('nan'), '-'))
    print(f"{s:>6} | {inc[s][0]:>13.1f} | {h[1][:13]:>13} {h[0]:>10.1f} | {g[1][:11]:>11} {g[0]:>10.1f} | {m[0]:>8.1f} | {inc[s][0]/h[0]:8.2f} {inc[s][0]/peers:8.2f}")
PY
