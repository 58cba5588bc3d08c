#!/usr/bin/env bash
# bench/sim/validate_testbed.py without a testbed: "measurements" made by `inc sim` itself with
# known costs (host overhead 40 us, reduction 2 GB/s, switch 0.2 GB/s, ready notice 300 us under
# --matching ready, the runtime's) must be calibrated back
# to those costs, written to the [network] file, and validated with every point within 10%;
# a disturbed point must show in the fit's residuals with a warning, not vanish in the fit.
# And `inc sim run --net FILE` applies the file with explicit flags winning. (Issue 12.)
set -euo pipefail
inc=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
script="$src/bench/sim/validate_testbed.py"

python3 - "$inc" "$tmp/measured.json" "$script" <<'PY'
import csv, importlib.util, json, subprocess, sys
inc, out, script = sys.argv[1:]
# The script simulates the runtime's buffered sends (its default --send-buffer: this kernel's
# tcp_wmem maximum); the "measurements" are made with the same buffer.
spec = importlib.util.spec_from_file_location("validate_testbed", script)
vt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vt)
send_buffer = f"{vt.tcp_send_buffer()}B"
rows = []
for shape in ([1, 8], [2, 8]):
    topo = (["--topology", "single_switch"] if shape[0] == 1 else
            ["--topology", "fat_tree2", "--radix", "8", "--oversubscription", "1", "--routing", "dmodk"])
    for algo in ("ring", "rabenseifner", "inc"):
        for size in (1 << 20, 4 << 20, 16 << 20):
            subprocess.run([inc, "sim", "run", "-c", "allreduce", "-a", algo, "-b", f"{size}B", "--hosts", "8",
                            "--link-gbps", "1", "--overhead-us", "40", "--reduce-GBps", "2",
                            "--switch-reduce-GBps", "0.2", "--inc-chunk", "8KiB", "--switch-memory", "512KiB",
                            "--matching", "ready", "--eager-threshold", "64KiB", "--ready-notice-us", "300",
                            "--send-buffer", send_buffer,
                            "--no-progress", "--csv", out + ".csv"] + topo, check=True, stdout=subprocess.DEVNULL)
            t = float(next(csv.DictReader(open(out + ".csv")))["time_s"])
            rows.append({"shape": shape, "algo": algo, "bytes": size, "rate_gbps": 1.0, "time_s": t, "runs": [t]})
json.dump(rows, open(out, "w"))
PY

out=$(python3 "$script" --inc "$inc" calibrate --measured "$tmp/measured.json" --net "$tmp/cal.toml") ||
  fail "calibrate exited $?"$'\n'"$out"
grep -q "^# residuals: rms 0.0%, worst 0.0%; left out .*: worst 0.0%" <<<"$out" || fail "residuals of an exact fit are not 0"$'\n'"$out"
grep -q WARNING <<<"$out" && fail "warning on an exact fit"$'\n'"$out"
python3 - "$tmp/cal.toml" <<'PY' || exit 1
import sys, tomllib
n = tomllib.load(open(sys.argv[1], "rb"))["network"]
for key, want in (("host_overhead_us", 40), ("reduce_GBps", 2), ("switch_reduce_GBps", 0.2), ("ready_notice_us", 300)):
    if abs(n[key] / want - 1) > 0.02:
        sys.exit(f"FAIL: calibrated {key} = {n[key]}, the measurements were made with {want}")
print(f"calibrated: {n}")
PY

out=$(python3 "$script" --inc "$inc" validate --measured "$tmp/measured.json" --net "$tmp/cal.toml" \
      --sizes 1M,4M,16M -o "$tmp/rows.json") || fail "validate exited $?"$'\n'"$out"
grep -q '^# from 1 MiB up: 18 of 18 points within 10%' <<<"$out" || fail "validation"$'\n'"$out"

# The inc model column is the model of the same inc sim run: on a 2:1 tree it counts the
# crossing steps' shared up-links (contention), which a full-bisection closed form does not.
python3 "$script" --inc "$inc" validate --measured "$tmp/measured.json" --net "$tmp/cal.toml" --sizes 16M \
  --algos rabenseifner --shapes 1x8,2x8 --oversubscription 2 -o "$tmp/over.json" >/dev/null || fail "validate 2:1"
