#!/usr/bin/env bash
# `inc controller` with real processes (docs/CONTROLLER.md): a controller, switches that
# register with it, and jobs under `inc launch` whose communicators (world, split, dup) get
# their trees from it.
#   1. one switch (inc launch --controller): 8 ranks split into 4 groups and 4 ranks into 2, every group in the network,
#      exact; every tree released at the end; an unreachable controller: hosts, saying why
#   2. a two-level tree (spine, two leaves; INC_CONTROL_HOST=h{rank} puts ranks on hosts of the fabric)
#   3. four concurrent jobs on one switch with scarce slots, static partition: exact, 16 slots
#      each; a fifth is refused and runs on the hosts, saying why
#   4. a job killed with kill -9: its slots come back within the lease
#   5. the controller killed and restarted under a running job: the job carries on (exact) and
#      re-claims its tree; the switch re-registers
# Nothing is timed: each step waits for an event; deadlines only bound a hang.
# usage: controller.sh path/to/inc path/to/mp_controller
set -u
source "$(dirname "$(readlink -f "$0")")/controller_common.sh" "$@"
base=$(free_ports 16) || exit 1

wait_status() {  # PORT REGEX WHAT: poll the status until it matches (60 s bound)
  local i
  for ((i = 0; i < 600; ++i)); do
    status $1 2>/dev/null | grep -qE "$2" && return 0
    sleep 0.1
  done
  status $1; fail "no $3 in the controller's status after 60 s"
}

# ---- 1. one switch ----------------------------------------------------------------------
c1=$base s1=$((base + 1))
echo "switch s0 127.0.0.1:$s1 slots=256" >"$dir/one.topo"
start_controller "$dir/one.topo" $c1 "$dir/c1.log"
start_switches $c1 "$dir/c1.log" 256 s0:$s1
for np_groups in "4 2" "8 4"; do
  set -- $np_groups
  "$inc" launch -n $1 --controller 127.0.0.1:$c1 --control-key-file "$dir/ctlkey" -- "$mp" $2 2 10007 >"$dir/run.log" 2>&1 || fail "$1 ranks split into $2 groups"
  grep -q "mp_controller: all exact" "$dir/run.log" || fail "no exact result"
  [ "$(grep -c "tree from the controller" "$dir/run.log")" -ge $((1 + 2 * $2)) ] || fail "not every communicator had a tree"
  echo "$1 ranks, split into $2 groups and dup'ed: every group in the network, exact"
done
wait_status $c1 '"jobs":\[\],' "empty job list (every tree released)"
status $c1 | grep -q '"free":256' || fail "slots not all free after the jobs"
status $c1 | grep -q '"expired":0' || fail "trees were left to expire instead of being released"
echo "every tree released when its communicator went away"
# Nobody at the controller's address: the hosts, exact, and a line on stderr saying why.
MP_CONTROLLER_EXPECT_HOSTS=1 INC_CONTROLLER=127.0.0.1:$((base + 10)) "$inc" launch -n 2 -- "$mp" 0 1 1000 >"$dir/unreachable.log" 2>&1 ||
  fail "the job without a reachable controller failed"
grep -q "inc: communicator 0 of 2 ranks (pid [0-9]*): collectives run on the hosts: controller unreachable: controller 127.0.0.1:$((base + 10)): Connection refused" "$dir/unreachable.log" ||
  fail "an unreachable controller was not reported"
echo "unreachable controller: the hosts, with the reason on stderr"

# ---- 2. a two-level tree ----------------------------------------------------------------
c2=$((base + 2)) sp=$((base + 3)) l0=$((base + 4)) l1=$((base + 5))
two_level_fabric "$dir/two.topo" 256 $sp $l0 $l1
start_controller "$dir/two.topo" $c2 "$dir/c2.log"
start_switches $c2 "$dir/c2.log" 256 spine:$sp leaf0:$l0:$sp leaf1:$l1:$sp
INC_CONTROLLER=127.0.0.1:$c2 INC_CONTROL_HOST='h{rank}' "$inc" launch -n 4 -- "$mp" 2 2 10007 >"$dir/run.log" 2>&1 ||
  fail "4 ranks on a two-level tree"
grep -q "world: .*tree rooted at switch 'spine', 3 switches" "$dir/run.log" || fail "the world's tree is not rooted at the spine"
echo "two-level tree: world rooted at the spine (3 switches), groups split and dup'ed, exact"

# ---- 3. four concurrent jobs, scarce slots, static partition ------------------------------
c3=$((base + 6)) s3=$((base + 7))
echo "switch s0 127.0.0.1:$s3 slots=64" >"$dir/scarce.topo"
start_controller "$dir/scarce.topo" $c3 "$dir/c3.log" --policy static --partitions 4
start_switches $c3 "$dir/c3.log" 64 s0:$s3
export INC_CONTROLLER=127.0.0.1:$c3
jobs=()
for j in 1 2 3 4; do
  MP_CONTROLLER_HOLD="$dir/go" "$inc" launch -n 2 -- "$mp" 0 40 10007 >"$dir/job$j.log" 2>&1 &
  jobs+=($!)
done
wait_status $c3 '"free":0,' "full switch (four jobs of 16 slots)"
MP_CONTROLLER_EXPECT_HOSTS=1 "$inc" launch -n 2 -- "$mp" 0 1 1000 >"$dir/fifth.log" 2>&1 || fail "the fifth job failed"
grep -q "collectives run on the hosts: the controller gave no tree: all 4 partitions of switch 's0' are taken" "$dir/fifth.log" ||
  fail "the fifth job did not say why it runs on the hosts"
touch "$dir/go"
for j in 0 1 2 3; do wait ${jobs[$j]} || fail "concurrent job $((j + 1))"; done
for j in 1 2 3 4; do
  grep -q "mp_controller: all exact" "$dir/job$j.log" || fail "job $j not exact"
  grep -q "tree rooted at switch 's0', 1 switch, 16 slots" "$dir/job$j.log" || fail "job $j did not get its partition of 16 slots"
done
echo "four concurrent jobs: exact, 16 slots each (static partition); a fifth refused with the reason"

# ---- 4. a killed job's slots come back within the lease ------------------------------------
c4=$((base + 8)) s4=$((base + 9))
echo "switch s0 127.0.0.1:$s4 slots=64" >"$dir/lease.topo"
start_controller "$dir/lease.topo" $c4 "$dir/c4.log" --lease 2
start_switches $c4 "$dir/c4.log" 64 s0:$s4
INC_CONTROLLER=127.0.0.1:$c4 setsid "$inc" launch -n 2 -- "$mp" 0 100000 10007 >"$dir/killed.log" 2>&1 &
victim=$!
pids+=($victim)
wait_status $c4 '"jobs":\[\{' "job holding a tree"
kill -9 -- -$victim 2>/dev/null || kill -9 $victim
wait $victim 2>/dev/null
wait_status $c4 '"expired":1' "expired lease"
wait_status $c4 '"free":64,' "the killed job's slots back"
status $c4 | grep -q '"static_jobs":0' || { status $c4; fail "a released job is reported as the switch's own"; }
echo "killed job: its lease expired and its slots came back"

# ---- 5. the controller restarts under a running job ----------------------------------------
INC_CONTROLLER=127.0.0.1:$c4 MP_CONTROLLER_UNTIL="$dir/stop" "$inc" launch -n 2 -- "$mp" 0 100000000 10007 >"$dir/restart.log" 2>&1 &
runner=$!
pids+=($runner)
wait_status $c4 '"jobs":\[\{' "job holding a tree"
kill -9 $ctl
wait $ctl 2>/dev/null
start_controller "$dir/lease.topo" $c4 "$dir/c4b.log" --lease 2
wait_for "$dir/c4b.log" "switch s0 registered from" "re-registration of the switch"
wait_status $c4 '"reclaimed":1' "re-claim of the running job's tree"
kill -0 $runner 2>/dev/null || fail "the job ended before the restarted controller saw its re-claim"
touch "$dir/stop"
wait $runner || fail "the job running across the controller's restart"
grep -q "mp_controller: all exact" "$dir/restart.log" || fail "not exact across the restart"
wait_status $c4 '"jobs":\[\],' "empty job list after the job"
echo "controller restart: the running job carried on (exact), re-claimed its tree, released it at the end"
echo "PASS"
