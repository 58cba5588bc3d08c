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
start_switch() { exec "$inc" switch --bind 127.0.0.1:$base --lanes 1 --metrics-port $((base + 100)); }
serve_on_free_ports 101 "$dir/sw1" "metrics http" start_switch ||
  { cat "$dir/sw1"; echo "FAIL: the first switch did not serve metrics"; exit 1; }
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
