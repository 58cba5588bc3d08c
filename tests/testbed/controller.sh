#!/usr/bin/env bash
# CI testbed with a controller (`inc testbed --controller`, docs/TESTBED.md): 4 hosts x 2 ranks
# under a two-level tree (2 leaves + spine), links shaped. The testbed starts `inc controller`
# with the fabric derived from its plan, the switches register with it, and the 8 ranks'
# communicators (the world, a split into 2 groups and their dups) each get a tree and a key from
# it. Checks:
#   - the job's exit code is 0: mp_controller found every allreduce exact and in the network;
#   - the reports name the controller's trees (the world's rooted at the spine, 3 switches);
#   - the fabric has the switches, the uplink rates and a host per rank; the controller
#     granted the trees and the switches aggregated;
#   - multicast results (the default): each leaf sent its jobs' results to a group of its range
#     (--multicast-groups), the spine none;
#   - nothing is left: no namespace or state directory with the prefix.
# Exit 77 (ctest: skipped) where namespaces cannot be created.
# usage: controller.sh path/to/inc path/to/mp_controller
set -u
inc=$(readlink -f "$1")
mp=$(readlink -f "$2")
pfx=tbctl
. "$(dirname "$(readlink -f "$0")")/common.sh"

"$inc" testbed --prefix "$pfx" --hosts 4 --leaves 2 --ranks-per-host 2 --link 1gbit --oversubscription 2 \
  --controller --timeout 240 -- "$mp" 2 3 20011 >>"$log" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "inc testbed --controller exited with $rc"
grep -q "FAIL" "$log" && fail "mp_controller reported a failure"
[ "$(grep -c "mp_controller: all exact" "$log")" -eq 8 ] || fail "not every rank found its results exact"
grep -qE "^\[h0 r0\] world: .*tree from the controller \(tree rooted at switch 'spine', 3 switches" "$log" ||
  fail "the world's report does not name the controller's tree at the spine"
for g in 0 1; do
  grep -qE "^\[h0 r$g\] group $g of 2: .*tree from the controller \(tree rooted at switch 'spine'" "$log" ||
    fail "group $g's report does not name a tree from the controller"
done
grep -qE "^controller fabric .*/fabric:" "$log" || fail "the plan does not show the controller's fabric"
grep -qE "^switch leaf0 10\.99\.[0-9.]+:7710 slot-elements=[0-9]+ parent=spine rate=1$" "$log" ||
  fail "the fabric does not give leaf0's uplink (1 Gbit/s at oversubscription 2 of 2 x 1 Gbit/s)"
[ "$(grep -cE "^host r[0-7] leaf=leaf[01]$" "$log")" -eq 8 ] || fail "the fabric does not have a host per rank"
for sw in spine leaf0 leaf1; do
  line=$(grep -E "^\[$sw\] switch $sw: packets in" "$log" | tail -1)
  agg=$(sed -E 's/.*aggregations ([0-9]+).*/\1/' <<<"$line")
  [ -n "$agg" ] && [ "$agg" -gt 0 ] || fail "switch $sw aggregated nothing ('$line')"
  mc=$(sed -E 's/.*results multicast ([0-9]+).*/\1/' <<<"$line")
  echo "switch $sw: $agg aggregations, $mc results to a group"
  if [ "$sw" = spine ]; then
    [ "$mc" = 0 ] || fail "the spine sent $mc results to a group (its members are switches)"
  else
    [ -n "$mc" ] && [ "$mc" -gt 0 ] || fail "$sw sent no result to a group ('$line')"
  fi
done
grep -q "^\[leaf1\] inc switch leaf1: jobs admitted at run time: results every member gets alike go once to multicast group 239.254.1.0 + (job mod 256)" "$log" ||
  fail "leaf1 does not announce its range of groups"
left=$(ls /run/netns 2>/dev/null | grep -c "^${pfx}-")
[ "$left" -eq 0 ] || fail "$left namespaces with prefix $pfx left behind"
if compgen -G "/run/inc-testbed/${pfx}-*" >/dev/null; then fail "state directory left behind"; fi
grep -E "^\[h0 r[01]\] (world|group)" "$log"
echo "testbed controller: 8 ranks, world + split + dup on trees from the controller, exact; cleaned up"
