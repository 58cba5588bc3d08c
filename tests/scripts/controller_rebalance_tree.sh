#!/usr/bin/env bash
# Live re-balancing of jobs on a two-level tree with real processes (docs/CONTROLLER.md
# "Re-balancing"; docs/PROTOCOL.md "Live resize of a tree"): a spine and two leaves of 64 slots
# each (one lane), the fair policy, ranks on the fabric's hosts (INC_CONTROL_HOST=h{rank}: h0
# and h1 under leaf0, h2 and h3 under leaf1). A job of 4 ranks spans the tree and gets all 64
# slots; a second such job arrives while it runs: both run at 32 on every switch (the first
# one shrunk on the spine and both leaves without stopping); a third job of 2 ranks on leaf0
# alone makes leaf0's share 21, so the two tree jobs go to 21 on all three switches (a job's
# size is the least share over its tree). When the newcomers finish, the first job grows back
# to 64 everywhere. Every result is checked (exact). Nothing is timed: each step waits for an
# event; deadlines only bound a hang.
# With LANES > 1 (ctest controller_rebalance_tree_lanes: 2) every switch runs `--lanes LANES`
# with 64 slots per lane and the same steps hold per lane: the spine's lane 0 picks each
# boundary, its other lanes take it, each leaf lane follows its parent's lane (docs/PROTOCOL.md
# "Live resize of a tree of lanes"); the log says `per lane on its N lanes`.
# usage: controller_rebalance_tree.sh path/to/inc path/to/mp_controller [LANES]
set -u
lanes=${3:-1}
source "$(dirname "$(readlink -f "$0")")/controller_common.sh" "$@"
base=$(free_ports $((1 + 3 * lanes))) || exit 1
c=$base sp=$((base + 1)) l0=$((base + 1 + lanes)) l1=$((base + 1 + 2 * lanes))
two_level_fabric "$dir/two.topo" $((64 * lanes)) $sp $l0 $l1 $([ $lanes -gt 1 ] && echo $lanes)
start_controller "$dir/two.topo" $c "$dir/ctl.log" --policy fair
LANES=$lanes start_switches $c "$dir/ctl.log" $((64 * lanes)) spine:$sp leaf0:$l0:$sp leaf1:$l1:$sp
export INC_CONTROLLER=127.0.0.1:$c INC_CONTROL_SLOTS=64 INC_CONTROL_HOST='h{rank}'

# The first job: 4 ranks over both leaves, all 64 slots, allreduces until told to stop.
MP_CONTROLLER_UNTIL="$dir/stop1" "$inc" launch -n 4 -- "$mp" 0 1000000 10007 >"$dir/job1.log" 2>&1 &
first=$!
pids+=($first)
wait_holding $c 64 1 "tree job holding 64 slots on every switch" spine leaf0 leaf1
status $c | grep -q '"resizable":true' || { status $c; fail "the tree job is not resizable"; }

# A second tree job while it runs: 32 each on every switch.
MP_CONTROLLER_UNTIL="$dir/stop" "$inc" launch -n 4 -- "$mp" 0 1000000 10007 >"$dir/job2.log" 2>&1 &
second=$!
pids+=($second)
wait_holding $c 32 2 "2 tree jobs of 32 slots on every switch" spine leaf0 leaf1
echo "2 tree jobs: 32 slots each on the spine and both leaves"
# A job on leaf0 alone: leaf0's share is 21, so the tree jobs go to 21 on all three switches.
MP_CONTROLLER_UNTIL="$dir/stop" "$inc" launch -n 2 -- "$mp" 0 1000000 10007 >"$dir/job3.log" 2>&1 &
third=$!
pids+=($third)
wait_holding $c 21 3 "3 jobs of 21 slots on leaf0" leaf0
wait_holding $c 21 2 "the 2 tree jobs at 21 slots on the spine and leaf1" spine leaf1
echo "a third job on leaf0: the tree jobs at 21 slots on every switch of their trees"
kill -0 $first 2>/dev/null || fail "the first job ended early"
touch "$dir/stop"
wait $second || fail "the second job failed"
wait $third || fail "the third job failed"
grep -q "mp_controller: all exact" "$dir/job2.log" || fail "job 2 not exact"
grep -q "mp_controller: all exact" "$dir/job3.log" || fail "job 3 not exact"
grep -q "tree rooted at switch 'spine', 3 switches" "$dir/job2.log" || fail "job 2 had no tree over both leaves"
grep -q "tree rooted at switch 'leaf0', 1 switch" "$dir/job3.log" || fail "job 3 was not on leaf0 alone"
# Alone again: the first job grows back to the whole pool on every switch.
wait_holding $c 64 1 "the first job grown back to 64 slots on every switch" spine leaf0 leaf1
echo "the newcomers left: the first job holds 64 slots again on every switch"
finish_first "'spine', 3 switches, 64 slots" "the whole pool on every switch"
check_resizes 9 60 "2 arrivals and 2 departures"
[ $lanes -gt 1 ] && { grep -q "per lane on its $lanes lanes" "$dir/ctl.log" || fail "no resize per lane in the controller's log"; }
echo "controller_rebalance_tree (lanes $lanes): ok"
