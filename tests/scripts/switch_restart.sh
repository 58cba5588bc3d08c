#!/usr/bin/env bash
# Fault test: the switch restarts (its state is gone) while 4 ranks run in-network allreduces.
# The ranks must notice and stop with an error that names the switch and the restart, within
# their deadline, and never print a wrong result. Then the job is run again (the retry):
# against the restarted switch it runs in the network again; with the switch gone it runs on
# the hosts, every result verified.
# usage: switch_restart.sh path/to/inc
set -u
inc=$(readlink -f "$1")
port=$((30000 + $$ % 20000))
log=$(mktemp)
trap 'kill -9 $sw1 $sw2 2>/dev/null; rm -f $log' EXIT

"$inc" switch --bind 127.0.0.1:$port --job 1:4:16 --slot-elements 4096 >/dev/null 2>&1 &
sw1=$!
sw2=
INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_TIMEOUT=30 \
  "$inc" launch -n 4 -- "$inc" bench -c allreduce -a inc -d i32 -b 1M -e 1M -n 100000 -w 0 \
  --check 1 --no-progress >"$log" 2>&1 &
job=$!
sleep 2
kill -9 $sw1
"$inc" switch --bind 127.0.0.1:$port --job 1:4:16 --slot-elements 4096 >/dev/null 2>&1 &
sw2=$!
t0=$(date +%s)
wait $job
rc=$?
took=$(( $(date +%s) - t0 ))
grep -E "switch|WRONG" "$log" | head -5
if [ $rc -eq 0 ]; then echo "FAIL: the job did not notice the switch restart"; exit 1; fi
if grep -q WRONG "$log"; then echo "FAIL: a wrong result was reported"; exit 1; fi
if ! grep -qiE "switch.*(restart|lost|state|refus)" "$log"; then echo "FAIL: the error does not name the switch restart"; exit 1; fi
if [ $took -gt 60 ]; then echo "FAIL: took ${took}s to notice"; exit 1; fi
echo "switch restart: every rank stopped with an error after ${took}s, no wrong result"

rerun() {
  INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_TIMEOUT=30 \
    "$inc" launch -n 4 -- "$inc" bench -c allreduce -d i32 -b 1K -e 1M -f 32 -n 3 -w 1 --no-progress 2>&1
}
out=$(rerun) || { echo "$out"; echo "FAIL: the retried job failed against the restarted switch"; exit 1; }
echo "$out" | grep -q "inc\*" || { echo "$out"; echo "FAIL: the retried job did not run in the network"; exit 1; }
echo "retry against the restarted switch: in the network, verified"
kill -9 $sw2
sw2=
out=$(rerun) || { echo "$out"; echo "FAIL: the job failed with the switch gone"; exit 1; }
if echo "$out" | grep -q "inc\*" || echo "$out" | grep -q WRONG; then echo "$out"; echo "FAIL: expected host algorithms"; exit 1; fi
echo "switch gone: the job ran on the host algorithms, verified"
