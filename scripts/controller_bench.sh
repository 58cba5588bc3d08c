#!/usr/bin/env bash
# Measurements of `inc controller` (docs/CONTROLLER.md "Measured"); prints figures, asserts
# nothing about speed. Real processes on loopback; this machine's cores are shared, so read
# ratios, not absolute times.
#   1. communicator creation (the world: mesh + tree request + probe) with and without a tree,
#      K = 1, 2, 4 concurrent jobs of 4 ranks, on one switch and on a two-level tree
#   2. split into 2, 4 and 8 groups on 8 ranks (+ the dup of each group), with and without trees
#   3. four concurrent jobs of 4 ranks sharing one switch of 64 slots, asking 32 slots each,
#      per policy: the slots each got, per-job throughput and Jain's fairness index
#      (`fair` re-balances live: the running jobs shrink as the others arrive; the slots column
#      then says "granted>running": what each job was granted, and what it held once all four ran)
#   4. the same four jobs on a two-level tree (spine + 2 leaves of 64 slots, ranks on both leaves):
#      every job's tree is 3 switches, resized live on all three under `fair`
# usage: scripts/controller_bench.sh build/tools/inc build/tests/api/mp_controller
#   SECTIONS="3" runs only the tables listed (default "1 2 3"; 4: table 3 on a two-level tree);
#   POLICIES="fair;fair --no-rebalance" the policies of tables 3 and 4 (separated by ';');
#   ITERS=N allreduces per job in tables 3 and 4 (default 200)
set -u
inc=$(readlink -f "$1")
mp=$(readlink -f "$2")
base=$((20000 + ($$ * 17) % 30000))
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null; done; rm -rf "$dir"' EXIT
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/ctlkey")
export INC_CONTROL_KEY_FILE="$dir/ctlkey" INC_TIMEOUT=120
port=$base
next_port() { port=$((port + 1)); }
wait_line() { for ((i = 0; i < 600; ++i)); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no '$2' in $1"; cat "$1"; exit 1; }

fabric() {  # KIND SLOTS -> writes $dir/fabric, starts controller + switches, sets ctl
  local kind=$1 slots=$2 policy=${3:-fair}
  for p in "${pids[@]}"; do kill $p 2>/dev/null; done
  pids=()
  next_port; ctl=$port
  if [ $kind = one ]; then
    next_port; echo "switch s0 127.0.0.1:$port slots=$slots" >"$dir/fabric"
  else
    next_port; local sp=$port; next_port; local l0=$port; next_port; local l1=$port
    printf 'switch spine 127.0.0.1:%s slots=%s\nswitch leaf0 127.0.0.1:%s parent=spine slots=%s\nswitch leaf1 127.0.0.1:%s parent=spine slots=%s\n' \
      $sp $slots $l0 $slots $l1 $slots >"$dir/fabric"
    for r in $(seq 0 15); do echo "host h$r leaf=leaf$((r % 2))"; done >>"$dir/fabric"
  fi
  : >"$dir/ctl.log"
  "$inc" controller serve --fabric "$dir/fabric" --control-key-file "$dir/ctlkey" --listen 127.0.0.1:$ctl --policy $policy \
    ${EXTRA:-} >>"$dir/ctl.log" 2>&1 &
  pids+=($!)
  wait_line "$dir/ctl.log" "serving"
  while read -r _ name addr rest; do
    local parent=$(grep -o "parent=[a-z0-9]*" <<<"$rest" | cut -d= -f2)
    local paddr=
    [ -n "$parent" ] && paddr=$(awk -v n=$parent '$2 == n {print $3}' "$dir/fabric")
    "$inc" switch --name $name --bind $addr --lanes 1 --slots $slots ${paddr:+--parent $paddr} \
      --controller 127.0.0.1:$ctl --control-key-file "$dir/ctlkey" >"$dir/sw-$name.log" 2>&1 &
    pids+=($!)
    wait_line "$dir/ctl.log" "switch $name registered"
  done < <(grep '^switch' "$dir/fabric")
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}'; }

sections=${SECTIONS:-1 2 3}
if [[ " $sections " == *" 1 "* ]]; then
echo "== 1. communicator creation (world of 4 ranks), median over the concurrent jobs and 3 rounds, ms"
printf "%-10s %-5s %12s %12s %8s\n" fabric jobs "no tree" "with tree" ratio
for kind in one two; do
  fabric $kind 1024
  for K in 1 2 4; do
    for mode in hosts tree; do
      : >"$dir/times"
      for round in 1 2 3; do
        rm -f "$dir"/j*
        js=()
        for j in $(seq 1 $K); do
          if [ $mode = tree ]; then
            INC_CONTROLLER=127.0.0.1:$ctl INC_CONTROL_HOST='h{rank}' "$inc" launch -n 4 -- "$mp" 0 1 1000 >"$dir/j$j" 2>&1 &
          else
            MP_CONTROLLER_EXPECT_HOSTS=1 "$inc" launch -n 4 -- "$mp" 0 1 1000 >"$dir/j$j" 2>&1 &
          fi
          js+=($!)
        done
        for p in "${js[@]}"; do wait $p || { echo "a job failed"; cat "$dir"/j*; exit 1; }; done
        [ $mode = tree ] && ! grep -q "tree from the controller" "$dir"/j1 && { echo "no tree"; cat "$dir/j1"; exit 1; }
        grep -ho "created world [0-9]*" "$dir"/j* | awk '{print $3 / 1000}' >>"$dir/times"
      done
      eval "t_$mode=$(median <"$dir/times")"
    done
    printf "%-10s %-5s %12s %12s %8.2f\n" $kind $K $t_hosts $t_tree $(awk -v a=$t_tree -v b=$t_hosts 'BEGIN {print a / b}')
  done
done

fi

if [[ " $sections " == *" 2 "* ]]; then
echo "== 2. split and dup on 8 ranks (one switch), median of 3 runs, ms"
fabric one 1024
printf "%-7s %12s %12s %12s %12s\n" groups "split/hosts" "split/tree" "dup/hosts" "dup/tree"
for G in 2 4 8; do
  for mode in hosts tree; do
    : >"$dir/split" ; : >"$dir/dup"
    for round in 1 2 3; do
      if [ $mode = tree ]; then
        INC_CONTROLLER=127.0.0.1:$ctl "$inc" launch -n 8 -- "$mp" $G 1 1000 >"$dir/s" 2>&1 || { cat "$dir/s"; exit 1; }
      else
        MP_CONTROLLER_EXPECT_HOSTS=1 "$inc" launch -n 8 -- "$mp" $G 1 1000 >"$dir/s" 2>&1 || { cat "$dir/s"; exit 1; }
      fi
      grep -o "split into $G [0-9]*" "$dir/s" | awk '{print $4 / 1000}' >>"$dir/split"
      grep -o "dup [0-9]*" "$dir/s" | awk '{print $2 / 1000}' >>"$dir/dup"
    done
    eval "s_$mode=$(median <"$dir/split")"
    eval "d_$mode=$(median <"$dir/dup")"
  done
  printf "%-7s %12s %12s %12s %12s\n" $G $s_hosts $s_tree $d_hosts $d_tree
done

fi

iters=${ITERS:-200}
share_table() {  # KIND SWITCHES: the table of section 3 (one switch) or 4 (a two-level tree)
local kind=$1 nsw=$2
for pol in "${policies[@]}"; do
  set -- $pol
  EXTRA="${*:2}" fabric $kind 64 $1
  rm -f "$dir/go"
  js=()
  for j in 1 2 3 4; do
    INC_CONTROLLER=127.0.0.1:$ctl INC_CONTROL_SLOTS=32 MP_CONTROLLER_HOLD="$dir/go" MP_CONTROLLER_EXPECT_ANY=1 \
      INC_CONTROL_HOST=$([ $kind = two ] && echo 'h{rank}') "$inc" launch -n 4 -- "$mp" 0 $iters 100003 >"$dir/f$j" 2>&1 &
    js+=($!)
  done
  # Until the controller answered all four (granted or refused); 60 s bound.
  for ((i = 0; i < 600; ++i)); do
    n=$("$inc" controller status --controller 127.0.0.1:$ctl --control-key-file "$dir/ctlkey" |
        grep -o '"granted":[0-9]*\|"no_slots":[0-9]*\|"policy_limit":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)
    [ "${n:-0}" -ge 4 ] && break
    sleep 0.1
  done
  touch "$dir/go"
  # What the jobs hold once they run (re-balancing moves them): the status when the most jobs
  # held slots at once (no waiting one), polled until the first job ends.
  running=
  while kill -0 ${js[0]} 2>/dev/null; do
    st=$("$inc" controller status --controller 127.0.0.1:$ctl --control-key-file "$dir/ctlkey" 2>/dev/null)
    now=$(grep -o '"slots":[0-9]*,"switches":'$nsw',"adopted":false,"waiting":false' <<<"$st" | cut -d: -f2 | cut -d, -f1 | sort -rn | paste -sd/)
    [ "$(tr / '\n' <<<"$now" | grep -c .)" -ge "$(tr / '\n' <<<"$running" | grep -c .)" ] && running=$now
    sleep 0.2
  done
  for p in "${js[@]}"; do wait $p || { echo "job failed"; cat "$dir"/f*; exit 1; }; done
  printf "policy %-30s" "$pol:"
  for j in 1 2 3 4; do
    slots=$(grep -o "$nsw switch\(es\)\?, [0-9]* slots" "$dir/f$j" | head -1 | awk '{print $3}')
    tp=$(grep -o "job throughput world: .* = [0-9.]* MB/s" "$dir/f$j" | awk '{print $(NF-1)}')
    printf " job%d %s slots %7s MB/s |" $j "${slots:-hosts}" "$tp"
    echo "$tp" >>"$dir/tp-$1"
  done
  awk '{s += $1; q += $1 * $1; n++} END {printf " Jain %.3f", s * s / (n * q)}' "$dir/tp-$1"
  echo " | running: ${running:-none} slots"
  grep -c "re-balancing: job" "$dir/ctl.log" | xargs printf "  (controller: %s resizes sent, "
  grep -c "moved job" "$dir/ctl.log" | xargs printf "%s done)\n"
  rm -f "$dir/tp-$1"
done
}
IFS=';' read -ra policies <<<"${POLICIES:-fair;fair --no-rebalance;fair --fair-jobs 4;static;first-come;first-come --max-job-slots 16}"
if [[ " $sections " == *" 3 "* ]]; then
echo "== 3. four jobs of 4 ranks on one switch of 64 slots, each asking 32 slots; $iters x 100003 i32 allreduces each"
share_table one 1
fi
[[ " $sections " == *" 4 "* ]] || exit 0
# The same on a two-level tree (a spine and two leaves of 64 slots each, ranks on both leaves:
# every job's tree is the 3 switches; `fair` resizes each running job on all three).
echo "== 4. four jobs of 4 ranks on a two-level tree (spine + 2 leaves of 64 slots), each asking 32 slots; $iters x 100003 i32 allreduces each"
share_table two 3
