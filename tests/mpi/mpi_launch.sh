# Sourced by tests/mpi/run_check.sh and bench/mpi/compare.sh.
# mpi_launch openmpi|mpich NRANKS VAR=VALUE... -- PROG ARGS: runs an MPI job under that MPI's
# launcher with these variables for the ranks (mpirun -x / mpiexec -genv), 600 s at most.
# OPENMPI_ARGS (an array, if set) adds mpirun options.
mpi_launch() {
  local flavour=$1 n=$2 envs=()
  shift 2
  while [ "$1" != "--" ]; do
    if [ "$flavour" = openmpi ]; then envs+=(-x "$1"); else envs+=(-genv "${1%%=*}" "${1#*=}"); fi
    shift
  done
  shift
  if [ "$flavour" = openmpi ]; then
    timeout 600 mpirun.openmpi --oversubscribe --allow-run-as-root --mca btl self,vader \
      ${OPENMPI_ARGS[@]+"${OPENMPI_ARGS[@]}"} -n "$n" "${envs[@]}" "$@"
  else
    timeout 600 mpiexec.mpich -n "$n" "${envs[@]}" "$@"
  fi
}
