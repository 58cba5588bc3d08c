#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job:
#  1. a local INC job of 8 ranks and a software switch on loopback: every collective through
#     the switch, with each host algorithm and with the automatic choice (tuned by measuring
#     every path first), every result verified;
#  2. where network namespaces can be created (root), the paper's claim live: ring against
#     Core-INC on an emulated 8-host cluster with shaped 1 Gb/s links (inc testbed), beside the
#     model's and the simulator's predictions for the same topology, with plots.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target inc_tool
echo "== 1. loopback: 8 ranks and a switch on this machine"
build/tools/inc demo "$@"
echo
echo "== 2. the claim on an emulated cluster: 8 hosts, 1 Gb/s links shaped both ways, one switch"
probe="incmain$$"
if ! ip netns add "$probe" 2>/dev/null; then
  echo "skipped: network namespaces cannot be created here (needs root or CAP_NET_ADMIN and iproute2);"
  echo "the loopback job above ran alone. On a machine where they can: python3 bench/testbed/claim.py"
  exit 0
fi
ip netns del "$probe"
python3 bench/testbed/claim.py --inc build/tools/inc --hosts 8 --rates 1 --sizes 1M,4M,16M \
  --iters 5 -o build/claim
