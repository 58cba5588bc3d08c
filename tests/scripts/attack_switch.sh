#!/usr/bin/env bash
# Attack test (issue 8): an unprivileged process on the same host floods a switch serving a
# keyed job with forged joins (random sessions: one such packet used to reset the job and kill
# every rank) and forged contributions with guessed epochs (which used to enter the sums, and
# drew answers: a reflector), while 4 ranks run checked in-network allreduces. The ranks must
# finish with every result right, through the switch; the switch must have refused and counted
# every forged packet (drops unauthenticated) and sent the attacker nothing.
# Nothing is timed: each step waits for an event; deadlines only bound a hang.
# usage: attack_switch.sh path/to/inc
set -u
inc=$(readlink -f "$1")
here=$(dirname "$(readlink -f "$0")")
dir=$(mktemp -d)
chmod 755 "$dir"
sw= job=
trap 'kill -9 $sw $job 2>/dev/null; rm -rf "$dir"' EXIT
source "$(dirname "$(readlink -f "$0")")/wait_for.sh"
port=$(free_ports 1) || exit 1
key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
(umask 077; echo "1 $key" >"$dir/keys")
"$inc" switch --bind 127.0.0.1:$port --lanes 1 --job 1:4:16 --key-file "$dir/keys" --stats-interval 0.1 >"$dir/sw" 2>&1 &
sw=$!
wait_for "$dir/sw" "serving 127\.0\.0\.1:$port" "serving line from the switch"
grep -q "job 1 is keyed" "$dir/sw" || { cat "$dir/sw"; echo "FAIL: the switch does not say the job is keyed"; exit 1; }
INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_KEY_FILE="$dir/keys" INC_TIMEOUT=60 \
  "$inc" launch -n 4 -- "$inc" bench -c allreduce -a inc -d i32 -b 64K -e 64K -n 3000 -w 0 \
  --no-progress >"$dir/job" 2>&1 &
job=$!
# The ranks are inside their allreduces once the switch has completed some of them.
wait_for "$dir/sw" "aggregations [1-9][0-9]*, results" "aggregation at the switch"
# The attacker: unprivileged when we are root (it cannot read the key file, nor sniff).
run_as=(python3)
cp "$here/attacker.py" "$dir/attacker.py" && chmod 644 "$dir/attacker.py"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && [ -x /usr/bin/python3 ]; then
  run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3)
fi
attack=$("${run_as[@]}" "$dir/attacker.py" 127.0.0.1 $port 1 2>&1) || { echo "FAIL: attacker: $attack"; exit 1; }
echo "attacker: $attack"
running=1
kill -0 $job 2>/dev/null || running=0
wait $job
rc=$?
job=
kill -INT $sw; wait $sw; sw=
cat "$dir/job" | grep -vE "^\[[0-9]\] #" | head -8
grep -E "drops|job 1" "$dir/sw" | tail -3
[ $rc -eq 0 ] || { cat "$dir/job"; echo "FAIL: the job failed under attack"; exit 1; }
[ $running -eq 1 ] || { echo "FAIL: the job ended before the attack did (not an overlap)"; exit 1; }
grep -q WRONG "$dir/job" && { echo "FAIL: a wrong result under attack"; exit 1; }
grep -qE "allreduce +65536 .* inc\* .* OK" "$dir/job" || { echo "FAIL: the allreduces did not run through the switch"; exit 1; }
sent=$(echo "$attack" | awk '{print $2}')
received=$(echo "$attack" | awk '{print $4}')
refused=$(awk '/drops unauthenticated/ {n = $3} END {print n}' "$dir/sw")
[ "$received" = 0 ] || { echo "FAIL: the switch sent $received bytes to the attacker"; exit 1; }
[ "${refused:-0}" = "$sent" ] || { echo "FAIL: the switch counted ${refused:-0} unauthenticated drops, the attacker sent $sent"; exit 1; }
grep -qE "job_resets [1-9]|resets [1-9]" "$dir/sw" && { echo "FAIL: the job was reset"; exit 1; }
echo "attack: $sent forged packets refused and counted, 0 bytes answered, every result exact"
