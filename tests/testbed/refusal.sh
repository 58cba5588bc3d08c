#!/usr/bin/env bash
# Without root (no CAP_NET_ADMIN / CAP_SYS_ADMIN) inc testbed says so and exits non-zero, having
# created nothing; `inc testbed show` still prints the plan. As root the check runs as `nobody`
# (setpriv, else runuser); as another user it runs as that user.
# usage: refusal.sh path/to/inc
set -u
inc=$(readlink -f "$1")
out=$(mktemp)
chmod 644 "$out"
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; echo "---- output"; cat "$out"; exit 1; }

if [ "$(id -u)" -eq 0 ]; then
  if command -v setpriv >/dev/null; then
    as_user() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --inh-caps=-all "$@"; }
  elif command -v runuser >/dev/null; then
    as_user() { runuser -u nobody -- "$@"; }
  else
    echo "SKIPPED: running as root and neither setpriv nor runuser is available to drop privileges"
    exit 77
  fi
  who=nobody
else
  as_user() { "$@"; }
  who=$(id -un)
fi
# Namespaces are named PREFIX-PID-ROLE: this run's prefix and the refused testbed's pid say
# whether it created any, whatever else runs on the machine (not a count of all namespaces).
pfx="tbref$(printf %x $$)"

as_user "$inc" testbed --prefix "$pfx" --hosts 2 -- true >"$out" 2>&1 &
tb=$!
wait "$tb"
rc=$?
[ $rc -ne 0 ] || fail "inc testbed as $who exited 0"
grep -q "lacks CAP_NET_ADMIN" "$out" || fail "the refusal does not name the missing privilege"
grep -q "needs root" "$out" || fail "the refusal does not say that root is needed"
ls /run/netns 2>/dev/null | grep -q -- "-$tb-" && fail "namespaces of the refused testbed (pid $tb) were created"
ls /run/netns 2>/dev/null | grep -q "^$pfx-" && fail "a namespace with the prefix exists"
echo "refused as $who (exit $rc): $(head -1 "$out")"

as_user "$inc" testbed cleanup --prefix "$pfx" >"$out" 2>&1 && fail "cleanup as $who exited 0"
grep -q "lacks CAP_NET_ADMIN" "$out" || fail "cleanup: the refusal does not name the missing privilege"

# Root without CAP_NET_ADMIN (as in an unprivileged container) is refused too, naming it.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  setpriv --bounding-set=-net_admin --inh-caps=-net_admin "$inc" testbed --prefix "$pfx" --hosts 2 -- true >"$out" 2>&1 &&
    fail "root without CAP_NET_ADMIN exited 0"
  grep -q "(uid 0) lacks CAP_NET_ADMIN:" "$out" || fail "root without CAP_NET_ADMIN: not named"
  echo "refused as root without CAP_NET_ADMIN"
fi

as_user "$inc" testbed show --prefix "$pfx" --hosts 2 >"$out" 2>&1 || fail "show as $who failed"
grep -q "tc -n $pfx-[0-9]*-h0 qdisc add dev eth0 root tbf" "$out" || fail "show printed no plan"
echo "testbed refusal: no privileges, no testbed (show works)"