python3 - "$tmp/over.json" <<'PY' || exit 1
import json, sys
m = {tuple(r["shape"]): r["model_s"] for r in json.load(open(sys.argv[1]))}
if not m[(2, 8)] > 1.2 * m[(1, 8)]:
    sys.exit(f"FAIL: the model column on a 2:1 tree ({m[(2, 8)]} s) does not count its up-links against one switch ({m[(1, 8)]} s)")
print(f"model on 2:1 / one switch: {m[(2, 8)] / m[(1, 8)]:.3f}")
PY

# A disturbed point (ring, 1 MiB, one switch, 30% slower) shows in the residuals.
python3 - "$tmp/measured.json" "$tmp/noisy.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
for r in rows:
    if r["shape"] == [1, 8] and r["algo"] == "ring" and r["bytes"] == 1 << 20:
        r["time_s"] *= 1.3
json.dump(rows, open(sys.argv[2], "w"))
PY
out=$(python3 "$script" --inc "$inc" calibrate --measured "$tmp/noisy.json" --net "$tmp/noisy.toml") ||
  fail "calibrate (noisy) exited $?"$'\n'"$out"
grep -q WARNING <<<"$out" || fail "no warning for a point 30% off"$'\n'"$out"
grep -Eq 'one switch +ring +1 MiB .* [+-][1-9][0-9]\.[0-9]%$' <<<"$out" ||
  fail "the disturbed point's left-out residual is not shown"$'\n'"$out"

# inc sim run --net: the file's costs, explicit flags win; refused beside a scenario file.
sim() { "$inc" sim run --topology single_switch --hosts 8 -a ring -b 1MiB --link-gbps 1 --no-progress "$@" |
        awk '$1 == "job" && $2 == "allreduce" {print $7, $8}'; }
[ "$(sim --net "$tmp/cal.toml")" = "$(sim --overhead-us 40 --reduce-GBps 2)" ] || fail "--net differs from the flags"
[ "$(sim --net "$tmp/cal.toml" --overhead-us 0)" = "$(sim --overhead-us 0 --reduce-GBps 2)" ] ||
  fail "an explicit flag does not win over --net"
[ "$(sim --net "$tmp/cal.toml")" != "$(sim)" ] || fail "--net changed nothing"
[ "$(sim --matching ready --net "$tmp/cal.toml")" = "$(sim --matching ready --overhead-us 40 --reduce-GBps 2 --ready-notice-us 300)" ] ||
  fail "--net differs from the flags under --matching ready (ready_notice_us)"
[ "$(sim --matching ready --net "$tmp/cal.toml")" != "$(sim --matching ready --overhead-us 40 --reduce-GBps 2)" ] ||
  fail "--net's ready_notice_us changed nothing"
if "$inc" sim run -f "$src/examples/sim/fsdp-streams.toml" --net "$tmp/cal.toml" >/dev/null 2>"$tmp/err"; then
  fail "--net beside a scenario file accepted"
fi
grep -q "scenario" "$tmp/err" || fail "no reason given: $(cat "$tmp/err")"

# --burst-model on: the testbed's token buckets (src/testbed/spec.cpp's sizes, a --burst in
# --testbed-args passed through) in every simulated point and in the written file.
burst() { python3 "$script" --inc "$inc" --burst-model on --burst-peak-gbps 4 "$@" calibrate --measured "$tmp/measured.json" \
          --algos ring --sizes 1M,4M --net "$tmp/burst.toml" >/dev/null || fail "calibrate --burst-model on exited $?"; }
burst
grep -q '^link_burst = "1ms"$' "$tmp/burst.toml" && grep -q '^link_burst_min = "74550B"$' "$tmp/burst.toml" &&
  grep -q '^burst_peak_gbps = 4$' "$tmp/burst.toml" || fail "the testbed's default buckets not in the file"$'\n'"$(cat "$tmp/burst.toml")"
[ "$(sim --net "$tmp/burst.toml")" != "$(sim --net "$tmp/burst.toml" --burst-peak-gbps 1)" ] ||
  fail "the file's buckets changed nothing (a peak at the link rate turns them off)"
