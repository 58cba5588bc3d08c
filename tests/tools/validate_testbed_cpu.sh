#!/usr/bin/env bash
# bench/sim/validate_testbed.py calibrate --cores (issue 12): Core-INC "measurements" made by
# `inc sim` itself with known CPU costs (switch 5 us and host 7 us per datagram, 2 shared cores,
# multicast; host algorithms 40 us, 2 GB/s) on one switch and on two levels must give back the
# host cost within 3% (the switch cost comes from the switches' counters, given here as
# --switch-packet-us), written to the file with cpu_cores and switch_multicast, which
# `inc sim run --net` then applies as the same flags would. The measurements are made under inc
# sim's default matching (dataflow), so the calibration runs with `--matching dataflow` too (its
# own default is the runtime's `ready`, whose notices tool_validate_testbed checks).
set -euo pipefail
inc=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
script="$src/bench/sim/validate_testbed.py"
cpu=(--switch-packet-us 5 --host-packet-us 7 --switch-multicast true --cpu-cores 2)

python3 - "$inc" "$tmp/measured.json" "${cpu[@]}" <<'PY'
import csv, json, subprocess, sys
inc, out, cpu = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
for shape in ([1, 8], [2, 8]):
    topo = (["--topology", "single_switch"] if shape[0] == 1 else
            ["--topology", "fat_tree2", "--radix", "6", "--oversubscription", "2", "--routing", "dmodk"])
    for algo in ("ring", "inc"):
        for size in (1 << 20, 4 << 20, 16 << 20):
            subprocess.run([inc, "sim", "run", "-c", "allreduce", "-a", algo, "-b", f"{size}B", "--hosts", "8",
                            "--link-gbps", "1", "--overhead-us", "40", "--reduce-GBps", "2",
                            "--inc-chunk", "8KiB", "--switch-memory", "512KiB", "--no-progress",
                            "--csv", out + ".csv"] + cpu + topo, check=True, stdout=subprocess.DEVNULL)
            t = float(next(csv.DictReader(open(out + ".csv")))["time_s"])
            rows.append({"shape": shape, "algo": algo, "bytes": size, "rate_gbps": 1.0, "time_s": t, "runs": [t]})
json.dump(rows, open(out, "w"))
PY

out=$(python3 "$script" --inc "$inc" calibrate --measured "$tmp/measured.json" --shapes 1x8,2x8 --oversubscription 2 \
      --algos ring,inc --cores 2 --switch-packet-us 5 --matching dataflow --net "$tmp/cal.toml") || fail "calibrate exited $?"$'\n'"$out"
grep -q "^# 2 shared cores: switch_packet_us = 5.000 (measured)" <<<"$out" || fail "switch cost not kept"$'\n'"$out"
python3 - "$tmp/cal.toml" <<'PY' || exit 1
import sys, tomllib
n = tomllib.load(open(sys.argv[1], "rb"))["network"]
if abs(n["host_packet_us"] / 7 - 1) > 0.03:
    sys.exit(f"FAIL: calibrated host_packet_us = {n['host_packet_us']}, the measurements were made with 7")
want = {"switch_packet_us": 5, "cpu_cores": 2, "switch_multicast": True, "switch_reduce_GBps": 0}
for k, v in want.items():
    if n.get(k) != v:
        sys.exit(f"FAIL: {k} = {n.get(k)} in the file, want {v}")
print(f"calibrated: {n}")
PY

# Without --switch-packet-us the counters are needed: sim-made measurements have none.
if python3 "$script" --inc "$inc" calibrate --measured "$tmp/measured.json" --algos ring,inc --cores 2 \
     --net "$tmp/x.toml" >"$tmp/err" 2>&1; then
  fail "--cores without switch counters accepted"
fi
grep -q "switches' CPU counters" "$tmp/err" || fail "no reason given: $(cat "$tmp/err")"

# inc sim run --net applies the CPU keys as the flags do.
sim() { "$inc" sim run --topology fat_tree2 --radix 6 --oversubscription 2 --routing dmodk --hosts 8 -a inc -b 4MiB \
        --link-gbps 1 --inc-chunk 8KiB --switch-memory 512KiB --no-progress "$@" |
        awk '$1 == "job" && $2 == "allreduce" {print $7, $8}'; }
[ "$(sim --net "$tmp/cal.toml" --host-packet-us 7)" = "$(sim --overhead-us 40 --reduce-GBps 2 "${cpu[@]}")" ] ||
  fail "--net differs from the flags: $(sim --net "$tmp/cal.toml" --host-packet-us 7) against $(sim --overhead-us 40 --reduce-GBps 2 "${cpu[@]}")"
[ "$(sim --net "$tmp/cal.toml" --cpu-cores 0)" != "$(sim --net "$tmp/cal.toml")" ] || fail "cpu_cores changed nothing"
echo "validate_testbed_cpu: the CPU calibration and its file checked"
