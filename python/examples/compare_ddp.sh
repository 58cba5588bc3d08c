#!/usr/bin/env bash
# ddp_digits.py with gloo, inc on the hosts and inc through a Core-INC switch, one after the
# other on this machine, then a table: loss curves against gloo's, iteration times (median;
# ratio to gloo measured in the same script) and bytes per iteration.
# usage: compare_ddp.sh [BUILD_DIR] [RANKS] [extra ddp_digits.py args...]   (default: build 4)
# With TESTBED="--link 1gbit" (any `inc testbed` flags; root), every run is on an emulated
# cluster of RANKS hosts instead (docs/TESTBED.md): gloo over the hosts' eth0, inc with
# INC_ALGO=ring on the hosts, and inc through the testbed's switch.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
build=$(readlink -f "${1:-$here/../../build}")
n=${2:-4}
shift $(($# > 2 ? 2 : $#))
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {  # label, backend, [command prefix...]
  local label=$1 backend=$2
  shift 2
  "$@" python3 -m torch.distributed.run --standalone --nproc-per-node="$n" "$here/ddp_digits.py" \
    --backend "$backend" --label "$label" --json "$out" "${extra[@]}" 2>&1 | grep -vE "^W[0-9]{4}|^\*+$|OMP_NUM_THREADS"
}
run_testbed() {  # label, backend, [variables...]
  local label=$1 backend=$2
  shift 2
  # shellcheck disable=SC2086
  "$build/tools/inc" testbed --hosts "$n" $TESTBED -- env OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=eth0 "$@" \
    python3 "$here/ddp_digits.py" --backend "$backend" --label "$label" --json "$out" "${extra[@]}" 2>&1 |
    grep -E "iterations|loss:|testbed:|error|Error"
}
extra=("$@")
if [[ -n ${TESTBED:-} ]]; then
  run_testbed gloo gloo
  run_testbed "inc ring" inc INC_ALGO=ring
  run_testbed "inc+switch" inc
else
  run gloo gloo
  run inc inc
  run "inc+switch" inc bash "$here/../tests/with_switch.sh" "$build/tools/inc" "$n"
fi
python3 - "$out" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
gloo = next(r for r in runs if r["backend"] == "gloo")
print()
print(f"{'run':<11} {'ranks':>5} {'iters':>5} {'first loss':>10} {'last loss':>9} {'max |dloss| vs gloo':>19} "
      f"{'test acc':>8} {'median ms/iter':>14} {'x gloo':>6} {'grad bytes':>10} {'INC bytes sent/iter/rank':>24} {'in-network colls':>16}")
for r in runs:
    d = max(abs(a - b) for a, b in zip(r["losses"], gloo["losses"]))
    print(f"{r['label']:<11} {r['world']:>5} {r['iterations']:>5} {r['losses'][0]:>10.4f} {r['losses'][-1]:>9.4f} {d:>19.2e} "
          f"{r['accuracy']:>8.3f} {r['median_iter_ms']:>14.2f} {r['median_iter_ms'] / gloo['median_iter_ms']:>6.2f} "
          f"{r['gradient_bytes']:>10} {r.get('inc_bytes_sent_per_iter', float('nan')):>24.0f} "
          f"{str(r.get('inc_in_network', '-')) + '/' + str(r.get('inc_collectives', '-')):>16}")
PY
