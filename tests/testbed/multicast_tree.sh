#!/usr/bin/env bash
# Multicast results in a two-level tree (docs/TESTBED.md, "Multicast results"): 4 hosts x 2 ranks
# under 2 leaves + spine, uplinks 2:1, keyed job, the testbed's defaults (each leaf's job has its
# own group; the spine sends to the leaves by unicast). Checks:
#   - exit code 0, every row OK and in the network (inc*);
#   - each leaf sent results to its own group (239.255.0.1, 239.255.0.2) and its members got them
#     from it (resent results far below the multicast ones); the spine sent nothing to a group;
#   - no replicated result crossed an uplink: each leaf's filter dropped what the bridge flooded
#     towards it (the "multicast kept off the uplinks" line), and the uplinks together carried up
#     at most 1.25x the bytes the spine received and down at most 1.25x those it sent (a leaf's
#     group copies would go up its uplink and, flooded by the spine's bridge, down the others':
#     about 2x both ways);
#   - nothing is left behind.
# Exit 77 (ctest: skipped) where namespaces cannot be created.
# usage: multicast_tree.sh path/to/inc
set -u
inc=$(readlink -f "$1")
pfx=tbmct
. "$(dirname "$(readlink -f "$0")")/common.sh"

"$inc" testbed --prefix "$pfx" --hosts 4 --leaves 2 --ranks-per-host 2 --link 1gbit --oversubscription 2 -- \
  "$inc" bench -c allreduce -a inc -b 4K -e 4M -f 32 -n 3 -w 1 --no-progress >>"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "inc testbed exited with $rc"
grep -q WRONG "$log" && fail "a result was WRONG"
grep -q "results: once per chunk to each leaf's multicast group (239.255.0.1:7710 ... 239.255.0.2:7710)" "$log" ||
  fail "the plan does not announce the leaves' groups"
n=$(grep -cE "^\[h0 r0\] +allreduce +[0-9]+ .* inc\* .* OK$" "$log")
[ "$n" -ge 3 ] || fail "allreduce: expected verified in-network rows (inc*), found $n"
k=0
for sw in leaf0 leaf1; do
  k=$((k + 1))
  grep -q "^\[$sw\] inc switch $sw: job 1: results every member gets alike go once to multicast group 239.255.0.$k:7710" "$log" ||
    fail "$sw does not send to its own group 239.255.0.$k"
done
for sw in spine leaf0 leaf1; do
  line=$(grep -E "^\[$sw\] switch $sw: packets in" "$log" | tail -1)
  [ -n "$line" ] || fail "no --stats line from $sw"
  field() { sed -E "s/.*[ ,]$1 ([0-9]+).*/\1/" <<<"$line"; }
  results=$(field results); mc=$(field "results multicast"); resent=$(field "results resent")
  echo "$sw: results $results, to its group $mc, resent to one member $resent"
  if [ "$sw" = spine ]; then
    [ "$mc" -eq 0 ] || fail "the spine sent $mc results to a group (its members are switches)"
  else
    [ "$mc" -gt 0 ] && [ "$mc" -eq "$results" ] || fail "$sw: $mc of $results results went to its group"
    [ $((resent * 2)) -lt "$mc" ] || fail "$sw: $resent results resent for $mc multicast ones: the group did not reach the members"
  fi
done
spine=$(grep -E "^\[spine\] switch spine: packets in" "$log" | tail -1)
sp_in=$(sed -E 's/.*bytes in ([0-9]+) out ([0-9]+).*/\1/' <<<"$spine")
sp_out=$(sed -E 's/.*bytes in ([0-9]+) out ([0-9]+).*/\2/' <<<"$spine")
up=0; down=0
for leaf in leaf0 leaf1; do
  u=$(awk -v l="$leaf" '$1 == l && $2 == "uplink" && $3 == "up" { print $6; exit }' "$log")
  d=$(awk -v l="$leaf" '$1 == l && $2 == "uplink" && $3 == "down" { print $6; exit }' "$log")
  [ -n "$u" ] && [ -n "$d" ] || fail "$leaf uplink: no byte counts"
  echo "$leaf uplink: $u bytes up, $d bytes down"
  up=$((up + u)); down=$((down + d))
done
echo "spine: $sp_in bytes in, $sp_out bytes out; uplinks: $up bytes up, $down bytes down"
[ "$sp_in" -gt 0 ] && [ "$sp_out" -gt 0 ] || fail "the spine's byte counters are missing"
[ $((up * 4)) -le $((sp_in * 5)) ] || fail "the uplinks carried $up bytes up for $sp_in the spine received: results crossed them"
[ $((down * 4)) -le $((sp_out * 5)) ] || fail "the uplinks carried $down bytes down for $sp_out the spine sent: results crossed them"
kept=$(grep -E "^multicast kept off the uplinks by their filters: [0-9]+ packets" "$log")
[ -n "$kept" ] || fail "no filter dropped multicast at an uplink (the bridges flood the leaves' groups towards them)"
echo "$kept"
for leaf in leaf0 leaf1; do
  grep -qE "^multicast kept off .*$leaf uplink up [1-9]" "$log" || fail "$leaf's uplink filter dropped nothing"
done
left=$(ls /run/netns 2>/dev/null | grep -c "^${pfx}-")
[ "$left" -eq 0 ] || fail "$left namespaces with prefix $pfx left behind"
if compgen -G "/run/inc-testbed/${pfx}-*" >/dev/null; then fail "state directory left behind"; fi
echo "testbed multicast tree: 2 leaves x 2 hosts x 2 ranks, each leaf's results to its own group, none across the uplinks, every row verified; cleaned up"
