#!/usr/bin/env bash
# Environment settings end to end, through `inc launch` and `inc bench` (issue 13, item 6):
#  - INC_ALGO picks the algorithm of every call that does not name one;
#  - INC_SWITCH_NUMERICS=fixed runs f32 sums through the switch as fixed point, exact against
#    the bench's independent check, and sends f32 max to the hosts saying why (docs/USAGE.md).
set -euo pipefail
inc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rows() {  # file -> "collective algo in_network correct reason" per row
  python3 -c '
import json, sys
for r in json.load(open(sys.argv[1])):
    print(r["collective"], r["algo"], int(r["in_network"]), r["correct"], r["reason"].replace(" ", "_"))' "$1"
}

INC_ALGO=recursive_doubling "$inc" launch -n 4 --no-prefix -- \
  "$inc" bench -c allreduce,allgather -b 1K -e 64K -f 8 -n 2 -w 1 --json "$tmp/algo.json" >/dev/null
n=0
while read -r coll algo net ok reason; do
  [ "$algo" = recursive_doubling ] || fail "INC_ALGO=recursive_doubling: $coll ran $algo ($reason)"
  [ "$ok" = 1 ] || fail "INC_ALGO: $coll wrong"
  n=$((n + 1))
done < <(rows "$tmp/algo.json")
[ "$n" -ge 6 ] || fail "INC_ALGO: $n rows"
echo "INC_ALGO: $n rows ran recursive_doubling"

for op in sum max; do
  INC_SWITCH_NUMERICS=fixed "$inc" launch -n 4 --switch --no-prefix -- \
    "$inc" bench -c allreduce -a inc -d f32 -o $op -b 4K -e 1M -f 16 -n 2 -w 1 --json "$tmp/fx-$op.json" >/dev/null
done
while read -r coll algo net ok reason; do
  [ "$net" = 1 ] && [ "$ok" = 1 ] || fail "fixed-point f32 sum: in_network=$net correct=$ok ($reason)"
done < <(rows "$tmp/fx-sum.json")
while read -r coll algo net ok reason; do
  [ "$net" = 0 ] && [ "$ok" = 1 ] || fail "fixed-point f32 max: in_network=$net correct=$ok"
  grep -q 'fixed-point' <<<"$reason" || fail "fixed-point f32 max on the hosts without saying why: $reason"
done < <(rows "$tmp/fx-max.json")
echo "INC_SWITCH_NUMERICS=fixed: f32 sums through the switch, exact; f32 max on the hosts, saying why"
echo OK
