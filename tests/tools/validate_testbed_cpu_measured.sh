#!/usr/bin/env bash
# bench/sim/validate_testbed.py with the CPU costs MEASURED, nothing fitted (issue 12, cpu12):
# Core-INC "measurements" made by `inc sim` itself with known CPU costs (2 shared cores,
# multicast; switch 5 us per datagram, host 7 us on one switch and 6 us on two levels), each
# point carrying what `measure` records: the switches' CPU seconds and datagrams (5 us each) and
# each rank's CPU per call (host cost x 2 datagrams per 8 KiB slot, up and down).
# `calibrate --cores 2 --host-packet-us measured` on one switch must write exactly 7 and 5 (no
# fit); `validate` must then reproduce the one-switch points (within 0.5%) and miss the two-level
# ones (their hosts' cost was 6), and `validate --cpu-per-shape` (each shape its own measured
# costs) must reproduce both shapes.
set -euo pipefail
inc=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
script="$src/bench/sim/validate_testbed.py"

python3 - "$inc" "$tmp/measured.json" <<'PY'
import csv, json, subprocess, sys
inc, out = sys.argv[1], sys.argv[2]
rows = []
for shape, host_us in (([1, 8], 7.0), ([2, 8], 6.0)):
    topo = (["--topology", "single_switch"] if shape[0] == 1 else
            ["--topology", "fat_tree2", "--radix", "6", "--oversubscription", "2", "--routing", "dmodk"])
    for algo in ("ring", "inc"):
        for size in (1 << 20, 4 << 20):
            subprocess.run([inc, "sim", "run", "-c", "allreduce", "-a", algo, "-b", f"{size}B", "--hosts", "8",
                            "--link-gbps", "1", "--overhead-us", "40", "--reduce-GBps", "2", "--matching", "dataflow",
                            "--inc-chunk", "8KiB", "--switch-memory", "512KiB", "--no-progress",
                            "--switch-packet-us", "5", "--host-packet-us", str(host_us), "--switch-multicast", "true",
                            "--cpu-cores", "2", "--csv", out + ".csv"] + topo, check=True, stdout=subprocess.DEVNULL)
            t = float(next(csv.DictReader(open(out + ".csv")))["time_s"])
            r = {"shape": shape, "algo": algo, "bytes": size, "rate_gbps": 1.0, "time_s": t, "runs": [t],
                 "switch_cpu_s": 5e-6 * 1000, "switch_packets": 1000}
            if algo == "inc":
                r.update(host_cpu_us=host_us * 2 * size / 8192, spin_us="0")
            rows.append(r)
json.dump(rows, open(out, "w"))
PY

common=(--inc "$inc" --measured "$tmp/measured.json" --oversubscription 2 --algos ring,inc --sizes 1M,4M
        --matching dataflow --net "$tmp/cal.toml")
out=$(python3 "$script" calibrate "${common[@]}" --shapes 1x8 --cores 2 --host-packet-us measured) ||
  fail "calibrate exited $?"$'\n'"$out"
grep -q "^# 2 shared cores: switch_packet_us = 5.000 (measured), host_packet_us = 7.000 (measured)" <<<"$out" ||
  fail "costs not the measured ones"$'\n'"$out"
python3 - "$tmp/cal.toml" <<'PY' || exit 1
import sys, tomllib
n = tomllib.load(open(sys.argv[1], "rb"))["network"]
want = {"switch_packet_us": 5, "host_packet_us": 7, "cpu_cores": 2, "switch_multicast": True, "switch_reduce_GBps": 0}
for k, v in want.items():
    if n.get(k) != v:
        sys.exit(f"FAIL: {k} = {n.get(k)} in the file, want {v}")
if "measured: the ranks' process CPU" not in open(sys.argv[1]).read():
    sys.exit("FAIL: the file does not say host_packet_us was measured")
# The host terms are fitted under the same shared cores as the "measurements" (the ring's
# reductions wait for them): the fit must find the costs they were made with.
for k, v in {"host_overhead_us": 40, "reduce_GBps": 2}.items():
    if abs(n.get(k, 0) / v - 1) > 0.02:
        sys.exit(f"FAIL: {k} = {n.get(k)} fitted, the measurements were made with {v}")
PY

errors() {  # validate's Core-INC errors, "shape:size:error%" per point
  python3 "$script" validate "${common[@]}" --shapes 1x8,2x8 "$@" -o "$tmp/rows.json" >/dev/null
  python3 -c '
import json, sys
for r in json.load(open(sys.argv[1])):
    if r["algo"] == "inc":
        print("%dx%d:%d:%.2f" % (r["shape"][0], r["shape"][1], r["bytes"], 100 * r["sim_error"]))' "$tmp/rows.json"
}
check() {  # label, then "shape bound" pairs: |error| <= bound for "le", > bound for "gt"
  local label=$1 rows; shift
  rows=$(errors "${@:3}")
  python3 - "$label" "$1" "$2" "$rows" <<'PY' || exit 1
import sys
label, one, two, rows = sys.argv[1:]
for line in rows.split():
    shape, size, err = line.split(":")
    want = one if shape == "1x8" else two
    kind, bound = want.split("=")
    ok = abs(float(err)) <= float(bound) if kind == "le" else abs(float(err)) > float(bound)
    if not ok:
        sys.exit(f"FAIL: {label}: {shape} {size} B error {err}%, want {want}")
    print(f"{label}: {shape} {size} B {err}%")
PY
}
# One switch's measured costs: its own points exact, the two-level ones (hosts 6 us, not 7) off.
check "from one switch" le=0.5 gt=2
# Each shape its own measured costs: both exact.
check "per shape" le=0.5 le=0.5 --cpu-per-shape
echo "validate_testbed_cpu_measured: measured CPU costs carried into the file and the validation"
