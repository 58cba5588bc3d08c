#!/usr/bin/env bash
# CI testbed: 4 hosts under a two-level tree (2 leaves x 2 hosts + spine), every link shaped in
# both directions, the uplinks oversubscribed 2:1. `inc bench` runs the collectives through the
# switches and on the hosts with its OK/WRONG check (non-zero exit on WRONG or error). Checks:
#   - the job's exit code is 0 and every row is OK;
#   - the in-network rows really ran in the network: algorithm "inc*" in the bench table, and
#     every switch (spine, leaf0, leaf1) saw packets and aggregated (its --stats at exit);
#   - traffic crossed both uplinks in both directions (the testbed's link counters);
#   - nothing is left: no namespace or state directory with the prefix.
# Exit 77 (ctest: skipped) where namespaces cannot be created.
# usage: tree.sh path/to/inc
set -u
inc=$(readlink -f "$1")
pfx=tbtree
. "$(dirname "$(readlink -f "$0")")/common.sh"

# Two jobs (a rank program that runs twice would find the first run's addresses in the store):
# the reductions against the ring, then broadcast against the pipelined chain, after which rank 0
# reads leaf0's Prometheus endpoint across the network (if curl is installed).
run() {
  "$inc" testbed --prefix "$pfx" --hosts 4 --leaves 2 --link 1gbit --oversubscription 2 \
    --ranks-per-host 1 -- sh -c '"$0" bench "$@" && if [ "$INC_RANK" = 0 ] && command -v curl >/dev/null; then
      curl -sf http://10.99.0.1:9100/metrics | grep "^inc_switch_packets_in_total"; fi' \
    "$inc" -b 8 -e 1M -f 16 -n 3 -w 1 --no-progress "$@" >>"$log" 2>&1
}
run -c allreduce,reduce_scatter,allgather -a inc,ring && run -c broadcast -a inc,pipelined_chain
rc=$?
[ $rc -eq 0 ] || fail "inc testbed exited with $rc"

grep -q WRONG "$log" && fail "a result was WRONG"
for c in allreduce reduce_scatter allgather broadcast; do
  n_inc=$(grep -cE "^\[h0 r0\] +$c +[0-9]+ .* inc\* .* OK$" "$log")
  n_host=$(grep -cE "^\[h0 r0\] +$c +[0-9]+ .* (ring|pipelined_chain) .* OK$" "$log")
  [ "$n_inc" -ge 2 ] || fail "$c: expected verified in-network rows (inc*), found $n_inc"
  [ "$n_host" -ge 2 ] || fail "$c: expected verified host rows, found $n_host"
done
for sw in spine leaf0 leaf1; do
  lines=$(grep -E "^\[$sw\] switch $sw: packets in" "$log")
  [ "$(wc -l <<<"$lines")" -eq 2 ] || fail "expected --stats of switch $sw from both runs"
  while read -r line; do
    pin=$(sed -E 's/.*packets in ([0-9]+).*/\1/' <<<"$line")
    agg=$(sed -E 's/.*aggregations ([0-9]+).*/\1/' <<<"$line")
    [ "$pin" -gt 0 ] || fail "switch $sw saw no packets: the in-network path did not run there"
    echo "switch $sw: $pin packets in, $agg aggregations"
  done <<<"$lines"
  # Broadcast replicates (no aggregation); the reductions of the first run must aggregate.
  agg=$(head -1 <<<"$lines" | sed -E 's/.*aggregations ([0-9]+).*/\1/')
  [ "$agg" -gt 0 ] || fail "switch $sw aggregated nothing"
done
if command -v curl >/dev/null; then
  m=$(grep -E '^\[h0 r0\] inc_switch_packets_in_total\{switch="leaf0"\} [1-9]' "$log" | tail -1)
  [ -n "$m" ] || fail "leaf0's /metrics was not reachable from host 0 or showed no packets"
  echo "metrics from host 0: ${m#\[h0 r0\] }"
fi
for leaf in leaf0 leaf1; do
  for dir in up down; do
    bytes=$(awk -v l="$leaf" -v d="$dir" '$1 == l && $2 == "uplink" && $3 == d { print $6; exit }' "$log")
    [ -n "$bytes" ] && [ "$bytes" -gt 0 ] || fail "$leaf uplink $dir carried no bytes ('$bytes')"
    echo "$leaf uplink $dir: $bytes bytes"
  done
done
left=$(ls /run/netns 2>/dev/null | grep -c "^${pfx}-")
[ "$left" -eq 0 ] || fail "$left namespaces with prefix $pfx left behind"
if compgen -G "/run/inc-testbed/${pfx}-*" >/dev/null; then fail "state directory left behind"; fi
echo "testbed tree: 2 leaves x 2 hosts + spine, shaped: every collective verified through 3 switches; cleaned up"
