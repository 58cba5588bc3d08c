#!/usr/bin/env bash
# test_switch.py under torchrun against a Core-INC switch daemon started here (keyed job 1 of
# N members on a port the kernel picks). Nothing is timed; deadlines only bound a hang.
# usage: switch.sh path/to/inc python3 N
set -u
inc=$(readlink -f "$1") py=$2 n=$3
here=$(dirname "$(readlink -f "$0")")
dir=$(mktemp -d)
sw=
trap 'kill -9 $sw 2>/dev/null; rm -rf "$dir"' EXIT
source "$here/../../tests/scripts/wait_for.sh"
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/keys")
"$inc" switch --bind 127.0.0.1:0 --lanes 1 --job "1:$n:16" --key-file "$dir/keys" >"$dir/sw" 2>&1 &
sw=$!
wait_for "$dir/sw" "serving 127\.0\.0\.1:[1-9]" "serving line from the switch"
port=$(grep -oE "serving 127\.0\.0\.1:[0-9]+" "$dir/sw" | head -1 | cut -d: -f2)
export INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_KEY_FILE="$dir/keys"
"$py" -m torch.distributed.run --standalone --nproc-per-node="$n" \
  -m pytest -q -p no:cacheprovider "$here/test_switch.py"
