#!/usr/bin/env bash
# MPI_Allreduce latency and bandwidth under mpirun: the MPI alone, the same binary with the PMPI
# library (INC on the hosts), and with the library and a Core-INC switch; one table with the
# ratios to the MPI alone (> 1: slower than MPI). Runs in one script, same machine, same sizes.
# A last column: INC itself (`inc bench` under `inc launch`, same sizes), so that what the
# library adds to INC shows apart from what INC costs against MPI on one machine.
# usage: bench/mpi/compare.sh BUILD_DIR [openmpi|mpich] [NRANKS] [MIN_BYTES MAX_BYTES]
set -eu
build=$(readlink -f "${1:-build}") flavour=${2:-openmpi} n=${3:-4} lo=${4:-8} hi=${5:-4194304}
prog=$build/bench/mpi/mpi_allreduce_bench_$flavour lib=$build/src/mpi/libinc_mpi_$flavour.so inc=$build/tools/inc
dir=$(mktemp -d)
sw=
trap 'kill $sw 2>/dev/null; rm -rf "$dir"' EXIT
source "$(dirname "$(readlink -f "$0")")/../../tests/mpi/mpi_launch.sh"
# Ranks not bound to cores, in every run: `inc launch` does not bind, and on this shared
# machine OpenMPI's default binding to a core made the INC runs 3-5x slower for small messages
# (a bound rank cannot move off a busy core), which would be placement, not library, cost.
OPENMPI_ARGS=(--bind-to none)
launch() {  # OUT VAR=VALUE... : runs the benchmark with these variables, its table in OUT
  local out=$1
  shift
  mpi_launch "$flavour" "$n" "$@" -- "$prog" "$lo" "$hi" >"$out"
}
launch "$dir/mpi"
launch "$dir/inc" LD_PRELOAD="$lib" INC_MPI_SUMMARY=1 2>"$dir/inc.err"
grep -q "calls on INC" "$dir/inc.err" || { cat "$dir/inc.err"; echo "no summary from the library"; exit 1; }
port=$((30000 + ($$ * 13 + RANDOM) % 20000))
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/keys")
"$inc" switch --bind 127.0.0.1:$port --lanes 1 --job 1:$n:16 --key-file "$dir/keys" >"$dir/sw" 2>&1 &
sw=$!
for ((i = 0; i < 600; ++i)); do grep -q "serving" "$dir/sw" 2>/dev/null && break; sleep 0.1; done
launch "$dir/sw_run" LD_PRELOAD="$lib" INC_MPI_SUMMARY=1 INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 \
  INC_KEY_FILE="$dir/keys" 2>"$dir/sw.err"
"$inc" launch -n "$n" -- "$inc" bench -c allreduce -d f32 -o sum -b "$lo" -e "$hi" -f 4 --check 0 --no-progress >"$dir/raw" 2>&1
grep -E "^\[0\] +allreduce " "$dir/raw" | awk '{ print $3, $8 }' >"$dir/inc_bench"
[ -s "$dir/inc_bench" ] || { cat "$dir/raw"; echo "no rows from inc bench"; exit 1; }
net=$(grep -oE "MPI_Allreduce +[0-9]+ +\(in network [0-9]+" "$dir/sw.err" | grep -oE "[0-9]+$" || echo 0)
echo "MPI_Allreduce f32 sum, $n ranks, $flavour (median of 7; time per call; ratio = time / MPI's)"
printf "%10s %12s %12s %8s %14s %8s %14s\n" bytes "MPI us" "+INC us" ratio "+INC+switch us" ratio "inc bench us"
paste "$dir/mpi" "$dir/inc" "$dir/sw_run" | awk 'NR > 1' | paste -d' ' - "$dir/inc_bench" | awk '{
  printf "%10d %12.2f %12.2f %8.2f %14.2f %8.2f %14.2f\n", $1, $2, $5, $5 / $2, $8, $8 / $2, $11 }'
printf "%10s %12s %12s %8s %14s %8s\n" bytes "MPI GB/s" "+INC GB/s" "" "+INC+sw GB/s" ""
paste "$dir/mpi" "$dir/inc" "$dir/sw_run" | awk 'NR > 1 { printf "%10d %12.3f %12.3f %8s %14.3f\n", $1, $3, $6, "", $9 }'
echo "with the switch: $net MPI_Allreduce calls of rank 0 ran in the network (library summary)"
