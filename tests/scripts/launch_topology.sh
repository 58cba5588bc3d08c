#!/usr/bin/env bash
# launch_topology.sh path/to/inc TOPOLOGY N -- PROGRAM [ARGS...]
# Runs `inc launch -n N --topology` on a copy of TOPOLOGY whose switches listen on ports that
# are free now (free_ports, below the kernel's ephemeral range; one port per lane, in the
# file's order) instead of the file's own, so that two checkouts running their suites at once
# do not meet on the file's fixed ports. The copy keeps the file's name (tests tell the trees
# apart by it, e.g. mp_mx's "tree4") in a private directory removed at exit.
set -u
if [ $# -lt 5 ] || [ "$4" != "--" ]; then
  echo "usage: $0 path/to/inc TOPOLOGY N -- PROGRAM [ARGS...]" >&2
  exit 2
fi
inc=$(readlink -f "$1")
topo=$2
n=$3
shift 4
[ -r "$topo" ] || { echo "FAIL: cannot read topology '$topo'" >&2; exit 2; }
source "$(dirname "$(readlink -f "$0")")/wait_for.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# With base=0 it prints how many ports the switches need (one per lane); with a base it prints
# the file with the switches' ports counted up from there.
prog='$1 == "switch" {
  k = 1; for (i = 4; i <= NF; ++i) if ($i ~ /^lanes=/) k = substr($i, 7)
  if (base) sub(/:[0-9]+$/, ":" (base + t), $3)
  t += k
}
{ if (base) print }
END { if (!base) print t + 0 }'
total=$(awk -v base=0 "$prog" "$topo")
[ "$total" -gt 0 ] || { echo "FAIL: no switch line in '$topo'" >&2; exit 2; }
base=$(free_ports "$total") || exit 1
copy="$dir/$(basename "$topo")"
awk -v base="$base" "$prog" "$topo" >"$copy"
"$inc" launch -n "$n" --topology "$copy" -- "$@"
