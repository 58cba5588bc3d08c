#!/usr/bin/env bash
# Multicast results on a real bridge (docs/PROTOCOL.md, "Multicast results"; docs/TESTBED.md):
# 3 hosts x 2 ranks (two members share a host, so each of two sockets bound to the group must get
# every datagram), one switch, keyed job, the testbed's defaults (multicast results), then the same
# with `--no-multicast`. Checks:
#   - exit code 0, every row OK; allreduce and reduce_scatter ran in the network (inc*);
#   - the switch sent results to the group (results multicast > 0) and members got them from
#     the group: resent results stay far below one per result (were the group not delivered,
#     each of the 6 members would need every multicast result resent to it);
#   - reduce_scatter (mixed wishes) stayed unicast: results multicast < results;
#   - with --no-multicast: every row OK and in the network, no result to a group;
#   - nothing is left behind.
# Exit 77 (ctest: skipped) where namespaces cannot be created.
# usage: multicast.sh path/to/inc
set -u
inc=$(readlink -f "$1")
pfx=tbmc
. "$(dirname "$(readlink -f "$0")")/common.sh"

run() {
  "$inc" testbed --prefix "$pfx" --hosts 3 --ranks-per-host 2 --link 1gbit "$@" -- \
    "$inc" bench -c allreduce,reduce_scatter -a inc -b 4K -e 1M -f 16 -n 3 -w 1 --no-progress >>"$log" 2>&1
}
run
rc=$?
[ $rc -eq 0 ] || fail "inc testbed exited with $rc"
grep -q WRONG "$log" && fail "a result was WRONG"
grep -q "results: once per chunk to multicast group 239.255.0.1:7710" "$log" || fail "the plan does not announce the group"
for c in allreduce reduce_scatter; do
  n=$(grep -cE "^\[h0 r0\] +$c +[0-9]+ .* inc\* .* OK$" "$log")
  [ "$n" -ge 3 ] || fail "$c: expected verified in-network rows (inc*), found $n"
done
line=$(grep -E "^\[switch\] switch switch: packets in" "$log" | tail -1)
[ -n "$line" ] || fail "no --stats line from the switch"
field() { sed -E "s/.*[ ,]$1 ([0-9]+).*/\1/" <<<"$line"; }
results=$(field results); mc=$(field "results multicast"); resent=$(field "results resent")
echo "switch: results $results, to the group $mc, resent to one member $resent"
[ "$mc" -gt 0 ] || fail "no result went to the group"
[ "$mc" -lt "$results" ] || fail "reduce_scatter's results (mixed wishes) went to the group too"
[ $((resent * 2)) -lt "$mc" ] || fail "$resent results resent for $mc multicast ones: the group did not reach the members"
# The same job with every result unicast.
: >"$log"
run --no-multicast
rc=$?
[ $rc -eq 0 ] || fail "inc testbed --no-multicast exited with $rc"
grep -q WRONG "$log" && fail "a result was WRONG (--no-multicast)"
grep -q "results: unicast" "$log" || fail "the plan does not say that results are unicast"
grep -q "multicast group" "$log" && fail "--no-multicast: the switch still announced a group"
for c in allreduce reduce_scatter; do
  n=$(grep -cE "^\[h0 r0\] +$c +[0-9]+ .* inc\* .* OK$" "$log")
  [ "$n" -ge 3 ] || fail "$c: expected verified in-network rows (inc*) with --no-multicast, found $n"
done
line=$(grep -E "^\[switch\] switch switch: packets in" "$log" | tail -1)
mc=$(field "results multicast")
[ "$mc" = 0 ] || fail "--no-multicast: $mc results went to a group"
left=$(ls /run/netns 2>/dev/null | grep -c "^${pfx}-")
[ "$left" -eq 0 ] || fail "$left namespaces with prefix $pfx left behind"
if compgen -G "/run/inc-testbed/${pfx}-*" >/dev/null; then fail "state directory left behind"; fi
echo "testbed multicast: 3 hosts x 2 ranks, results to 239.255.0.1 flooded by the bridge (the default) and unicast (--no-multicast), every row verified; cleaned up"
