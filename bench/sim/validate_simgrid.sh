#!/usr/bin/env bash
# Validates `inc sim` against SimGrid 3.32 (S4U) on the same fat trees, routes and schedules.
# Usage: bench/sim/validate_simgrid.sh [BUILD_DIR] [SIZES...]   (default sizes: 16 64 256 1024)
# Prints, per size and algorithm: SimGrid CM02 time, inc sim time with plain max-min and with
# SimGrid's latency-weighted sharing (--rtt-weighted), their ratios, SimGrid LV08 (TCP
# corrections on) and the wall-clock time of both simulators. Per-message host overhead is 0 in
# inc sim here because SimGrid has no such term; messages are unsegmented (one per step).
# MATCHINGS (default "dataflow rendezvous eager"): inc sim's --matching and the driver's, each
# run on both (EAGER, default 64KiB: the eager threshold); the rtt-weighted and LV08 columns are
# run for dataflow only ("-" otherwise). ROUTING (ecmp or dmodk, default ecmp): both use it.
set -euo pipefail
BUILD=${1:-build}
shift || true
SIZES=${*:-16 64 256 1024}
INC=$BUILD/tools/inc
SG=$BUILD/bench/sim/inc_simgrid_driver
BYTES=${BYTES:-64MiB}
MATCHINGS=${MATCHINGS:-dataflow rendezvous eager}
EAGER=${EAGER:-64KiB}
ROUTING=${ROUTING:-ecmp}
for b in "$INC" "$SG"; do [ -x "$b" ] || { echo "missing $b (build inc_tool and inc_simgrid_driver)" >&2; exit 1; }; done
radix_for() { case $1 in 16) echo 8;; 64) echo 16;; 256) echo 32;; *) echo 64;; esac; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf "%-6s %-20s %-10s %12s %12s %7s %12s %7s %12s %9s %9s\n" hosts algorithm matching simgrid_CM02 incsim ratio incsim_rtt ratio simgrid_LV08 sg_wall_s inc_wall_s
for m in $MATCHINGS; do
for n in $SIZES; do
  r=$(radix_for "$n")
  for spec in "allreduce ring" "allreduce recursive_doubling" "allreduce rabenseifner" "alltoall pairwise"; do
    set -- $spec
    c=$1 a=$2
    [ "$c" = alltoall ] && [ "$n" -gt 64 ] && continue   # p^2 concurrent flows: see SIMULATOR.md, limitations
    common="--topology fat_tree2 --hosts $n --radix $r --collective $c --algo $a --bytes $BYTES --segment $BYTES --routing $ROUTING --matching $m --eager-threshold $EAGER"
    sg=$("$SG" $common --model CM02 2>/dev/null)
    sg_t=$(cut -d, -f7 <<<"$sg"); sg_w=$(cut -d, -f8 <<<"$sg")
    lv=nan rtt_t=nan
    [ "$m" = dataflow ] && lv=$("$SG" $common --model LV08 2>/dev/null | cut -d, -f7)
    t0=$(date +%s.%N)
    "$INC" sim run $common --overhead-us 0 --no-progress --json "$tmp" >/dev/null 2>&1
    t1=$(date +%s.%N)
    inc_t=$(python3 -c "import json,sys;print(json.load(open('$tmp'))['jobs'][0]['time_s'])")
    if [ "$m" = dataflow ]; then
      "$INC" sim run $common --overhead-us 0 --rtt-weighted --no-progress --json "$tmp" >/dev/null 2>&1
      rtt_t=$(python3 -c "import json,sys;print(json.load(open('$tmp'))['jobs'][0]['time_s'])")
    fi
    python3 - "$n" "$a" "$m" "$sg_t" "$inc_t" "$rtt_t" "$lv" "$sg_w" "$t0" "$t1" <<'PY'
import math, sys
n, a, m, sg, inc, rtt, lv, sgw, t0, t1 = sys.argv[1:]
sg, inc, rtt, lv = map(float, (sg, inc, rtt, lv))
ms = lambda x: f"{'-':>10}  " if math.isnan(x) else f"{x*1e3:10.3f}ms"
ratio = lambda x: f"{'-':>7}" if math.isnan(x) else f"{x/sg:7.4f}"
print(f"{n:<6} {a:<20} {m:<10} {sg*1e3:10.3f}ms {inc*1e3:10.3f}ms {inc/sg:7.4f} {ms(rtt)} {ratio(rtt)} {ms(lv)} {float(sgw):9.2f} {float(t1)-float(t0):9.2f}")
PY
  done
done
done
