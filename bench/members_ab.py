#!/usr/bin/env python3
"""A/B of the switch data plane's throughput between two builds of switch_bench, alternated.

    python3 bench/members_ab.py OLD/switch_bench NEW/switch_bench [--members 4,8,16] [--rounds 5]

Runs `switch_bench dataplane --json` of each binary in turn (old, new, old, new, ...) for every
member count, so that the load of a shared machine hits both alike, and prints per member count,
type and packet size the median GB/s of contributed payload per CPU second of each and the ratio
new / old. Used for the member sets of issue 8 (docs/SWITCH.md "Member sets").
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(binary, members, elems, seconds):
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as f:
        path = f.name
    try:
        subprocess.run([binary, "dataplane", "--members", str(members), "--runs", "1", "--seconds", str(seconds),
                        "--elems", elems, "--json", path], check=True, stdout=subprocess.DEVNULL)
        rows = {}
        with open(path) as f:
            for line in f:
                line = line.strip().rstrip(",")
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if r.get("bench") == "dataplane":
                    rows[(r["type"], r["elems"])] = r["dataplane_GBps"]
        return rows
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--members", default="4,8,16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--elems", default="64,256")
    ap.add_argument("--seconds", type=float, default=0.05)
    ap.add_argument("--types", default="i32,f32,bf16", help="rows to print (the bench runs every type)")
    a = ap.parse_args()
    print(f"# switch_bench dataplane A/B, {a.rounds} alternated rounds, medians of GB/s per CPU second")
    print(f"# old: {a.old}\n# new: {a.new}")
    print(f"{'members':>7} {'type':>5} {'elems':>6} {'old':>8} {'new':>8} {'new/old':>8}")
    for m in [int(x) for x in a.members.split(",")]:
        old, new = {}, {}
        for _ in range(a.rounds):
            for binary, acc in ((a.old, old), (a.new, new)):
                for k, v in run(binary, m, a.elems, a.seconds).items():
                    acc.setdefault(k, []).append(v)
        for k in sorted(k for k in old if k[0] in a.types.split(",")):
            o, n = statistics.median(old[k]), statistics.median(new.get(k, [0]))
            print(f"{m:>7} {k[0]:>5} {k[1]:>6} {o:>8.2f} {n:>8.2f} {n / o if o else 0:>8.3f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
