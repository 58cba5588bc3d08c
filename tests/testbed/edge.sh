#!/usr/bin/env bash
# CI testbed with Edge-INC engines: 3 hosts x 2 ranks, no switch, every host link shaped; one
# `inc edge` per host (`inc testbed --edge`), each rank attached to its host's engine, the
# engines meshed across the emulated links. `inc bench` checks every result (OK/WRONG). Checks:
#   - the job's exit code is 0, every row is OK and ran on the engines (algorithm "edge:*");
#   - each of the 3 engines served its host's 2 ranks and ran collectives (their exit lines);
#   - a job with the int8 wire handler (INC_EDGE_HANDLER) passes mp_edge_handler's checks and the
#     engines converted its messages (their exit lines);
#   - nothing is left: no namespace, no state directory, no engine process.
# Exit 77 (ctest: skipped) where namespaces cannot be created.
# usage: edge.sh path/to/inc path/to/mp_edge_handler
set -u
inc=$(readlink -f "$1")
prog=$(readlink -f "$2")
pfx=tbedge
. "$(dirname "$(readlink -f "$0")")/common.sh"

run() {
  "$inc" testbed --prefix "$pfx" --hosts 3 --ranks-per-host 2 --no-switch --link 1gbit --edge \
    -- "$inc" bench -b 8 -e 1M -f 16 -n 3 -w 1 --no-progress "$@" >>"$log" 2>&1
}
run -c allreduce,reduce_scatter,allgather,broadcast,alltoall -a ring,auto
rc=$?
[ $rc -eq 0 ] || fail "inc testbed --edge exited with $rc"
grep -q WRONG "$log" && fail "a result was WRONG"
for c in allreduce reduce_scatter allgather broadcast alltoall; do
  n=$(grep -cE "^\[h0 r0\] +$c +[0-9]+ .* edge:[a-z_]+\*? .* OK$" "$log")
  [ "$n" -ge 2 ] || fail "$c: expected verified rows run by the engine (edge:*), found $n"
  n_host=$(grep -cE "^\[h0 r0\] +$c +[0-9]+ " "$log")
  [ "$n" -eq "$n_host" ] || fail "$c: $n of $n_host rows ran on the engine"
done
for h in 0 1 2; do
  line=$(grep -E "^\[edge-h$h\] inc edge: stopped:" "$log" | tail -1)
  [ -n "$line" ] || fail "no exit line from the engine of host $h"
  att=$(sed -E 's/.*stopped: ([0-9]+) ranks attached.*/\1/' <<<"$line")
  colls=$(sed -E 's/.*refused, ([0-9]+) collectives.*/\1/' <<<"$line")
  [ "$att" -eq 2 ] || fail "engine of host $h: $att ranks attached, expected its 2 ($line)"
  [ "$colls" -gt 0 ] || fail "engine of host $h ran no collectives ($line)"
  echo "engine h$h: $att ranks, $colls collectives"
done

# The int8 wire handler (INC_EDGE_HANDLER): mp_edge_handler's checks (the quantiser's bound for
# f32 sums, exact data movement and i32) through the engines across hosts, converted there.
: >"$log.int8"
INC_EDGE_HANDLER=int8 "$inc" testbed --prefix "$pfx" --hosts 3 --ranks-per-host 1 --no-switch --link 1gbit --edge \
  -- "$prog" >>"$log.int8" 2>&1
rc=$?
cat "$log.int8" >>"$log"
conv=$(grep -E "^\[edge-h0\] inc edge: stopped:" "$log.int8" | sed -E 's/.* ([0-9]+) messages converted.*/\1/')
rm -f "$log.int8"
[ $rc -eq 0 ] || fail "the int8 job (mp_edge_handler) exited with $rc"
[ -n "$conv" ] && [ "$conv" -gt 0 ] || fail "engine h0 converted no message ('$conv')"
echo "int8 job: engine h0 converted $conv messages"
left=$(ls /run/netns 2>/dev/null | grep -c "^${pfx}-")
[ "$left" -eq 0 ] || fail "$left namespaces with prefix $pfx left behind"
if compgen -G "/run/inc-testbed/${pfx}-*" >/dev/null; then fail "state directory left behind"; fi
pgrep -f "inc-testbed/${pfx}-.*/edge-h" >/dev/null && fail "an edge engine is still running"
echo "testbed edge: 3 hosts x 2 ranks, shaped, every collective verified through the hosts' engines; cleaned up"
