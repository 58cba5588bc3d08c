#!/usr/bin/env bash
# INC_SEGMENT_BYTES end to end, through `inc launch` and `inc bench` (issue 13, item 6): the
# setting changes the segmentation the collectives actually run with, counted by each call's
# report (the bench's JSON: `messages_sent`, `switch_operations`, rank 0's), on the hosts and
# through a switch; a bad value stops every rank at start-up naming the variable and value.
set -euo pipefail
inc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rows() {  # file -> "collective algo in_network correct bytes_sent messages_sent switch_operations"
  python3 -c '
import json, sys
for r in json.load(open(sys.argv[1])):
    print(r["collective"], r["algo"], int(r["in_network"]), r["correct"], r["bytes_sent"],
          r["messages_sent"], r["switch_operations"])' "$1"
}
ceil_div() { echo $((($1 + $2 - 1) / $2)); }

# On the hosts, 3 ranks, f32 allreduce of 768 KiB: ring sends 2(p-1) = 4 chunks of 256 KiB per
# rank, each cut into messages of at most the segment (rounded down to whole elements); the
# ring's default segment (1 MiB) leaves each chunk whole. Recursive doubling is unsegmented by
# default; with the variable set its messages must be cut too.
p=3
chunk=$((768 * 1024 / p))
declare -A ring_msgs rd_msgs
for seg in default 4096 1002; do
  if [ "$seg" = default ]; then set_env=(); eff=$((1 << 20)); else set_env=(INC_SEGMENT_BYTES=$seg); eff=$((seg / 4 * 4)); fi
  env "${set_env[@]}" "$inc" launch -n $p --no-prefix -- \
    "$inc" bench -c allreduce -a ring,recursive_doubling -b 768K -e 768K -n 2 -w 1 --no-progress \
    --json "$tmp/hosts-$seg.json" >/dev/null
  n=0
  while read -r coll algo net ok bytes msgs ops; do
    [ "$ok" = 1 ] || fail "INC_SEGMENT_BYTES=$seg: $coll $algo wrong"
    [ "$net" = 0 ] && [ "$ops" = 0 ] || fail "INC_SEGMENT_BYTES=$seg: $coll $algo claims the network"
    # No message larger than the segment: at least bytes/segment of them.
    [ "$msgs" -ge "$(ceil_div "$bytes" "$eff")" ] ||
      fail "INC_SEGMENT_BYTES=$seg: $algo sent $bytes B in $msgs messages, some larger than $eff B"
    case $algo in
      ring)
        want=$((2 * (p - 1) * $(ceil_div $chunk $eff)))
        [ "$msgs" = "$want" ] ||
          fail "INC_SEGMENT_BYTES=$seg: ring allreduce sent $msgs messages, expected $want ($((2 * (p - 1))) chunks of $chunk B in segments of $eff B)"
        ring_msgs[$seg]=$msgs ;;
      recursive_doubling) rd_msgs[$seg]=$msgs ;;
      *) fail "asked for ring and recursive_doubling, got $algo" ;;
    esac
    n=$((n + 1))
  done < <(rows "$tmp/hosts-$seg.json")
  [ "$n" = 2 ] || fail "INC_SEGMENT_BYTES=$seg: $n rows"
done
[ "${rd_msgs[4096]}" -gt "${rd_msgs[default]}" ] ||
  fail "recursive doubling: ${rd_msgs[default]} messages by default, ${rd_msgs[4096]} with INC_SEGMENT_BYTES=4096"
echo "hosts: ring allreduce messages per rank ${ring_msgs[default]} (default), ${ring_msgs[4096]} (4096), ${ring_msgs[1002]} (1002 -> 1000 B); recursive doubling ${rd_msgs[default]} -> ${rd_msgs[4096]}"

# Through a switch, 3 ranks, f32 allreduce of 1 MiB in the network: one switch operation per
# segment (default 64 KiB).
declare -A inc_ops
for seg in default 16384; do
  if [ "$seg" = default ]; then set_env=(); eff=$((64 << 10)); else set_env=(INC_SEGMENT_BYTES=$seg); eff=$seg; fi
  env "${set_env[@]}" "$inc" launch -n $p --switch --no-prefix -- \
    "$inc" bench -c allreduce -a inc -b 1M -e 1M -n 2 -w 1 --no-progress --json "$tmp/inc-$seg.json" \
    >/dev/null 2>"$tmp/inc-$seg.err" || { cat "$tmp/inc-$seg.err"; fail "INC_SEGMENT_BYTES=$seg: switch job failed"; }
  n=0
  while read -r coll algo net ok bytes msgs ops; do
    [ "$net" = 1 ] && [ "$ok" = 1 ] || fail "INC_SEGMENT_BYTES=$seg: in-network allreduce in_network=$net correct=$ok"
    want=$(ceil_div $((1 << 20)) "$eff")
    [ "$ops" = "$want" ] ||
      fail "INC_SEGMENT_BYTES=$seg: 1 MiB in-network allreduce in $ops switch operations, expected $want of $eff B"
    inc_ops[$seg]=$ops
    n=$((n + 1))
  done < <(rows "$tmp/inc-$seg.json")
  [ "$n" = 1 ] || fail "INC_SEGMENT_BYTES=$seg: $n in-network rows"
