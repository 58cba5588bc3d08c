#!/usr/bin/env bash
# What authentication costs end to end where the links are the bottleneck (issue 8): the same
# in-network f32 Allreduce on the emulated testbed (docs/TESTBED.md: hosts in network
# namespaces, veth links shaped by tc, one switch), the job keyed (the testbed's default: a fresh
# key per run for the switch and the ranks, every packet sealed and checked) and unkeyed
# (--no-auth), alternated ROUNDS times per link rate in one run (keyed first in even rounds,
# unkeyed first in odd ones), each size its own testbed run. Prints per rate and size rank 0's
# time per call, median [min, max] over the rounds, and keyed/unkeyed of the medians; and the
# median CPU seconds per testbed run of the switch (its lanes' threads, from --stats) and of the
# whole job (ranks + switch, user + system). Every row must have run in the network (algorithm
# inc*) and be checked OK, and the switch must say "job 1 is keyed" exactly in the keyed runs.
# Needs root (the testbed's namespaces and qdiscs).
# usage: bench/auth/testbed_cost.sh [path/to/inc] [hosts] [rounds] [rates] [sizes] [testbed args]
#   defaults: build/tools/inc 8 3 "1gbit 2gbit" "1M 16M" ""
#   e.g.      bench/auth/testbed_cost.sh build/tools/inc 8 3 1gbit "1M 16M" "--mtu 1500"
# (not --controller: it keys every communicator, so there is no unkeyed run)
set -eu
inc=$(readlink -f "${1:-build/tools/inc}")
hosts=${2:-8}
rounds=${3:-3}
rates=${4:-1gbit 2gbit}
sizes=${5:-1M 16M}
extra=${6:-}
iters=5
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# run MODE RATE SIZE -> appends "SIZE TIME_US SWITCH_CPU_S JOB_CPU_S" to $dir/MODE.RATE
run() {
  local auth=() log="$dir/log"
  [ "$1" = plain ] && auth=(--no-auth)
  local TIMEFORMAT='%U %S'
  # shellcheck disable=SC2086  # $extra: testbed options, split on purpose
  { time "$inc" testbed -q "${auth[@]}" --hosts "$hosts" --link "$2" $extra -- \
      inc bench -c allreduce -a inc -d f32 -b "$3" -e "$3" -n $iters -w 2 --no-progress >"$log" 2>&1; } 2>"$dir/time" ||
    { tail -20 "$log" >&2; fail "$1 run at $2, $3: testbed exited non-zero"; }
  local row
  row=$(awk '$1 == "[h0" && $2 == "r0]" && $3 == "allreduce"' "$log")
  [ -n "$row" ] || { tail -20 "$log" >&2; fail "$1 run at $2, $3: no allreduce row from rank 0"; }
  echo "$row" | awk '$8 !~ /^inc/ || $NF != "OK" {exit 1}' || fail "$1 run at $2, $3: not in the network or not OK: $row"
  if [ "$1" = keyed ]; then grep -q "job 1 is keyed" "$log" || fail "keyed run at $2, $3: the switch did not say the job is keyed"
  else grep -q "job 1 is keyed" "$log" && fail "unkeyed run at $2, $3: the switch says the job is keyed"; fi
  local t sw
  t=$(echo "$row" | awk '{print $9}')
  sw=$(awk '/^\[switch\] switch [^ ]+: packets in/ {for (i = 1; i < NF; ++i) if ($i == "cpu") c += $(i + 1)} END {print c + 0}' "$log")
  awk -v s="$3" -v t="$t" -v sw="$sw" '{print s, t, sw, $1 + $2}' "$dir/time" >>"$dir/$1.$2"
}
stats() { sort -g | awk '{a[NR] = $1} END {printf "%s %s %s\n", a[int((NR + 1) / 2)], a[1], a[NR]}'; }
for rate in $rates; do
  for ((r = 0; r < rounds; ++r)); do
    if ((r % 2 == 0)); then order="keyed plain"; else order="plain keyed"; fi
    for s in $sizes; do for m in $order; do run "$m" "$rate" "$s"; done; done
  done
done
printf "# %d hosts, one switch, links %s, f32 allreduce through the switch (inc bench -n %d, rank 0's time per call);" \
  "$hosts" "${rates// /, }" $iters
printf " keyed and unkeyed alternated, %d rounds: median [min, max]%s; sw cpu: the switch's lanes' CPU seconds per" "$rounds" "${extra:+; testbed $extra}"
printf " testbed run (%d calls), job: the whole job's (ranks + switch, user + system), medians\n" $((iters + 2))
printf "%8s %6s %26s %26s %8s %9s %9s %6s %8s %8s %6s\n" "rate" "size" "unkeyed ms" "keyed ms" "k/u" \
  "sw cpu u" "sw cpu k" "k/u" "job u" "job k" "k/u"
for rate in $rates; do
  for s in $sizes; do
    col() { awk -v s="$s" -v c="$2" '$1 == s {print $c}' "$dir/$1.$rate" | stats; }
    read -r pm plo phi < <(col plain 2)
    read -r km klo khi < <(col keyed 2)
    read -r ps _ < <(col plain 3)
    read -r ks _ < <(col keyed 3)
    read -r pj _ < <(col plain 4)
    read -r kj _ < <(col keyed 4)
    awk -v r="$rate" -v s="$s" -v pm="$pm" -v plo="$plo" -v phi="$phi" -v km="$km" -v klo="$klo" -v khi="$khi" \
      -v ps="$ps" -v ks="$ks" -v pj="$pj" -v kj="$kj" \
      'BEGIN {printf "%8s %6s %8.2f [%6.2f, %6.2f] %8.2f [%6.2f, %6.2f] %8.2f %9.3f %9.3f %6.2f %8.2f %8.2f %6.2f\n", r, s,
              pm / 1e3, plo / 1e3, phi / 1e3, km / 1e3, klo / 1e3, khi / 1e3, km / pm, ps, ks, (ps > 0 ? ks / ps : 0),
              pj, kj, (pj > 0 ? kj / pj : 0)}'
  done
done
