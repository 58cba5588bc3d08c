#!/usr/bin/env bash
# The switch's /metrics endpoint (issue 8): a second switch asked for the same metrics port
# must refuse to start (httplib's SO_REUSEPORT let it share the port, and scrapes alternated
# between the two switches); 8 and then 16 slow clients must not starve a scrape.
# usage: metrics_abuse.sh path/to/inc
set -u
inc=$(readlink -f "$1")
here=$(dirname "$(readlink -f "$0")")
dir=$(mktemp -d)
sw=
trap 'kill -9 $sw 2>/dev/null; rm -rf "$dir"' EXIT
source "$here/wait_for.sh"
# Ports below the ephemeral range (free_ports) another test may still take: a first switch that cannot bind its
# ports (and says so) is retried on other ones; any other failure to serve fails the test.
for attempt in 1 2 3 4 5; do
  base=$(free_ports 101) || { echo "FAIL: no free ports"; exit 1; }
  "$inc" switch --bind 127.0.0.1:$base --lanes 1 --metrics-port $((base + 100)) >"$dir/sw1" 2>&1 &
  sw=$!
  for ((i = 0; i < 1200; ++i)); do
    grep -q "metrics http" "$dir/sw1" && break
    kill -0 $sw 2>/dev/null || break
    sleep 0.05
  done
  grep -q "metrics http" "$dir/sw1" && break
  kill -9 $sw 2>/dev/null; wait $sw 2>/dev/null
  grep -q "in use" "$dir/sw1" || break
done
grep -q "metrics http" "$dir/sw1" || { cat "$dir/sw1"; echo "FAIL: the first switch did not serve metrics"; exit 1; }
timeout 20 "$inc" switch --bind 127.0.0.1:$((base + 2)) --lanes 1 --metrics-port $((base + 100)) >"$dir/sw2" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$dir/sw2"; echo "FAIL: a second switch on the same metrics port started (rc $rc)"; exit 1; }
grep -q "cannot serve metrics on 127.0.0.1:$((base + 100))" "$dir/sw2" || { cat "$dir/sw2"; echo "FAIL: no reason given"; exit 1; }
for n in 8 16; do
  out=$(timeout 30 python3 "$here/slow_http_clients.py" $((base + 100)) $n)
  echo "$n slow clients: $out"
  [[ "$out" == ok* ]] || { echo "FAIL: $n slow clients starved /metrics"; exit 1; }
done
echo "metrics: one switch per port, slow clients do not starve a scrape"
