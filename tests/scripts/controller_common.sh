# Sourced by the controller test scripts (controller.sh, controller_rebalance*.sh) with their
# arguments (path/to/inc path/to/mp_controller): absolute tool paths, a private directory and
# the PIDs to kill at exit, a fresh control key for every process the script starts, and
# `fail`, which prints the logs of the directory.
inc=$(readlink -f "$1")
mp=$(readlink -f "$2")
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf "$dir"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/wait_for.sh"
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/ctlkey")
export INC_CONTROL_KEY_FILE="$dir/ctlkey" INC_TIMEOUT=60
fail() { echo "FAIL: $*"; for f in "$dir"/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }
