#!/usr/bin/env bash
# Fault test: the switch restarts (its state is gone) while 4 ranks run in-network allreduces.
# The ranks must notice and stop with an error that names the switch and the restart, and
# never print a wrong result. Then the job is run again (the retry): against the restarted
# switch it runs in the network again; with the switch gone it runs on the hosts, every result
# verified.
# Nothing is timed: each step waits for an event (the switch's "serving" line, its counters
# showing aggregations of the running job, the job's exit); the deadlines of those waits, and
# ctest's time-out, only bound a hang.
# usage: switch_restart.sh path/to/inc
set -u
inc=$(readlink -f "$1")
dir=$(mktemp -d)
sw1= sw2= job=
trap 'kill -9 $sw1 $sw2 $job 2>/dev/null; rm -rf "$dir"' EXIT

source "$(dirname "$(readlink -f "$0")")/wait_for.sh"
# The restarted switch takes the same address: two lanes on ports free now (not the kernel's
# choice at bind time, which the second switch could not repeat).
port=$(free_ports 2) || exit 1
start_switch() {  # start_switch LOG: a switch printing its counters every 0.1 s
  "$inc" switch --bind 127.0.0.1:$port --lanes 2 --job 1:4:16 --slot-elements 4096 --stats-interval 0.1 >"$1" 2>&1 &
}

start_switch "$dir/sw1"
sw1=$!
wait_for "$dir/sw1" "serving 127\.0\.0\.1:$port" "serving line from the first switch"
INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_TIMEOUT=30 \
  "$inc" launch -n 4 -- "$inc" bench -c allreduce -a inc -d i32 -b 1M -e 1M -n 100000 -w 0 \
  --check 1 --no-progress >"$dir/job" 2>&1 &
job=$!
# The job is inside its allreduces once the switch has completed some of them.
wait_for "$dir/sw1" "aggregations [1-9][0-9]*, results" "aggregation at the first switch"
kill -9 $sw1
wait $sw1 2>/dev/null  # gone, its port free
sw1=
start_switch "$dir/sw2"
sw2=$!
wait $job
rc=$?
job=
grep -E "switch|WRONG" "$dir/job" | head -5
if [ $rc -eq 0 ]; then echo "FAIL: the job did not notice the switch restart"; exit 1; fi
if grep -q WRONG "$dir/job"; then echo "FAIL: a wrong result was reported"; exit 1; fi
if ! grep -qiE "switch.*(restart|lost|state|refus)" "$dir/job"; then echo "FAIL: the error does not name the switch restart"; exit 1; fi
echo "switch restart: every rank stopped with an error, no wrong result"

rerun() {
  INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_TIMEOUT=30 \
    "$inc" launch -n 4 -- "$inc" bench -c allreduce -d i32 -b 1K -e 1M -f 32 -n 3 -w 1 --no-progress 2>&1
}
wait_for "$dir/sw2" "serving 127\.0\.0\.1:$port" "serving line from the restarted switch"
out=$(rerun) || { echo "$out"; echo "FAIL: the retried job failed against the restarted switch"; exit 1; }
echo "$out" | grep -q "inc\*" || { echo "$out"; echo "FAIL: the retried job did not run in the network"; exit 1; }
echo "retry against the restarted switch: in the network, verified"
kill -9 $sw2
wait $sw2 2>/dev/null
sw2=
out=$(rerun) || { echo "$out"; echo "FAIL: the job failed with the switch gone"; exit 1; }
if echo "$out" | grep -q "inc\*" || echo "$out" | grep -q WRONG; then echo "$out"; echo "FAIL: expected host algorithms"; exit 1; fi
echo "switch gone: the job ran on the host algorithms, verified"
