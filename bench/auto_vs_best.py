#!/usr/bin/env python3
"""Automatic selection against the best fixed path, for every collective and size.

Measures the job's paths with `inc tune`, then runs `inc bench -c all` with `auto` and with
every fixed path (the switch and each host algorithm), interleaved over several rounds, and
prints per collective and size: what auto chose, the fastest fixed path, and
  regret = median time of the path auto chose / median time of the fastest path,
  auto/best = median time of the auto runs / median time of the fastest path
(the second also contains the run-to-run noise of a shared machine).

  python3 bench/auto_vs_best.py --inc build/tools/inc                       # loopback, 8 ranks + switch
  python3 bench/auto_vs_best.py --inc build/tools/inc --testbed "--hosts 8 --link 1gbit"
"""
import argparse
import csv
import io
import os
import shlex
import subprocess
import sys
import tempfile

ALGOS = {
    "allreduce": ["inc", "ring", "recursive_doubling", "rabenseifner"],
    "reduce_scatter": ["inc", "ring"],
    "allgather": ["inc", "ring", "recursive_doubling"],
    "broadcast": ["inc", "binomial_tree", "pipelined_chain"],
}


def job(args, prog, env=None):
    if args.testbed:
        cmd = [args.inc, "testbed", "-q", "--no-counters", "--no-prefix"] + shlex.split(args.testbed) + ["--", "inc"] + prog
    else:
        cmd = [args.inc, "launch", "-n", str(args.ranks), "--switch", "--no-prefix", "--", args.inc] + prog
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=args.timeout)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"auto_vs_best.py: failed (exit {p.returncode}): {' '.join(cmd)}")
    return p.stdout


def rows(out):
    lines = [l for l in out.splitlines() if l.startswith("collective,") or l.count(",") == 11]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inc", default="build/tools/inc")
    ap.add_argument("--ranks", type=int, default=8, help="loopback: ranks")
    ap.add_argument("--testbed", default="", help="run on inc testbed with these flags instead of loopback")
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="16M")
    ap.add_argument("-f", default="4")
    ap.add_argument("-n", type=int, default=10, help="calls per point")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tuning", default=None, help="use this tuning file instead of running inc tune")
    ap.add_argument("--timeout", type=int, default=3600)
    args = ap.parse_args()
    args.inc = os.path.abspath(args.inc)
    tuning = args.tuning
    if not tuning:
        tuning = tempfile.mktemp(prefix="inc-tuning-", suffix=".json")
        print(f"# inc tune -b {args.b} -e {args.e} -f 2 ...", flush=True)
        job(args, ["tune", "-b", args.b, "-e", args.e, "-f", "2", "-n", str(args.n), "-r", "3", "-o", tuning])
    sweep = ["-b", args.b, "-e", args.e, "-f", args.f, "-n", str(args.n), "-w", "2", "--format", "csv", "--no-progress"]
    fixed, auto, chosen = {}, {}, {}
    for rnd in range(args.rounds):
        print(f"# round {rnd + 1}/{args.rounds}", flush=True)
        for coll, algos in ALGOS.items():
            out = job(args, ["bench", "-c", coll, "-a", ",".join(algos)] + sweep, {"INC_TUNING": tuning})
            for r in rows(out):
                if r["count"] == "0":
                    continue  # nothing to move (nccl-tests' size below one element per rank)
                fixed.setdefault((coll, int(r["size_bytes"]), r["algo"]), []).append(float(r["time_us"]))
            out = job(args, ["bench", "-c", coll, "-a", "auto"] + sweep, {"INC_TUNING": tuning})
            for r in rows(out):
                if r["count"] == "0":
                    continue
                key = (coll, int(r["size_bytes"]))
                auto.setdefault(key, []).append(float(r["time_us"]))
                chosen.setdefault(key, []).append(r["algo"])
    print(f"# {'collective':<15} {'size':>9}  {'auto chose':<20} {'fastest fixed':<20} {'regret':>7} {'auto/best':>9}")
    worst_regret = worst_ratio = 0
    for (coll, size), times in sorted(auto.items()):
        paths = {a: median(v) for (c, s, a), v in fixed.items() if c == coll and s == size}
        if not paths:
            continue
        best = min(paths, key=paths.get)
        pick = max(set(chosen[(coll, size)]), key=chosen[(coll, size)].count)
        regret = paths.get(pick, float("nan")) / paths[best]
        ratio = median(times) / paths[best]
        worst_regret = max(worst_regret, regret)
        worst_ratio = max(worst_ratio, ratio)
        print(f"  {coll:<15} {size:>9}  {pick:<20} {best + ' ' + format(paths[best], '.0f') + 'us':<20} "
              f"{regret:>6.2f}x {ratio:>8.2f}x", flush=True)
    print(f"# worst regret {worst_regret:.2f}x, worst auto/best {worst_ratio:.2f}x "
          f"(medians of {args.rounds} rounds x {args.n} calls; tuning file {tuning})")


if __name__ == "__main__":
    main()
