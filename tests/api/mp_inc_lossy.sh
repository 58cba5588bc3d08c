#!/usr/bin/env bash
# mp_inc under seeded faults in both directions: every worker loses, duplicates and reorders
# the datagrams it sends to the switch (INC_FAULT_*), and the switch those it sends to the
# workers (--fault-*). Results must stay exact (mp_inc checks every one), and the faults must
# have happened and been repaired:
#   - every member reports what its injector did (printed when it leaves the switch): losses,
#     duplicates and reorderings > 0;
#   - the switch reports the same for its own datagrams (its --stats at exit);
#   - the switch saw retransmitted data from the members and resent results to them (each
#     direction's losses were recovered), and mp_inc checks each rank's report counted
#     retransmissions.
# usage: mp_inc_lossy.sh path/to/inc path/to/mp_inc
set -uo pipefail
inc=$1
prog=$2
ranks=5
log=$(mktemp)
trap 'rm -f "$log"' EXIT

INC_FAULT_LOSS=0.05 INC_FAULT_DUP=0.02 INC_FAULT_REORDER=0.05 INC_FAULT_SEED=7 \
  "$inc" launch -n $ranks --switch \
  --switch-args='--stats --fault-loss 0.05 --fault-dup 0.02 --fault-reorder 0.05 --fault-seed 7' \
  -- "$prog" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc"; exit 1; }

python3 - "$log" "$ranks" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
ranks = int(sys.argv[2])
fail = []
members = {}
for m in re.finditer(r"inc: member (\d+) of job \d+: faults injected into the datagrams sent to the "
                     r"switch: lost (\d+), duplicated (\d+), reordered (\d+)", text):
    members[int(m.group(1))] = tuple(int(x) for x in m.groups()[1:])
for r in range(ranks):
    t = members.get(r)
    if t is None:
        fail.append(f"member {r} reported no injected faults (INC_FAULT_* not applied?)")
    elif min(t) == 0:
        fail.append(f"member {r}: lost/duplicated/reordered {t}: some fault never happened")
sw = re.search(r"faults injected into the datagrams it sent: lost (\d+), duplicated (\d+), reordered (\d+)", text)
if not sw:
    fail.append("the switch reported no injected faults (--fault-* not applied?)")
elif min(int(x) for x in sw.groups()) == 0:
    fail.append(f"switch: lost/duplicated/reordered {sw.groups()}: some fault never happened")
st = re.search(r"switch \S+: packets in \d+ .*?retransmissions (\d+), duplicates (\d+), results resent (\d+)", text)
if not st:
    fail.append("no counters from the switch (--stats)")
else:
    retx, dups, resent = (int(x) for x in st.groups())
    if retx == 0:
        fail.append("the switch saw no retransmitted data: no member->switch loss was repaired")
    if resent == 0:
        fail.append("the switch resent no result: no switch->member loss was repaired")
    if dups == 0:
        fail.append("the switch saw no duplicate: duplication never reached it")
for f in fail:
    print("FAIL:", f)
if fail:
    sys.exit(1)
print(f"faults injected and repaired: members (lost, dup, reordered) {members}; switch {sw.groups()}; "
      f"switch saw {retx} retransmissions, {dups} duplicates, resent {resent} results")
PY
