#!/usr/bin/env bash
# Runs against one long-running switch (issue 8): every new run gets the switch path, also
# after a run whose ranks were killed while attached (a random session used to compare as
# older half the time: the run fell back to the hosts, or failed with INC_ALGO=inc and a
# message telling to set INC_SWITCH). A switch that does not answer gives a fallback that says
# so on stderr, and INC_ALGO=inc names the reason.
# Nothing is timed: each step waits for an event; deadlines only bound a hang.
# usage: switch_sessions.sh path/to/inc
set -u
inc=$(readlink -f "$1")
dir=$(mktemp -d)
sw= job=
trap 'kill -9 $sw $job 2>/dev/null; rm -rf "$dir"' EXIT
source "$(dirname "$(readlink -f "$0")")/wait_for.sh"
port=$(free_ports 1) || exit 1
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/keys")
"$inc" switch --bind 127.0.0.1:$port --lanes 1 --job 1:3:16 --key-file "$dir/keys" --stats-interval 0.1 >"$dir/sw" 2>&1 &
sw=$!
wait_for "$dir/sw" "serving 127\.0\.0\.1:$port" "serving line from the switch"
export INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_KEY_FILE="$dir/keys" INC_TIMEOUT=30
run() {  # one short run that must go through the switch
  INC_ALGO=inc "$inc" launch -n 3 -- "$inc" bench -c allreduce -d i32 -b 4K -e 64K -f 16 -n 3 -w 1 --no-progress >"$dir/run" 2>&1 ||
    { cat "$dir/run"; echo "FAIL: run $1 against the long-running switch failed"; exit 1; }
  [ "$(grep -cE "allreduce .* inc\*? .* OK" "$dir/run")" -eq 2 ] ||
    { cat "$dir/run"; echo "FAIL: run $1 did not run through the switch"; exit 1; }
}
for i in 1 2 3 4 5 6; do run $i; done
echo "six consecutive runs: all through the switch"
# A run killed while its ranks are attached (no leave), then a new one; three times (a random
# session would be refused as older with probability 1/2 each time).
for i in 1 2 3; do
  : >"$dir/sw.mark"
  "$inc" launch -n 3 -- "$inc" bench -c allreduce -a inc -d i32 -b 1M -e 1M -n 100000 -w 0 --no-progress >"$dir/killed" 2>&1 &
  job=$!
  before=$(grep -c "aggregations" "$dir/sw")
  for ((t = 0; t < 1200; ++t)); do  # until the switch's counters grow under this run (60 s bound)
    last=$(grep "^switch switch: " "$dir/sw" | tail -1 | sed -E 's/.*aggregations ([0-9]+).*/\1/')
    [ -n "${prev:-}" ] && [ "${last:-0}" -gt "$prev" ] && [ "$(grep -c aggregations "$dir/sw")" -gt "$before" ] && break
    prev=${last:-0}
    sleep 0.05
  done
  prev=
  kill -9 $job; pkill -9 -f "bench -c allreduce -a inc -d i32 -b 1M -e 1M -n 100000" 2>/dev/null
  wait $job 2>/dev/null; job=
  run "after killed run $i"
done
echo "three runs after killed ones: through the switch"
# Nobody at the switch's address: the fallback says why; INC_ALGO=inc names the reason.
dead=$((port + 1))
INC_SWITCH=127.0.0.1:$dead INC_SWITCH_JOIN_TIMEOUT=1 "$inc" launch -n 2 -- "$inc" bench -c allreduce -d i32 -b 4K -e 4K -n 2 -w 0 --no-progress >"$dir/fb" 2>&1 ||
  { cat "$dir/fb"; echo "FAIL: the fallback run failed"; exit 1; }
grep -q "the in-network path is unavailable, collectives run on the hosts" "$dir/fb" ||
  { cat "$dir/fb"; echo "FAIL: the fallback to the hosts was silent"; exit 1; }
INC_ALGO=inc INC_SWITCH=127.0.0.1:$dead INC_SWITCH_JOIN_TIMEOUT=1 "$inc" launch -n 2 -- "$inc" bench -c allreduce -d i32 -b 4K -e 4K -n 2 -w 0 --no-progress >"$dir/inc" 2>&1 &&
  { cat "$dir/inc"; echo "FAIL: INC_ALGO=inc without a working switch succeeded"; exit 1; }
grep -q "needs the in-network path, which is unavailable: the switch tree did not answer" "$dir/inc" ||
  { cat "$dir/inc"; echo "FAIL: INC_ALGO=inc does not name why the switch path is unavailable"; exit 1; }
grep -q "set INC_SWITCH" "$dir/inc" && { cat "$dir/inc"; echo "FAIL: the error tells to set INC_SWITCH, which is set"; exit 1; }
echo "no switch: the fallback and the INC_ALGO=inc error say why"
