#!/usr/bin/env bash
# Attack test (issue 8) on the UDP control packets (admit/release, a switch without a
# controller), which used to carry the control key in clear. An on-path attacker (a relay the
# admin's `inc controller admit` goes through) records a legitimate admit of job 9; after the
# admin released it, the attacker replays the recording, forges admits and releases (made-up
# trailers, the old format with a guessed key) and alters the recorded admit (more slots; into a
# release of job 1), while 4 ranks of the keyed job 1 run checked allreduces. The switch must
# refuse every such packet, count it in /metrics (replayed, unauthenticated), answer none of
# them, keep job 9 released, and the victim job must finish with every result right.
# Nothing is timed: each step waits for an event; deadlines only bound a hang.
# usage: control_abuse.sh path/to/inc
set -u
inc=$(readlink -f "$1")
here=$(dirname "$(readlink -f "$0")")
dir=$(mktemp -d)
chmod 755 "$dir"
sw= job= relay=
trap 'kill -9 $sw $job $relay 2>/dev/null; rm -rf "$dir"' EXIT
source "$here/wait_for.sh"
newkey() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
(umask 077; echo "1 $(newkey)" >"$dir/keys"; echo "1 $(newkey)" >"$dir/ctl.key")
start_switch() {  # on $base, its metrics on $base + 100 (serve_on_free_ports)
  exec "$inc" switch --bind 127.0.0.1:$base --lanes 1 --slots 64 --job 1:4:16 --key-file "$dir/keys" \
    --control-key-file "$dir/ctl.key" --metrics-port $((base + 100)) --stats-interval 0.2
}
serve_on_free_ports 101 "$dir/sw" "metrics http" start_switch || { cat "$dir/sw"; echo "FAIL: the switch did not start"; exit 1; }
port=$base
metric() {  # metric REGEX: the sum of the samples of the switch's /metrics matching it, as an integer
  python3 -c "import re,sys,urllib.request; t=urllib.request.urlopen('http://127.0.0.1:$((port + 100))/metrics', timeout=20).read().decode(); print(int(sum(float(l.split()[-1]) for l in t.splitlines() if re.match(sys.argv[1], l))))" "$1"
}
wait_metric() {  # wait_metric REGEX VALUE WHAT: until the sum is VALUE (the switch publishes every 100 ms)
  local i
  for ((i = 0; i < 600; ++i)); do [ "$(metric "$1")" = "$2" ] && return 0; sleep 0.1; done
  echo "FAIL: $3 (metrics: $(metric "$1"), expected $2)"; exit 1
}
INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_KEY_FILE="$dir/keys" INC_TIMEOUT=60 \
  "$inc" launch -n 4 -- "$inc" bench -c allreduce -a inc -d i32 -b 64K -e 64K -n 3000 -w 0 \
  --no-progress >"$dir/job" 2>&1 &
job=$!
wait_for "$dir/sw" "aggregations [1-9][0-9]*, results" "aggregation at the switch"
python3 "$here/control_attacker.py" relay "$dir/relay.port" $port "$dir/sniffed" 2>"$dir/relay.err" &
relay=$!
for ((i = 0; i < 1200; ++i)); do [ -s "$dir/relay.port" ] && break; sleep 0.05; done
[ -s "$dir/relay.port" ] || { cat "$dir/relay.err"; echo "FAIL: no relay"; exit 1; }
# The admin admits job 9 through the relay (the attacker records it), then releases it.
out=$("$inc" controller admit --switch 127.0.0.1:$(cat "$dir/relay.port") --control-key-file "$dir/ctl.key" --job 9:2:8 2>&1)
[ "$out" = "admitted job 9 at 127.0.0.1:$(cat "$dir/relay.port")" ] || { echo "$out"; echo "FAIL: the admin's admit"; exit 1; }
wait_metric '^inc_switch_jobs\{' 2 "job 9 not admitted"
"$inc" controller release --switch 127.0.0.1:$port --control-key-file "$dir/ctl.key" --job 9 || { echo "FAIL: release"; exit 1; }
wait_metric '^inc_switch_jobs\{' 1 "job 9 not released"
kill $relay; wait $relay 2>/dev/null; relay=
unauth0=$(metric '^inc_switch_drops_total\{.*reason="unauthenticated"')
replayed0=$(metric '^inc_switch_drops_total\{.*reason="replayed"')
attack=$(python3 "$here/control_attacker.py" attack $port "$dir/sniffed" 2>&1) || { echo "FAIL: attacker: $attack"; exit 1; }
echo "attacker: $attack"
read -r _ replayed _ forged _ received _ <<<"$attack"
running=1
kill -0 $job 2>/dev/null || running=0
wait $job
rc=$?
job=
grep -vE "^\[[0-9]\] #" "$dir/job" | head -6
r_replayed=$(($(metric '^inc_switch_drops_total\{.*reason="replayed"') - replayed0))
r_unauth=$(($(metric '^inc_switch_drops_total\{.*reason="unauthenticated"') - unauth0))
jobs=$(metric '^inc_switch_jobs\{')
# A wrong secret gets no answer (and changes nothing).
(umask 077; echo "1 $(newkey)" >"$dir/wrong.key")
"$inc" controller admit --switch 127.0.0.1:$port --control-key-file "$dir/wrong.key" --job 9:2:8 --timeout 0.5 2>"$dir/wrong" \
  && { echo "FAIL: an admit under a wrong secret succeeded"; exit 1; }
grep -q "no authentic answer" "$dir/wrong" || { cat "$dir/wrong"; echo "FAIL: no reason"; exit 1; }
kill -INT $sw; wait $sw; sw=
echo "metrics during the attack: drops replayed +$r_replayed, unauthenticated +$r_unauth; jobs now $jobs"
[ $rc -eq 0 ] || { cat "$dir/job"; echo "FAIL: the victim job failed under attack"; exit 1; }
[ $running -eq 1 ] || { echo "FAIL: the job ended before the attack did (not an overlap)"; exit 1; }
grep -q WRONG "$dir/job" && { echo "FAIL: a wrong result under attack"; exit 1; }
grep -qE "allreduce +65536 .* inc\* .* OK" "$dir/job" || { echo "FAIL: the allreduces did not run through the switch"; exit 1; }
[ "$received" = "0" ] || { echo "FAIL: the switch answered the attacker ($received bytes)"; exit 1; }
[ "$r_replayed" = "$replayed" ] || { echo "FAIL: $replayed replays sent, $r_replayed refused as replayed"; exit 1; }
[ "$r_unauth" = "$forged" ] || { echo "FAIL: $forged forged packets sent, $r_unauth refused as unauthenticated"; exit 1; }
[ "$jobs" = "1" ] || { echo "FAIL: $jobs jobs at the switch (job 9 re-admitted, or job 1 released)"; exit 1; }
echo "control packets: replayed, forged and altered ones refused and counted; the victim job exact"
