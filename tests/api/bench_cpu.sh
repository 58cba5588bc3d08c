#!/usr/bin/env bash
# `inc bench --cpu` (issue 12, cpu12): the CSV gains one last column, cpu_us, each rank's process
# CPU time per timed call (mean over the ranks), in check mode and in back-to-back mode; without
# the flag the CSV keeps the nccl-tests-like columns that scripts/compare-peers.sh writes beside
# other implementations' rows; the JSON always has cpu_us.
set -euo pipefail
inc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
plain="collective,size_bytes,count,dtype,op,algo,in_network,ranks,time_us,algbw_GBps,busbw_GBps,correct"

for check in 1 0; do
  INC_SPIN_US=0 "$inc" launch -n 2 --no-prefix -- "$inc" bench -c allreduce -a ring -b 4K -e 4M -f 1024 \
    -n 3 -w 1 --check $check --no-progress --format csv --cpu --json "$tmp/c$check.json" > "$tmp/c$check.csv"
  python3 - "$tmp/c$check.csv" "$tmp/c$check.json" "$plain" $check <<'PY'
import csv, json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
head = lines[0].strip()
if head != sys.argv[3] + ",cpu_us":
    sys.exit(f"FAIL: --cpu header is {head!r}")
rows = list(csv.DictReader(lines))
if [int(r["size_bytes"]) for r in rows] != [4096, 4194304]:
    sys.exit(f"FAIL: rows {rows}")
cpu = [float(r["cpu_us"]) for r in rows]
if not all(c > 0 for c in cpu):
    sys.exit(f"FAIL: --check {sys.argv[4]}: cpu_us {cpu} not positive")
# 4 MiB: every rank reduces and copies 1024x the bytes of 4 KiB, far more CPU than the fixed costs.
if not cpu[1] > cpu[0]:
    sys.exit(f"FAIL: --check {sys.argv[4]}: cpu_us {cpu}: 4 MiB took no more CPU than 4 KiB")
js = json.load(open(sys.argv[2]))
if [round(r["cpu_us"], 3) for r in js] != cpu:
    sys.exit(f"FAIL: JSON cpu_us {[r['cpu_us'] for r in js]} against the CSV's {cpu}")
print(f"--check {sys.argv[4]}: cpu_us per call {cpu} (time_us {[float(r['time_us']) for r in rows]})")
PY
done

# Without --cpu the header is the nccl-tests-like one, unchanged.
"$inc" launch -n 2 --no-prefix -- "$inc" bench -c allreduce -a ring -b 4K -e 4K -n 1 -w 0 --no-progress \
  --format csv > "$tmp/plain.csv"
[ "$(head -1 "$tmp/plain.csv")" = "$plain" ] || fail "header without --cpu: $(head -1 "$tmp/plain.csv")"
[ "$(awk -F, 'NR == 2 { print NF }' "$tmp/plain.csv")" = 12 ] || fail "row without --cpu: $(sed -n 2p "$tmp/plain.csv")"
echo "PASS"
