#!/usr/bin/env bash
# The hosts' TCP congestion control (docs/TESTBED.md, "TCP in the hosts"): by default every host
# namespace runs reno whatever the machine's default is; --tcp-cc inherit leaves the machine's;
# a name the kernel lacks is refused before anything is created (exit 2, the reason named).
# Exit 77 (ctest: skipped) where namespaces cannot be created.
# usage: tcp.sh path/to/inc
set -u
inc=$(readlink -f "$1")
pfx=tbtcp
. "$(dirname "$(readlink -f "$0")")/common.sh"

"$inc" testbed -q --prefix "$pfx" --hosts 2 --no-switch --no-counters -- \
  sysctl -n net.ipv4.tcp_congestion_control >"$log" 2>&1 || fail "inc testbed exited with $?"
[ "$(grep -cE '^\[h[01] r[01]\] reno$' "$log")" -eq 2 ] || fail "the hosts do not run reno by default"

machine=$(sysctl -n net.ipv4.tcp_congestion_control)
"$inc" testbed -q --prefix "$pfx" --hosts 1 --no-switch --no-counters --tcp-cc inherit -- \
  sysctl -n net.ipv4.tcp_congestion_control >"$log" 2>&1 || fail "inc testbed --tcp-cc inherit exited with $?"
# A new namespace starts with the machine's default (Linux 6.1 here and in Debian 12).
grep -qE "^\[h0 r0\] $machine$" "$log" || fail "--tcp-cc inherit: expected '$machine'"

"$inc" testbed -q --prefix "$pfx" --hosts 2 --tcp-cc nosuchcc -- true >"$log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--tcp-cc nosuchcc: exit $rc, expected 2"
grep -q "no TCP congestion control 'nosuchcc'" "$log" || fail "--tcp-cc nosuchcc: the reason is not named"
ls /run/netns 2>/dev/null | grep -q "^${pfx}-" && fail "namespaces are left behind"
ls -d /run/inc-testbed/"${pfx}"-* 2>/dev/null | grep -q . && fail "a state directory is left behind"
echo "hosts run reno by default, inherit gives '$machine', an unknown name is refused"
exit 0
