#!/usr/bin/env bash
# Speed of `inc sim` on large symmetric rings, folded by the symmetry of their routes (the
# default) against every rank simulated (--no-fold), in one script so that the ratio is taken
# under the same load. Usage: bench/sim/fold_speed.sh [BUILD_DIR] [HOSTS...]
# (default hosts: 1024 2048 4096). Ring Allreduce, 64 MiB unsegmented, fat_tree2 (radix 64 up to
# 1,024 hosts, 128 up to 8,192, 256 above), host overhead 0. Prints, per size and mode: makespan,
# events, wall seconds, CPU seconds and peak RSS (from /usr/bin/time), and the no-fold / fold
# ratios of wall and CPU time. The makespans must agree (the script fails otherwise).
# NOFOLD_MAX (default 4096): larger sizes run folded only (--no-fold takes minutes there).
set -euo pipefail
BUILD=${1:-build}
shift || true
SIZES=${*:-1024 2048 4096}
INC=$BUILD/tools/inc
NOFOLD_MAX=${NOFOLD_MAX:-4096}
[ -x "$INC" ] || { echo "missing $INC (build inc_tool)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "missing /usr/bin/time (Debian package time)" >&2; exit 1; }
radix_for() { if [ "$1" -le 1024 ]; then echo 64; elif [ "$1" -le 8192 ]; then echo 128; else echo 256; fi; }
out=$(mktemp)
tm=$(mktemp)
trap 'rm -f "$out" "$tm"' EXIT
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-7s %-8s %12s %12s %9s %9s %10s %12s\n" hosts mode makespan events wall_s cpu_s rss_MB ratio_wall/cpu
for n in $SIZES; do
  r=$(radix_for "$n")
  declare -A wall=() cpu=() span=()
  for mode in fold no-fold; do
    flag=()
    if [ "$mode" = no-fold ]; then
      [ "$n" -le "$NOFOLD_MAX" ] || continue
      flag=(--no-fold)
    fi
    /usr/bin/time -f "%e %U %S %M" -o "$tm" "$INC" sim run --topology fat_tree2 --hosts "$n" --radix "$r" -a ring \
      -b 64MiB --segment 64MiB --overhead-us 0 --no-progress "${flag[@]}" > "$out"
    read -r e u s m < "$tm"
    span[$mode]=$(awk '/^makespan/ {print $2 $3}' "$out" | tr -d ';')
    ev=$(awk '/^makespan/ {print $4}' "$out")
    wall[$mode]=$e
    cpu[$mode]=$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.2f", u + s}')
    ratio=-
    if [ "$mode" = no-fold ]; then
      ratio=$(awk -v a="$e" -v b="${wall[fold]}" -v c="${cpu[no-fold]}" -v d="${cpu[fold]}" \
        'BEGIN {printf "%.1fx/%.1fx", a / (b > 0 ? b : 0.01), c / (d > 0 ? d : 0.01)}')
      if [ "${span[fold]}" != "${span[no-fold]}" ]; then
        echo "FAIL: $n hosts: makespan ${span[fold]} folded, ${span[no-fold]} with every rank" >&2
        exit 1
      fi
    fi
    printf "%-7s %-8s %12s %12s %9s %9s %10s %12s\n" "$n" "$mode" "${span[$mode]}" "$ev" "$e" "${cpu[$mode]}" \
      "$(awk -v m="$m" 'BEGIN {printf "%.0f", m / 1024}')" "$ratio"
  done
  unset wall cpu span
done
