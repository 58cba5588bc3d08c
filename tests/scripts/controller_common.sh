# Sourced by the controller test scripts (controller.sh, controller_rebalance*.sh) with their
# arguments (path/to/inc path/to/mp_controller): absolute tool paths, a private directory and
# the PIDs to kill at exit, a fresh control key for every process the script starts, and
# `fail`, which prints the logs of the directory; then the steps the scripts share (below).
inc=$(readlink -f "$1")
mp=$(readlink -f "$2")
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf "$dir"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/wait_for.sh"
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/ctlkey")
export INC_CONTROL_KEY_FILE="$dir/ctlkey" INC_TIMEOUT=60
fail() { echo "FAIL: $*"; for f in "$dir"/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }

# The steps the scripts share. Each waits for its event (a log line, the status); the
# deadlines only bound a hang.
# start_controller FABRIC PORT LOG ARGS...: `inc controller serve` on 127.0.0.1:PORT (its PID in
# $ctl), returning once it serves.
start_controller() {
  local fabric=$1 port=$2 log=$3
  shift 3
  "$inc" controller serve --fabric "$fabric" --control-key-file "$dir/ctlkey" --listen 127.0.0.1:$port "$@" >>"$log" 2>&1 &
  ctl=$!
  pids+=($ctl)
  wait_for "$log" "serving 127\.0\.0\.1:$port" "serving line from the controller"
}
# start_switches CTL_PORT CTL_LOG SLOTS NAME:PORT[:PARENT_PORT]...: switches of SLOTS slots
# (LANES lanes, default 1) registered with the controller, returning once the controller saw each
# register.
start_switches() {
  local c=$1 log=$2 slots=$3 s name port parent
  shift 3
  for s in "$@"; do
    IFS=: read -r name port parent <<<"$s"
    "$inc" switch --name $name --bind 127.0.0.1:$port --lanes ${LANES:-1} --slots $slots ${parent:+--parent 127.0.0.1:$parent} \
      --controller 127.0.0.1:$c --control-key-file "$dir/ctlkey" >"$dir/s-$name-$port.log" 2>&1 &
    pids+=($!)
  done
  for s in "$@"; do wait_for "$log" "switch ${s%%:*} registered" "registration of ${s%%:*}"; done
}
# two_level_fabric FILE SLOTS SPINE_PORT LEAF0_PORT LEAF1_PORT [LANES]: a spine and two leaves
# (100 Gb/s uplinks), hosts h0 and h1 under leaf0, h2 and h3 under leaf1; with LANES, every
# switch has that many lanes (SLOTS is then the whole pool, SLOTS / LANES per lane).
two_level_fabric() {
  local l=${6:+ lanes=$6}
  cat >"$1" <<TOPO
switch spine 127.0.0.1:$3 slots=$2$l
switch leaf0 127.0.0.1:$4 parent=spine slots=$2 rate=100$l
switch leaf1 127.0.0.1:$5 parent=spine slots=$2 rate=100$l
host h0 leaf=leaf0
host h1 leaf=leaf0
host h2 leaf=leaf1
host h3 leaf=leaf1
TOPO
}
status() { "$inc" controller status --controller 127.0.0.1:$1 --control-key-file "$dir/ctlkey"; }
# Jobs holding exactly N slots at switch SW in status text ST (what the switch's last state
# reported: a shrink counts once the job moved there).
holding() {  # ST SW N
  grep -o "\"name\":\"$2\"[^}]*}" <<<"$1" | grep -o '"jobs":{.*' | grep -o ':[0-9]*' | grep -c "^:$3\$"
}
wait_holding() {  # PORT N COUNT WHAT SW...: at least COUNT jobs of N slots on every SW (120 s bound)
  local c=$1 n=$2 count=$3 what=$4 end=$((SECONDS + 120)) st sw ok
  shift 4
  while [ $SECONDS -lt $end ]; do
    st=$(status $c 2>/dev/null)
    ok=1
    for sw in "$@"; do [ "$(holding "$st" $sw $n)" -ge $count ] || ok=0; done
    [ $ok = 1 ] && return 0
    sleep 0.1
  done
  status $c; fail "no $what in the controller's status after 120 s"
}
# finish_first TREE WHAT: stop the first job (PID $first, running until $dir/stop1 exists, log
# $dir/job1.log), wait for it, and check it was exact and ran on TREE ("tree rooted at switch
# TREE" in its log, e.g. "'s0', 1 switch, 64 slots"); WHAT names the tree in the failure.
finish_first() {
  touch "$dir/stop1"
  wait $first || fail "the first job failed"
  grep -q "mp_controller: all exact" "$dir/job1.log" || fail "the first job not exact"
  grep -q "tree rooted at switch $1" "$dir/job1.log" || fail "the first job did not get $2"
}
# check_resizes MIN MAX WHAT: the controller (log $dir/ctl.log) completed at least MIN resizes
# and sent at most MAX (more means the sizes oscillate); no job fell back to the hosts.
check_resizes() {
  grep -q "collectives run on the hosts" "$dir"/job*.log && fail "a job fell back to the hosts"
  local n m
  n=$(grep -c "re-balancing: job" "$dir/ctl.log")
  m=$(grep -c "moved job" "$dir/ctl.log")
  [ "$m" -ge $1 ] || fail "only $m resizes completed ($n sent)"
  [ "$n" -le $2 ] || fail "$n resizes sent for $3 (they oscillate)"
  echo "the running jobs were resized $m times ($n resizes sent), every result exact"
}
