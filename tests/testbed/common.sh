# Sourced by the testbed scripts (cleanup.sh, tree.sh, multicast.sh) after they set `pfx`, the
# prefix of their namespaces: `log` (a temporary file removed at exit), `fail MESSAGE` (prints
# the message and the log, exits 1), and exit 77 (ctest: skipped) where network namespaces
# cannot be created.
# `pfx` gets this run's pid (hex) appended: two checkouts' suites running at once would
# otherwise count each other's namespaces as "left behind" (or remove them: cleanup.sh).
# A base of at most 6 characters keeps it within inc testbed's 12 (pid_max 2^22: 6 hex digits).
pfx="${pfx}$(printf %x $$)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "FAIL: $*"; echo "---- output"; cat "$log"; exit 1; }

if ! ip netns add "${pfx}-probe$$" 2>/dev/null; then
  echo "SKIPPED: cannot create network namespaces here (needs root and iproute2)"
  exit 77
fi
ip netns del "${pfx}-probe$$"