burst --testbed-args "--burst 4ms --mtu 1500"
grep -q '^link_burst = "4ms"$' "$tmp/burst.toml" && ! grep -q '^link_burst_min' "$tmp/burst.toml" ||
  fail "--testbed-args --burst not passed through"$'\n'"$(cat "$tmp/burst.toml")"
burst --testbed-args "--mtu 1500"
grep -q '^link_burst_min = "67050B"$' "$tmp/burst.toml" || fail "the floor is not 64 KiB + one 1514 B frame"
python3 "$script" --inc "$inc" --burst-model on --burst-peak-gbps 4 validate --measured "$tmp/measured.json" \
  --sizes 1M --algos ring --shapes 1x8 --net "$tmp/cal.toml" -o "$tmp/on.json" >/dev/null || fail "validate --burst-model on"
python3 "$script" --inc "$inc" validate --measured "$tmp/measured.json" \
  --sizes 1M --algos ring --shapes 1x8 --net "$tmp/cal.toml" -o "$tmp/off.json" >/dev/null || fail "validate (off)"
python3 - "$tmp/on.json" "$tmp/off.json" <<'PY' || exit 1
import json, sys
on, off = (json.load(open(p))[0]["sim_s"] for p in sys.argv[1:])
# ring 1 MiB on one switch: the 125 KB buckets save at least B / R = 1 ms
if not off - on >= 1e-3:
    sys.exit(f"FAIL: --burst-model on simulated {on} s, off {off} s")
PY
# A measured notice pinned instead of fitted: --ready-notice-us, or the mean flight of an
# INC_TRACE directory (bench/testbed/trace_report.py; here two ranks whose notices flew 250 and
# 350 us): the file keeps it and says where it came from; a wrong one shows in the residuals.
mkdir "$tmp/trace"
for r in 0 1; do
  q=$((1 - r))
  { echo "# inc engine trace: rank=$r events=4 dropped=0 cap=16 clock=CLOCK_MONOTONIC"
    echo "t_ns,event,comm,seq,coll,algo,op,kind,peer,msg_index,bytes"
    echo "0,coll_start,0,0,allreduce,ring,4,,-1,0,1048576"
    echo "$((1000000 + r * 1000000)),notice_told,0,0,allreduce,ring,1,recv,$q,0,524288"
    echo "$((1000000 + q * 1000000 + 250000 + r * 100000)),notice_arrived,0,0,allreduce,ring,0,,$q,0,0"
    echo "3000000,coll_end,0,0,allreduce,ring,4,,-1,0,1048576"; } > "$tmp/trace/rank-$r.csv"
done
out=$(python3 "$script" --inc "$inc" calibrate --measured "$tmp/measured.json" --net "$tmp/pin.toml" --algos ring,rabenseifner \
      --ready-notice-trace "$tmp/trace") || fail "calibrate --ready-notice-trace exited $?"$'\n'"$out"
grep -q "^ready_notice_us = 300 .*(measured: mean flight of 2 notices in $tmp/trace)" "$tmp/pin.toml" ||
  fail "the traced notice is not in the file"$'\n'"$(cat "$tmp/pin.toml")"
grep -q "^# residuals: rms 0.0%" <<<"$out" || fail "the right notice pinned does not fit exactly"$'\n'"$out"
out=$(python3 "$script" --inc "$inc" calibrate --measured "$tmp/measured.json" --net "$tmp/pin2.toml" --algos ring,rabenseifner \
      --ready-notice-us 1500) || fail "calibrate --ready-notice-us exited $?"$'\n'"$out"
