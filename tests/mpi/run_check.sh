#!/usr/bin/env bash
# Runs an MPI program with and without the PMPI library (libinc_mpi_<mpi>.so, LD_PRELOAD) and
# compares: both must pass their own checks and print the same digest of every result; with the
# library, the summary (INC_MPI_SUMMARY=1) must show each intercepted call on INC and the
# reasons for those that passed to MPI.
# usage: run_check.sh openmpi|mpich LIB NRANKS MODE PROG [ARGS...]
#   MODE plain:    the comparison above
#   MODE switch:   also through a Core-INC switch (INC=path to the inc tool): collectives must
#                  have run in the network
#   MODE mismatch: only with the library: the program's error handler reports INC's error
#   MODE off:      INC_MPI=0 passes every call (same digest, nothing on INC); a bad
#                  INC_MPI_SUMMARY stops every rank at MPI_Init naming it
#   MODE sample:   a program that is not mpi_check (e.g. a sample): same output with and
#                  without, and some calls on INC
set -u
flavour=$1 lib=$(readlink -f "$2") n=$3 mode=$4 prog=$5
shift 5
dir=$(mktemp -d)
sw=
trap 'kill $sw 2>/dev/null; rm -rf "$dir"' EXIT
export INC_TIMEOUT=${INC_TIMEOUT:-60}
source "$(dirname "$(readlink -f "$0")")/mpi_launch.sh"
# OpenMPI with copy-in/copy-out for large messages: the sender must progress them, as over a
# network (with single-copy the receiver pulls alone, and a rank that never drives MPI while
# inside an INC call goes unnoticed).
OPENMPI_ARGS=(--mca btl_vader_single_copy_mechanism none)
launch() {  # OUT VAR=VALUE... -- PROG ARGS: the job's output in OUT, its status returned
  local out=$1
  shift
  mpi_launch "$flavour" "$n" "$@" >"$out" 2>&1
}
fail() { echo "FAIL: $*"; exit 1; }

if [ "$mode" = mismatch ]; then
  launch "$dir/with" LD_PRELOAD="$lib" -- "$prog" mismatch "$@" || { cat "$dir/with"; fail "mismatch run exited non-zero"; }
  cat "$dir/with"
  [ "$(grep -c "rc=1 handler=1 msg=MPI_Allreduce on INC: " "$dir/with")" -eq "$n" ] ||
    fail "not every rank's error handler got INC's error"
  grep -q "msg=.*3 x i32.*4 x i32\|msg=.*4 x i32.*3 x i32" "$dir/with" || fail "no error names both counts"
  exit 0
fi

launch "$dir/plain" -- "$prog" "$@" || { cat "$dir/plain"; fail "$prog without the library exited non-zero"; }
if [ "$mode" = off ]; then
  launch "$dir/bad" LD_PRELOAD="$lib" INC_MPI_SUMMARY=yes -- "$prog" "$@" && { cat "$dir/bad"; fail "a bad INC_MPI_SUMMARY was accepted"; }
  [ "$(grep -c "inc_mpi: INC_MPI_SUMMARY='yes' must be 0, 1 or all" "$dir/bad")" -ge 1 ] ||
    { cat "$dir/bad"; fail "a bad INC_MPI_SUMMARY is not named"; }
  launch "$dir/with" LD_PRELOAD="$lib" INC_MPI=0 INC_MPI_SUMMARY=1 -- "$prog" "$@" ||
    { cat "$dir/with"; fail "INC_MPI=0 run exited non-zero"; }
  grep -q "INC inactive: INC_MPI=0" "$dir/with" || { cat "$dir/with"; fail "no summary saying INC_MPI=0"; }
  grep -qE "inc_mpi: rank 0: 0 calls on INC \(0 in network\), [1-9][0-9]* passed to MPI" "$dir/with" ||
    { cat "$dir/with"; fail "calls ran on INC with INC_MPI=0"; }
  plain=$(grep -o "digest [0-9a-f]*" "$dir/plain") with=$(grep -o "digest [0-9a-f]*" "$dir/with")
  [ -n "$plain" ] && [ "$plain" = "$with" ] || fail "results differ: '$plain' and '$with'"
  echo "OK: INC_MPI=0 passes every call, a bad INC_MPI_SUMMARY is named"
  exit 0
fi
extra=()
if [ "$mode" = switch ]; then
  source "$(dirname "$(readlink -f "$0")")/../scripts/wait_for.sh"
  port=$(free_ports 1) || fail "no free port"
  (umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/keys")
  "$INC" switch --bind 127.0.0.1:$port --lanes 1 --job 1:$n:16 --key-file "$dir/keys" >"$dir/sw" 2>&1 &
  sw=$!
  wait_for "$dir/sw" "serving 127\.0\.0\.1:$port" "serving line from the switch"
  extra=(INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_KEY_FILE="$dir/keys")
fi
launch "$dir/with" LD_PRELOAD="$lib" INC_MPI_SUMMARY=1 "${extra[@]}" -- "$prog" "$@" ||
  { cat "$dir/with"; fail "$prog with the library exited non-zero"; }
cat "$dir/with"
grep -q "inc_mpi: summary of rank 0 of $n .*: INC active" "$dir/with" || fail "no summary saying INC is active"
if [ "$mode" = sample ]; then
  # The program's own output (the library's summary aside) is the same with and without.
  diff <(grep -v "^inc_mpi" "$dir/plain" | sort) <(grep -v "^inc_mpi" "$dir/with" | sort) ||
    fail "$prog printed something else with the library"
  grep -qE "inc_mpi: rank 0: [1-9][0-9]* calls on INC" "$dir/with" || fail "no call ran on INC"
  exit 0
fi
plain=$(grep -o "digest [0-9a-f]*" "$dir/plain") with=$(grep -o "digest [0-9a-f]*" "$dir/with")
[ -n "$plain" ] && [ "$plain" = "$with" ] || fail "results differ: without the library '$plain', with it '$with'"
for call in Allreduce Iallreduce Reduce_scatter Ireduce_scatter Reduce_scatter_block Ireduce_scatter_block \
    Allgather Iallgather Bcast Ibcast Alltoall Ialltoall Barrier Ibarrier; do
  grep -qE "on INC +MPI_$call +[1-9]" "$dir/with" || fail "MPI_$call never ran on INC"
done
for why in "op MPI_BAND" "datatype MPI_2INT" "derived datatype" "intercommunicator" " user-defined op" \
    "non-commutative user-defined op" "unequal recvcounts" "datatype MPI_LONG_DOUBLE" "datatype MPI_C_BOOL" \
    "communicator without an INC twin"; do
  grep -qE "passed +MPI_[A-Za-z_]+ +[1-9][0-9]* +.*$why" "$dir/with" || fail "nothing passed to MPI for '$why'"
done
if [ "$mode" = switch ]; then
  for call in Allreduce Iallreduce Allgather Bcast Barrier; do
    grep -qE "on INC +MPI_$call +[0-9]+ +\(in network [1-9]" "$dir/with" || fail "MPI_$call never ran in the network"
  done
fi
echo "OK: same results with and without the library ($with)"
