#!/usr/bin/env bash
# Live re-balancing of a job on a switch with two lanes, with real processes (docs/CONTROLLER.md
# "Re-balancing", docs/PROTOCOL.md "Live resize of lanes"): `inc switch --lanes 2` with 64 slots
# per lane, the fair policy. A lone job asks for 64 slots and gets them on both lanes; a second
# job arrives while it runs: the controller shrinks the first to 32 per lane without stopping
# it (lane 0 picks the boundary, lane 1 takes it), the newcomer waits for its share; when the
# newcomer finishes, the first job grows back to 64. Every result is checked (exact). Nothing is
# timed: each step waits for an event; deadlines only bound a hang.
# usage: controller_rebalance_lanes.sh path/to/inc path/to/mp_controller
set -u
source "$(dirname "$(readlink -f "$0")")/controller_common.sh" "$@"
base=$(free_ports 4) || exit 1
status() { "$inc" controller status --controller 127.0.0.1:$c --control-key-file "$dir/ctlkey"; }
holding() { status 2>/dev/null | grep -o '"jobs":{[^}]*}' | head -1 | grep -o ':[0-9]*' | grep -c "^:$1\$"; }
wait_holding() {  # N COUNT WHAT (120 s bound)
  local i
  for ((i = 0; i < 1200; ++i)); do
    [ "$(holding $1)" -ge $2 ] && return 0
    sleep 0.1
  done
  status; fail "no $3 in the controller's status after 120 s"
}

c=$base s=$((base + 1))  # the switch's lanes: ports s and s + 1
echo "switch s0 127.0.0.1:$s slots=128 lanes=2" >"$dir/one.topo"
"$inc" controller serve --fabric "$dir/one.topo" --control-key-file "$dir/ctlkey" --listen 127.0.0.1:$c \
  --policy fair >"$dir/ctl.log" 2>&1 &
pids+=($!)
wait_for "$dir/ctl.log" "serving 127\.0\.0\.1:$c" "serving line from the controller"
"$inc" switch --name s0 --bind 127.0.0.1:$s --lanes 2 --slots 128 --controller 127.0.0.1:$c \
  --control-key-file "$dir/ctlkey" >"$dir/sw.log" 2>&1 &
pids+=($!)
wait_for "$dir/ctl.log" "switch s0 registered" "registration of the switch"
export INC_CONTROLLER=127.0.0.1:$c INC_CONTROL_SLOTS=64

MP_CONTROLLER_UNTIL="$dir/stop1" "$inc" launch -n 2 -- "$mp" 0 1000000 10007 >"$dir/job1.log" 2>&1 &
first=$!
pids+=($first)
wait_holding 64 1 "lone job holding 64 slots per lane"
status | grep -q '"resizable":true' || { status; fail "the job on two lanes is not resizable"; }

MP_CONTROLLER_UNTIL="$dir/stop" "$inc" launch -n 2 -- "$mp" 0 1000000 10007 >"$dir/job2.log" 2>&1 &
second=$!
pids+=($second)
wait_holding 32 2 "2 jobs of 32 slots per lane"
echo "2 jobs: 32 slots per lane each"
kill -0 $first 2>/dev/null || fail "the first job ended early"
grep -q "re-balancing: job .* to 32 slots per lane on its 2 lanes" "$dir/ctl.log" || fail "no per-lane re-balancing line"
touch "$dir/stop"
wait $second || fail "the newcomer failed"
grep -q "mp_controller: all exact" "$dir/job2.log" || fail "job 2 not exact"
wait_holding 64 1 "the first job grown back to 64 slots per lane"
echo "the newcomer left: the first job holds 64 slots per lane again"
touch "$dir/stop1"
wait $first || fail "the first job failed"
grep -q "mp_controller: all exact" "$dir/job1.log" || fail "the first job not exact"
grep -q "tree rooted at switch 's0', 1 switch, 64 slots" "$dir/job1.log" || fail "the lone job did not get 64 slots"
grep -q "collectives run on the hosts" "$dir"/job*.log && fail "a job fell back to the hosts"
m=$(grep -c "moved job" "$dir/ctl.log")
[ "$m" -ge 2 ] || fail "only $m resizes completed"
echo "the running job was resized $m times on both lanes, every result exact"
echo "controller_rebalance_lanes: ok"
