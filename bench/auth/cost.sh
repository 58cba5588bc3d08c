#!/usr/bin/env bash
# What authentication costs end to end (issue 8): the same in-network Allreduce through one
# switch on loopback, with the job keyed (every packet sealed and checked: the default of
# inc launch and inc testbed) and unkeyed, alternated ROUNDS times in one run; prints both
# times per size and the ratio. usage: bench/auth/cost.sh [path/to/inc] [ranks] [rounds]
set -eu
inc=$(readlink -f "${1:-build/tools/inc}")
n=${2:-4}
rounds=${3:-3}
dir=$(mktemp -d)
sw=
trap '[ -z "$sw" ] || kill $sw 2>/dev/null; rm -rf "$dir"' EXIT  # (set -e: a failed kill would end the trap with status 2)
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/keys")
port=$((30000 + ($$ * 17) % 20000))
run() {  # run keyed|plain -> "size time_us" lines
  local args=() envs=()
  [ "$1" = keyed ] && args=(--key-file "$dir/keys") && envs=(INC_KEY_FILE="$dir/keys")
  "$inc" switch --bind 127.0.0.1:$port --lanes 1 --slots 64 --slot-elements 2048 --job 1:$n:64 "${args[@]}" >"$dir/sw" 2>&1 &
  sw=$!
  for ((i = 0; i < 200; ++i)); do grep -q serving "$dir/sw" && break; sleep 0.05; done
  env "${envs[@]}" INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 "$inc" launch -n $n -- \
    "$inc" bench -c allreduce -a inc -d f32 -b 64K -e 16M -f 16 -n 10 -w 2 --no-progress 2>&1 |
    awk '$1 == "[0]" && $2 == "allreduce" {print $3, $8}'
  kill $sw; wait $sw 2>/dev/null || true; sw=
}
declare -A keyed plain
for ((r = 0; r < rounds; ++r)); do
  run keyed >"$dir/k"
  run plain >"$dir/p"
  while read -r s t; do keyed[$s]+="$t "; done <"$dir/k"
  while read -r s t; do plain[$s]+="$t "; done <"$dir/p"
done
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "# %d ranks, one switch (1 lane), loopback, f32 allreduce through the switch; median of %d rounds\n" "$n" "$rounds"
printf "%10s %14s %14s %8s\n" "bytes" "unkeyed us" "keyed us" "keyed/unkeyed"
for s in $(printf "%s\n" "${!plain[@]}" | sort -n); do
  p=$(echo "${plain[$s]}" | med); k=$(echo "${keyed[$s]}" | med)
  awk -v s="$s" -v p="$p" -v k="$k" 'BEGIN {printf "%10d %14.1f %14.1f %8.2f\n", s, p, k, k / p}'
done