grep -q "^ready_notice_us = 1500 .*(pinned by --ready-notice-us)" "$tmp/pin2.toml" || fail "the pinned notice moved"$'\n'"$(cat "$tmp/pin2.toml")"
grep -q WARNING <<<"$out" || fail "a wrong pinned notice fits without a warning"$'\n'"$out"
# The start skew measured (--start-skew-trace: two ranks starting 100 us apart at 1 MiB and 400 us
# at 4 MiB, after two warm-up calls: S = 3 x range for two ranks, so 300 us per MiB) and passed
# to every simulated point: "measurements" made with that skew calibrate back exactly, with it
# in the file, and not without it.
mkdir "$tmp/skewtrace"
for r in 0 1; do
  { echo "# inc engine trace: rank=$r events=20 dropped=0 cap=64 clock=CLOCK_MONOTONIC"
    echo "t_ns,event,comm,seq,coll,algo,op,kind,peer,msg_index,bytes"
    for seq in 0 1 2 3 4 5 6 7; do
      size=$(( seq < 4 ? 1048576 : 4194304 )); lag=$(( seq < 4 ? 100000 : 400000 ))
      t0=$(( seq * 100000000 + r * lag ))
      echo "$t0,coll_start,0,$seq,allreduce,ring,4,,-1,0,$size"
      echo "$(( t0 + 50000000 )),coll_end,0,$seq,allreduce,ring,4,,-1,0,$size"
    done; } > "$tmp/skewtrace/rank-$r.csv"
done
out=$(python3 "$src/bench/testbed/trace_report.py" "$tmp/skewtrace") || fail "trace_report exited $?"$'\n'"$out"
grep -q "start range .* median     100.0 " <<<"$out" && grep -q "S = 300.0 us" <<<"$out" ||
  fail "trace_report's start skew"$'\n'"$out"
grep -q -- "--start-skew-us 0.0 --start-skew-us-per-MiB 300.0" <<<"$out" || fail "trace_report's fit"$'\n'"$out"
python3 - "$inc" "$tmp/skewed.json" "$(python3 -c "import importlib.util as u; s=u.spec_from_file_location('v', '$script'); v=u.module_from_spec(s); s.loader.exec_module(v); print(v.tcp_send_buffer())")" <<'PY'
import csv, json, subprocess, sys
inc, out, buf = sys.argv[1:]
rows = []
for algo in ("ring", "rabenseifner"):
    for size in (1 << 20, 4 << 20):
        subprocess.run([inc, "sim", "run", "-c", "allreduce", "-a", algo, "-b", f"{size}B", "--hosts", "8",
                        "--topology", "single_switch", "--link-gbps", "1", "--overhead-us", "40", "--reduce-GBps", "2",
                        "--matching", "ready", "--eager-threshold", "64KiB", "--ready-notice-us", "300",
                        "--send-buffer", f"{buf}B", "--start-skew-us", "0", "--start-skew-us-per-MiB", "300",
                        "--start-skew-draws", "4", "--no-progress", "--csv", out + ".csv"], check=True,
                       stdout=subprocess.DEVNULL)
        t = float(next(csv.DictReader(open(out + ".csv")))["time_s"])
        rows.append({"shape": [1, 8], "algo": algo, "bytes": size, "rate_gbps": 1.0, "time_s": t, "runs": [t]})
json.dump(rows, open(out, "w"))
PY
skewcal() { python3 "$script" --inc "$inc" calibrate --measured "$tmp/skewed.json" --algos ring,rabenseifner --sizes 1M,4M \
            --start-skew-draws 4 --net "$tmp/skew.toml" "$@"; }
out=$(skewcal --start-skew-trace "$tmp/skewtrace" 2>&1) || fail "calibrate --start-skew-trace exited $?"$'\n'"$out"
grep -q "^# residuals: rms 0.0%" <<<"$out" || fail "the measured skew does not fit exactly"$'\n'"$out"
grep -q '^start_skew_us = 0 .*(measured: ' "$tmp/skew.toml" && grep -q '^start_skew_us_per_MiB = 300$' "$tmp/skew.toml" ||
  fail "the skew is not in the file"$'\n'"$(cat "$tmp/skew.toml")"
[ "$(sim --net "$tmp/skew.toml" --start-skew-draws 4)" != "$(sim --net "$tmp/skew.toml" --start-skew-us-per-MiB 0)" ] ||
  fail "the file's skew changed nothing"
out=$(skewcal 2>&1) || fail "calibrate without the skew exited $?"$'\n'"$out"
grep -q "^# residuals: rms 0.0%" <<<"$out" && fail "skewed measurements fit exactly without the skew"$'\n'"$out"
skewcal --start-skew-trace "$tmp/skewtrace" --start-skew-us 5 >/dev/null 2>&1 && fail "two skews accepted"
echo "validate_testbed: calibration, validation, residuals, --net, --burst-model, the pinned notice and the start skew checked"
