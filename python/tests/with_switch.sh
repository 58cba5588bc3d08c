#!/usr/bin/env bash
# Runs COMMAND with a Core-INC switch daemon started here for it: a keyed job 1 of N members on
# a port the kernel picks, INC_SWITCH / INC_SWITCH_JOB / INC_KEY_FILE exported. The switch is
# killed when COMMAND exits; COMMAND's exit code is this script's. Nothing is timed: the
# deadline only bounds a hang of the switch's start-up.
# usage: with_switch.sh path/to/inc N COMMAND [ARGS...]
set -u
inc=$(readlink -f "$1") n=$2
shift 2
here=$(dirname "$(readlink -f "$0")")
dir=$(mktemp -d)
sw=
trap 'kill -9 $sw 2>/dev/null; wait $sw 2>/dev/null; rm -rf "$dir"' EXIT
source "$here/../../tests/scripts/wait_for.sh"
(umask 077; echo "1 $(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$dir/keys")
"$inc" switch --bind 127.0.0.1:0 --lanes 1 --job "1:$n:16" --key-file "$dir/keys" >"$dir/sw" 2>&1 &
sw=$!
wait_for "$dir/sw" "serving 127\.0\.0\.1:[1-9]" "serving line from the switch"
port=$(grep -oE "serving 127\.0\.0\.1:[0-9]+" "$dir/sw" | head -1 | cut -d: -f2)
export INC_SWITCH=127.0.0.1:$port INC_SWITCH_JOB=1 INC_KEY_FILE="$dir/keys"
"$@"
