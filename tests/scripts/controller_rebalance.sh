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
status() { "$inc" controller status --controller 127.0.0.1:$c --control-key-file "$dir/ctlkey"; }
# Jobs holding exactly N slots at the switch (what its last state reported: a shrink counts
# once the job moved, so once its members ran past the boundary).
holding() { status 2>/dev/null | grep -o '"jobs":{[^}]*}' | head -1 | grep -o ':[0-9]*' | grep -c "^:$1\$"; }
wait_holding() {  # N COUNT WHAT (120 s bound)
  local i
  for ((i = 0; i < 1200; ++i)); do
    [ "$(holding $1)" -ge $2 ] && return 0
    sleep 0.1
  done
  status; fail "no $3 in the controller's status after 120 s"
}

c=$base s=$((base + 1))
echo "switch s0 127.0.0.1:$s slots=$((64 * lanes)) lanes=$lanes" >"$dir/one.topo"
"$inc" controller serve --fabric "$dir/one.topo" --control-key-file "$dir/ctlkey" --listen 127.0.0.1:$c \
  --policy fair >"$dir/ctl.log" 2>&1 &
pids+=($!)
wait_for "$dir/ctl.log" "serving 127\.0\.0\.1:$c" "serving line from the controller"
"$inc" switch --name s0 --bind 127.0.0.1:$s --lanes $lanes --slots $((64 * lanes)) --controller 127.0.0.1:$c \
  --control-key-file "$dir/ctlkey" >"$dir/sw.log" 2>&1 &
pids+=($!)
wait_for "$dir/ctl.log" "switch s0 registered" "registration of the switch"
export INC_CONTROLLER=127.0.0.1:$c INC_CONTROL_SLOTS=64

# The lone job: all 64 slots, allreduces until told to stop (it outlives the newcomers).
MP_CONTROLLER_UNTIL="$dir/stop1" "$inc" launch -n 2 -- "$mp" 0 1000000 10007 >"$dir/job1.log" 2>&1 &
first=$!
pids+=($first)
wait_holding 64 1 "lone job holding 64 slots"
status | grep -q '"resizable":true' || { status; fail "the lone job is not resizable"; }

# Three newcomers, one after the other, while it runs: shares of 32, 21, 16.
newcomers=()
for j in 2 3 4; do
  MP_CONTROLLER_UNTIL="$dir/stop" "$inc" launch -n 2 -- "$mp" 0 1000000 10007 >"$dir/job$j.log" 2>&1 &
  newcomers+=($!)
  pids+=($!)
  share=$((64 / j))
  wait_holding $share $j "$j jobs of $share slots"
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
wait_holding 64 1 "the first job grown back to 64 slots"
echo "the newcomers left: the first job holds 64 slots again"
touch "$dir/stop1"
wait $first || fail "the first job failed"
grep -q "mp_controller: all exact" "$dir/job1.log" || fail "the first job not exact"
grep -q "tree rooted at switch 's0', 1 switch, 64 slots" "$dir/job1.log" || fail "the lone job did not get the whole pool"
grep -q "collectives run on the hosts" "$dir"/job*.log && fail "a job fell back to the hosts"
n=$(grep -c "re-balancing: job" "$dir/ctl.log")
m=$(grep -c "moved job" "$dir/ctl.log")
[ "$m" -ge 4 ] || fail "only $m resizes completed ($n sent)"
# Each arrival and departure moves each running job a few times at most: no oscillation.
[ "$n" -le 30 ] || fail "$n resizes sent for 3 arrivals and 3 departures (they oscillate)"
echo "the running jobs were resized $m times ($n resizes sent), every result exact"
echo "controller_rebalance: ok"
