#!/usr/bin/env bash
# INC_TRACE end to end, through `inc launch` and `inc bench`: every rank writes rank-N.csv and
# rank-N.json at the end, bench/testbed/trace_report.py reads them (notices of the ring's
# 1 MiB messages, a step table, the merged Chrome trace); INC_TRACE_EVENTS caps the records and
# the file counts the rest; an unwritable INC_TRACE warns naming it and the job still runs
# right; a bad INC_TRACE_EVENTS stops every rank at start-up naming it.
set -euo pipefail
inc=$1
report=$(cd "$(dirname "$0")/../../bench/testbed" && pwd)/trace_report.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
correct() {  # bench JSON -> "ok" if every row is correct
  python3 -c 'import json, sys; rows = json.load(open(sys.argv[1])); print("ok" if rows and all(r["correct"] == 1 for r in rows) else "WRONG")' "$1"
}
p=3

# Traced: files per rank, readable by the report, valid JSON.
INC_TRACE=$tmp/t "$inc" launch -n $p --no-prefix -- \
  "$inc" bench -c allreduce -a ring,rabenseifner -b 1M -e 1M -n 2 -w 1 --no-progress --json "$tmp/b.json" >/dev/null
[ "$(correct "$tmp/b.json")" = ok ] || fail "traced bench gave wrong results"
for r in $(seq 0 $((p - 1))); do
  [ -s "$tmp/t/rank-$r.csv" ] && [ -s "$tmp/t/rank-$r.json" ] || fail "rank $r wrote no trace: $(ls "$tmp/t")"
  head=$(head -1 "$tmp/t/rank-$r.csv")
  [[ $head =~ ^"# inc engine trace: rank=$r ".*" dropped=0 " ]] || fail "rank $r header: $head"
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/t/rank-$r.json" || fail "rank-$r.json is not JSON"
done
python3 "$report" "$tmp/t" --chrome "$tmp/all.json" --json "$tmp/s.json" > "$tmp/report.txt"
cat "$tmp/report.txt"
grep -q "^allreduce ring 1 MiB:" "$tmp/report.txt" || fail "no ring row"
grep -q "^allreduce rabenseifner 1 MiB:" "$tmp/report.txt" || fail "no rabenseifner row"
python3 - "$tmp/s.json" "$tmp/all.json" $p <<'EOF' || fail "summary"
import json, sys
rows, p = json.load(open(sys.argv[1])), int(sys.argv[3])
ring = [r for r in rows if r["algo"] == "ring" and r["bytes"] == 1 << 20][0]
# 3 calls (warm-up + 2) x p ranks x 2(p-1) messages of 1/p MiB, each above 64 KiB: a notice each
n = 3 * p * 2 * (p - 1)
assert ring["notice_flight_us"]["n"] == n, ring["notice_flight_us"]
assert ring["transfer_us"]["n"] == n, ring["transfer_us"]
assert ring["collective_ms"]["n"] == 3, ring["collective_ms"]
assert all(f"step{k}_total_us" in ring for k in range(2 * (p - 1))), sorted(ring)
assert ring["notice_flight_us"]["median"] > 0
ev = json.load(open(sys.argv[2]))["traceEvents"]
assert {e["pid"] for e in ev} == set(range(p)), "merged trace misses a rank"
assert sum(1 for e in ev if e["ph"] == "X" and e["tid"] == 0) >= 2 * 3 * p, "collective spans"
EOF

# The cap: 40 records kept, the rest counted, the collective right.
INC_TRACE=$tmp/c INC_TRACE_EVENTS=40 "$inc" launch -n $p --no-prefix -- \
  "$inc" bench -c allreduce -a ring -b 1M -e 1M -n 2 -w 1 --no-progress --json "$tmp/c.json" >/dev/null
[ "$(correct "$tmp/c.json")" = ok ] || fail "capped bench gave wrong results"
head=$(head -1 "$tmp/c/rank-0.csv")
[[ $head =~ events=40\ dropped=[1-9][0-9]*\ cap=40 ]] || fail "cap header: $head"
[ "$(grep -vc '^#' "$tmp/c/rank-0.csv")" = 41 ] || fail "capped file has $(grep -vc '^#' "$tmp/c/rank-0.csv") lines"
python3 "$report" "$tmp/c" > "$tmp/c.txt"  # (not piped into grep -q: a closed pipe fails the report)
grep -q "events dropped (INC_TRACE_EVENTS cap): [1-9]" "$tmp/c.txt" || fail "the report hides the drops"

# An unwritable directory: a warning naming it, no trace, the job right.
INC_TRACE=/proc/inc-trace-test "$inc" launch -n $p --no-prefix -- \
  "$inc" bench -c allreduce -a ring -b 1M -e 1M -n 2 -w 1 --no-progress --json "$tmp/u.json" >/dev/null 2>"$tmp/u.err"
[ "$(correct "$tmp/u.json")" = ok ] || fail "bench with an unwritable INC_TRACE gave wrong results"
grep -q "warning: INC_TRACE=/proc/inc-trace-test: cannot create /proc/inc-trace-test: .*; this rank is not traced" "$tmp/u.err" ||
  fail "no warning: $(cat "$tmp/u.err")"

# A bad cap: every rank stops at start-up naming it (digits only, as every integer variable).
for bad in lots 0 268435457 +40 " 40"; do
  if INC_TRACE=$tmp/x INC_TRACE_EVENTS=$bad "$inc" launch -n 2 --no-prefix -- \
    "$inc" bench -c allreduce -a ring -b 1K -e 1K -n 1 --no-progress >/dev/null 2>"$tmp/x.err"; then
    fail "INC_TRACE_EVENTS=$bad was accepted"
  fi
  grep -qF "INC_TRACE_EVENTS='$bad' must be an integer in [1, 2^28]" "$tmp/x.err" ||
    fail "no error naming INC_TRACE_EVENTS='$bad': $(cat "$tmp/x.err")"
done
echo "env_trace: OK"
