#!/usr/bin/env bash
# inc testbed always removes what it created. Each case ends with no namespace, no state
# directory and no process of the testbed left:
#   0. a setup command fails: exit 1, the command and its stderr are named;
#   1. a rank crashes (SIGSEGV): the job's exit code is 128+11, the others are stopped;
#   2. a rank fails (exit 3): exit code 3;
#   3. SIGINT and 4. SIGTERM to the testbed while the job runs: exit 130 / 143;
#   5. SIGINT right after the start (during the build or the job, whichever it hits);
#   6. SIGKILL of the testbed: its namespaces and a rank's background process remain (checked),
#      and the next testbed removes them at start;
#   7. SIGKILL again, then `inc testbed cleanup` removes them.
# Waits are bounded (each poll loop gives up after 60 s). Exit 77 (skipped) where namespaces
# cannot be created.
# usage: cleanup.sh path/to/inc
set -u
inc=$(readlink -f "$1")
pfx=tbcln
marker="inc-testbed-cleanup-$$"  # in the command line of every rank's background process
. "$(dirname "$(readlink -f "$0")")/common.sh"

namespaces_left() { ls /run/netns 2>/dev/null | grep -c "^${pfx}-"; }
processes_left() { pgrep -fc "$marker"; }
assert_clean() {  # case
  local n
  n=$(namespaces_left)
  [ "$n" -eq 0 ] || fail "$1: $n namespaces left"
  compgen -G "/run/inc-testbed/${pfx}-*" >/dev/null && fail "$1: state directory left"
  n=$(processes_left)
  [ "$n" -eq 0 ] || fail "$1: $n processes left"
  echo "ok: $1"
}
# The rank program: prints "up", leaves a process running in the background (its own session,
# so that only the testbed's namespace cleanup can find it), then runs "$@".
rank_script='setsid bash -c "exec -a '"$marker"' sleep 600" </dev/null >/dev/null 2>&1 &
echo up; eval "$1"'
tb() {  # rank-command [hosts]; run it in a subshell: ( tb ... ) [&], so that $! is the testbed
  exec "$inc" testbed --prefix "$pfx" --hosts "${2:-3}" --link 1gbit -q -- sh -c "$rank_script" rank "$1"
}
wait_for_ups() {  # count: bounded wait until that many ranks printed "up"
  for _ in $(seq 600); do
    [ "$(grep -c '\] up$' "$log")" -ge "$1" ] && return 0
    sleep 0.1
  done
  fail "the ranks did not start within 60 s"
}

# 0. a setup command fails (a `tc` that refuses, first in PATH): the message names the command
# and quotes its stderr, and what was built so far is removed.
fakebin=$(mktemp -d)
printf '#!/bin/sh\necho "RTNETLINK answers: Operation not permitted (fake tc)" >&2\nexit 2\n' >"$fakebin/tc"
chmod +x "$fakebin/tc"
PATH="$fakebin:$PATH" "$inc" testbed --prefix "$pfx" --hosts 3 --link 1gbit -q -- true >"$log" 2>&1
rc=$?
rm -rf "$fakebin"
[ $rc -eq 1 ] || fail "failing tc: exit code $rc, expected 1"
grep -qE "cannot build the testbed: \`tc -n ${pfx}-[0-9]+-h0 qdisc add dev eth0 root tbf .*\` exited with code 2: RTNETLINK answers: Operation not permitted \(fake tc\)" "$log" ||
  fail "failing tc: the message does not name the command and its stderr"
assert_clean "a failing setup command"

# 1. crash
(tb '[ "$INC_RANK" = 1 ] && kill -SEGV $$; sleep 600') >"$log" 2>&1
rc=$?
[ $rc -eq 139 ] || fail "crash: exit code $rc, expected 139"
grep -q "rank 1 was killed by signal 11" "$log" || fail "crash: not reported"
assert_clean "a crashed rank"

# 2. failing rank
(tb '[ "$INC_RANK" = 2 ] && exit 3; sleep 600') >"$log" 2>&1
rc=$?
[ $rc -eq 3 ] || fail "failing rank: exit code $rc, expected 3"
assert_clean "a failing rank (exit 3)"

# 3./4. signals while the job runs
for sig in INT TERM; do
  : >"$log"
  (tb 'sleep 600') >"$log" 2>&1 &
  pid=$!
  wait_for_ups 3
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  want=$((128 + $(kill -l "$sig")))
  [ $rc -eq $want ] || fail "SIG$sig: exit code $rc, expected $want"
  assert_clean "SIG$sig while the job runs"
done

# 5. SIGINT as soon as the testbed records its state (its signal handling is in place then), in
# the middle of building 12 hosts or, on a fast machine, early in the job.
: >"$log"
(tb 'sleep 600' 12) >"$log" 2>&1 &
pid=$!
for _ in $(seq 6000); do
  [ -e "/run/inc-testbed/${pfx}-$pid/owner" ] && break
  sleep 0.01
done
kill -INT "$pid"
wait "$pid"
rc=$?
[ $rc -eq 130 ] || fail "SIGINT at start: exit code $rc, expected 130"
assert_clean "SIGINT right after the start"

# 6. SIGKILL, then a new testbed cleans up
: >"$log"
(tb 'sleep 600') >"$log" 2>&1 &
pid=$!
wait_for_ups 3
kill -KILL "$pid"
wait "$pid" 2>/dev/null
n=$(namespaces_left)
[ "$n" -eq 4 ] || fail "after SIGKILL: expected the 4 namespaces to remain, found $n"
[ "$(processes_left)" -ge 3 ] || fail "after SIGKILL: expected the ranks' background processes to remain"
"$inc" testbed --prefix "$pfx" --hosts 1 --no-switch --no-counters -q -- true >"$log" 2>&1 ||
  fail "the next testbed failed"
grep -q "removed the leftovers of testbed pid $pid (no longer running): 4 namespaces" "$log" ||
  fail "the next testbed did not report removing the leftovers"
assert_clean "SIGKILL, then the next testbed"

# 7. SIGKILL, then inc testbed cleanup
: >"$log"
(tb 'sleep 600') >"$log" 2>&1 &
pid=$!
wait_for_ups 3
kill -KILL "$pid"
wait "$pid" 2>/dev/null
[ "$(namespaces_left)" -eq 4 ] || fail "after SIGKILL: namespaces missing"
"$inc" testbed cleanup --prefix "$pfx" >"$log" 2>&1 || fail "inc testbed cleanup failed"
grep -q "removed testbed pid $pid: 4 namespaces" "$log" || fail "cleanup did not report pid $pid"
assert_clean "SIGKILL, then inc testbed cleanup"
"$inc" testbed cleanup --prefix "$pfx" >"$log" 2>&1
grep -q "no testbed with prefix '$pfx' found" "$log" || fail "a second cleanup found something"
echo "testbed cleanup: crash, failure, SIGINT, SIGTERM, SIGINT at start, SIGKILL (+ next run, + cleanup): nothing left"
