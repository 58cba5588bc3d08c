#!/usr/bin/env bash
# Live re-balancing with real processes (docs/CONTROLLER.md "Re-balancing"): one switch of 64
# slots (one lane), the fair policy. A lone job asks for all 64 and gets them; three more jobs
# arrive while it runs, each asking for 64: the controller shrinks the running jobs to the new
# fair share (32, then 21, then 16) without stopping them, each newcomer waits for its share,
# and when the newcomers finish the first job grows back. Every result is checked (exact).
# Nothing is timed: each step waits for an event; deadlines only bound a hang. The jobs run
# allreduces until the script tells them to stop (MP_CONTROLLER_UNTIL).
# With LANES > 1 (ctest controller_rebalance_lanes: 2) the switch runs `--lanes LANES` with 64
# slots per lane and the same steps hold per lane: lane 0 picks each boundary, the other lanes
# take it (docs/PROTOCOL.md "Live resize of lanes"); the log says `per lane on its N lanes`.
# usage: controller_rebalance.sh path/to/inc path/to/mp_controller [LANES]
set -u
lanes=${3:-1}
source "$(dirname "$(readlink -f "$0")")/controller_common.sh" "$@"
base=$(free_ports $((3 + lanes))) || exit 1
c=$base s=$((base + 1))
echo "switch s0 127.0.0.1:$s slots=$((64 * lanes)) lanes=$lanes" >"$dir/one.topo"
start_controller "$dir/one.topo" $c "$dir/ctl.log" --policy fair
LANES=$lanes start_switches $c "$dir/ctl.log" $((64 * lanes)) s0:$s
export INC_CONTROLLER=127.0.0.1:$c INC_CONTROL_SLOTS=64

# The lone job: all 64 slots, allreduces until told to stop (it outlives the newcomers).
MP_CONTROLLER_UNTIL="$dir/stop1" "$inc" launch -n 2 -- "$mp" 0 1000000 10007 >"$dir/job1.log" 2>&1 &
first=$!
pids+=($first)
wait_holding $c 64 1 "lone job holding 64 slots" s0
status $c | grep -q '"resizable":true' || { status $c; fail "the lone job is not resizable"; }

# Three newcomers, one after the other, while it runs: shares of 32, 21, 16.
newcomers=()
for j in 2 3 4; do
  MP_CONTROLLER_UNTIL="$dir/stop" "$inc" launch -n 2 -- "$mp" 0 1000000 10007 >"$dir/job$j.log" 2>&1 &
  newcomers+=($!)
  pids+=($!)
  share=$((64 / j))
  wait_holding $c $share $j "$j jobs of $share slots" s0
  echo "$j jobs: $share slots each"
done
kill -0 $first 2>/dev/null || fail "the first job ended early"
if [ "$lanes" -gt 1 ]; then
  grep -q "re-balancing: job .* slots per lane on its $lanes lanes" "$dir/ctl.log" || fail "no per-lane re-balancing line"
fi
touch "$dir/stop"
for p in "${newcomers[@]}"; do wait $p || fail "a newcomer failed"; done
for j in 2 3 4; do
  grep -q "mp_controller: all exact" "$dir/job$j.log" || fail "job $j not exact"
  grep -q "tree rooted at switch 's0', 1 switch" "$dir/job$j.log" || fail "job $j had no tree"
done
# Alone again: the first job grows back to the whole pool.
wait_holding $c 64 1 "the first job grown back to 64 slots" s0
echo "the newcomers left: the first job holds 64 slots again"
finish_first "'s0', 1 switch, 64 slots" "the whole pool"
# Each arrival and departure moves each running job a few times at most: no oscillation.
check_resizes 4 30 "3 arrivals and 3 departures"
echo "controller_rebalance: ok"
