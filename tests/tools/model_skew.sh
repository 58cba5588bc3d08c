#!/usr/bin/env bash
# `inc model cost`'s start-skew term (issue 12; docs/MODEL.md "Start skew"): off, the table, CSV
# and JSON are as without it; on (a --net file's keys, or flags, which win), a skew column, the CSV's
# start_skew_s,skew_s and the JSON's skew_s = S x the wait fraction, in total_s, none for a
# broadcast, and the notes say so; `inc sim run`'s model column adds the same term over its draws.
set -euo pipefail
inc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$tmp/net.toml" <<'EOF'
[network]
start_skew_us = 600
start_skew_us_per_MiB = 400
EOF
cost() { "$inc" model cost -n 8 -b 1MiB --link-gbps 10 --hops 2 --tree-levels 1 "$@"; }

off=$(cost --csv "$tmp/off.csv" --json "$tmp/off.json") || fail "model cost exited $?"
grep -q skew <<<"$off" && fail "skew printed while off"$'\n'"$off"
head -1 "$tmp/off.csv" | grep -q skew && fail "skew columns while off"
on=$(cost --net "$tmp/net.toml" --start-skew-draws 4 --csv "$tmp/on.csv" --json "$tmp/on.json") || fail "exited $?"
grep -Eq '^algorithm .* skew +total' <<<"$on" || fail "no skew column"$'\n'"$on"
grep -q "Start skew (emulated testbed): the ranks start uniform in \[0, S\], S = 600 us + 400 us per MiB = 1.000 ms" <<<"$on" ||
  fail "no note on the skew"$'\n'"$on"
head -1 "$tmp/on.csv" | grep -q ',schedule_check,start_skew_s,skew_s$' || fail "CSV header $(head -1 "$tmp/on.csv")"
# The flags win over the file: zero skew is the run without it.
[ "$(cost --net "$tmp/net.toml" --start-skew-us 0 --start-skew-us-per-MiB 0)" = "$off" ] || fail "the flags did not turn it off"
python3 - "$tmp/off.json" "$tmp/on.json" <<'PY'
import json, sys
off = {r["algorithm"]: r for r in json.load(open(sys.argv[1]))}
on = {r["algorithm"]: r for r in json.load(open(sys.argv[2]))}
# 8 ranks, 4 draws: 8/9 - E[least of 8 means of 4 uniforms] (start_skew_wait, checked against
# drawn offsets in tests/sim/test_model_skew.cpp)
for a, r in on.items():
    s = r["start_skew"]
    if abs(s["width_s"] - 1e-3) > 1e-15 or s["draws"] != 4 or not 0.55 < s["wait_fraction"] < 0.65:
        sys.exit(f"FAIL: {a}: start_skew {s}")
    if abs(r["skew_s"] - s["width_s"] * s["wait_fraction"]) > 1e-15:
        sys.exit(f"FAIL: {a}: skew_s {r['skew_s']} is not S x the wait")
    if abs(r["total_s"] - off[a]["total_s"] - r["skew_s"]) > 1e-12:
        sys.exit(f"FAIL: {a}: total {r['total_s']} is not {off[a]['total_s']} + {r['skew_s']}")
PY
b=$(cost -c broadcast -a pipelined_chain --net "$tmp/net.toml" --json "$tmp/b.json") || fail "broadcast exited $?"
grep -Eq '^pipelined_chain .* - +[0-9.]+ (ms|us) ' <<<"$b" || fail "a broadcast is charged the skew"$'\n'"$b"
grep -q "^'-': no term: a broadcast's rank waits only for its path from the root" <<<"$b" || fail "no note on '-'"$'\n'"$b"
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; sys.exit(0 if r['skew_s'] == 0 and not r['start_skew']['charged'] else 'FAIL: broadcast ' + str(r))" "$tmp/b.json"

# inc sim's model column: the same term over its own draws.
sim() { "$inc" sim run -c allreduce -a ring -b 1MiB --topology single_switch --hosts 8 --radix 8 -n 8 --link-gbps 10 \
        --no-progress --json "$1" "${@:2}" > "$1.txt" || fail "inc sim exited $?"; }
sim "$tmp/s0.json"
sim "$tmp/s4.json" --start-skew-us 600 --start-skew-us-per-MiB 400 --start-skew-draws 4
grep -q "model: with the start skew it adds S x (p/(p+1) - E\[least of p means of 4 uniforms\])" "$tmp/s4.json.txt" ||
  fail "inc sim does not say its model has the skew"$'\n'"$(cat "$tmp/s4.json.txt")"
python3 - "$tmp/s0.json" "$tmp/s4.json" "$tmp/on.json" <<'PY'
import json, sys
m0, m4 = (json.load(open(f))["jobs"][0]["model_s"] for f in sys.argv[1:3])
term = {r["algorithm"]: r for r in json.load(open(sys.argv[3]))}["ring"]["skew_s"]
if abs(m4 - m0 - term) > 1e-12:
    sys.exit(f"FAIL: inc sim's model {m4} - {m0} is not the skew term {term}")
PY
echo "model_skew: off unchanged, the term in the table, CSV, JSON, notes and inc sim's model column checked"