done
echo "switch: 1 MiB allreduce in ${inc_ops[default]} switch operations (default), ${inc_ops[16384]} (16384)"

# Bad values: every rank stops in init() with the variable, the value and the range; none runs.
for bad in 4K 63 1073741825 -1 abc " 64" +64; do
  if INC_SEGMENT_BYTES=$bad "$inc" launch -n 2 --no-prefix -- \
       "$inc" bench -c allreduce -b 1K -e 1K -n 1 -w 0 --no-progress >"$tmp/bad.out" 2>&1; then
    fail "INC_SEGMENT_BYTES=$bad was accepted: $(tr '\n' ' ' <"$tmp/bad.out")"
  fi
  grep -qF "INC_SEGMENT_BYTES='$bad' must be an integer in [64, 2^30]" "$tmp/bad.out" ||
    fail "INC_SEGMENT_BYTES=$bad: no error naming it: $(tr '\n' ' ' <"$tmp/bad.out")"
  ! grep -q '^  allreduce' "$tmp/bad.out" || fail "INC_SEGMENT_BYTES=$bad: a collective ran"
done
echo "bad values rejected at start-up: 4K 63 1073741825 -1 abc ' 64' +64"

# INC_EAGER_BYTES (largest message sent before its receiver posted the receive), read in init():
# 0 (every message waits) and a value above every message (all eager) give right results with
# host algorithms whose messages are above and below the default 64 KiB; bad values stop every
# rank naming the variable.
for eager in 0 1073741824; do
  INC_EAGER_BYTES=$eager "$inc" launch -n 3 --no-prefix -- "$inc" bench -c allreduce \
    -a ring,rabenseifner,recursive_doubling -b 1K -e 1M -f 32 -n 2 -w 1 --no-progress >"$tmp/eager.out" 2>&1 ||
    fail "INC_EAGER_BYTES=$eager: $(tr '\n' ' ' <"$tmp/eager.out")"
done
# rejected VAR VALUE MESSAGE: a 2-rank job with VAR=VALUE fails, saying MESSAGE.
rejected() {
  if env "$1=$2" "$inc" launch -n 2 --no-prefix -- \
       "$inc" bench -c allreduce -b 1K -e 1K -n 1 -w 0 --no-progress >"$tmp/bad.out" 2>&1; then
    fail "$1=$2 was accepted: $(tr '\n' ' ' <"$tmp/bad.out")"
  fi
  grep -qF "$3" "$tmp/bad.out" || fail "$1=$2: no error naming it: $(tr '\n' ' ' <"$tmp/bad.out")"
}
for bad in abc -1 4611686018427387905 64K " 5" +5; do
  rejected INC_EAGER_BYTES "$bad" "INC_EAGER_BYTES='$bad' must be an integer in [0, 2^62]"
done
echo "INC_EAGER_BYTES: 0 and 1073741824 run right, bad values rejected at start-up: abc -1 2^62+1 64K ' 5' +5"

# INC_SPIN_US (wait()'s polling before it sleeps), read in init() like the above: 0 (sleep at
# once) still gives right results; bad values stop every rank naming the variable.
INC_SPIN_US=0 "$inc" launch -n 2 --no-prefix -- "$inc" bench -c allreduce -b 1K -e 64K -n 2 -w 1 \
  --no-progress >"$tmp/spin.out" 2>&1 || fail "INC_SPIN_US=0: $(tr '\n' ' ' <"$tmp/spin.out")"
for bad in abc -1 1000001 5us " 5" +5; do
  rejected INC_SPIN_US "$bad" "INC_SPIN_US='$bad' is not a whole number of microseconds"
done
echo "INC_SPIN_US: 0 runs, bad values rejected at start-up: abc -1 1000001 5us ' 5' +5"
echo OK
