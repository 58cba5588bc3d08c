#!/usr/bin/env python3
"""Automatic selection against the best fixed path, for every collective and size.

Measures the job's paths with `inc tune` (or takes --tuning FILE), then runs `inc bench -c all`
with `auto` and every candidate path of the tuning file (the switch and each host algorithm:
the paths `auto` weighs, as `inc tune` wrote them), interleaved per size (`--interleave`: a slow
spell of a shared machine hits every path of a size alike), in --rounds jobs. Per collective
and size it prints, from the medians over rounds of each path's median call time:
  auto chose  the path auto ran (every round's choice if they differ)
  auto us     auto's own time
  chosen us   the chosen path's time as a fixed path in the same jobs
  fastest     the fastest fixed path and its time
  regret      chosen us / fastest us: the cost of the choice; the goal is <= 1.10x
  auto/best   auto us / fastest us (contains the noise between two runs of one path)
  noise       the fastest path's slowest round / its fastest round
  verdict     ok (regret <= 1.10x); else "clear" if the chosen path was more than 1.10x slower
              than the fastest in every pair of rounds (its fastest round against the fastest
              path's slowest), "noise" if not (the rounds overlap: the run cannot tell them apart)
and checks that every auto call's Report names the chosen path and the predicted cost of every
other candidate. Exit status 0; the verdict line says whether the goal held.

  python3 bench/auto_vs_best.py --inc build/tools/inc                       # loopback, 8 ranks + switch
  python3 bench/auto_vs_best.py --inc build/tools/inc --testbed "--hosts 8 --link 1gbit"
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

GOAL = 1.10


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


def json_rows(out):
    start, end = out.find("["), out.rfind("]")
    if start < 0 or end < start:
        raise SystemExit("auto_vs_best.py: no JSON rows in inc bench's output:\n" + out[-2000:])
    return json.loads(out[start:end + 1])


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def report_ok(reason, chosen, candidates):
    """The Report of an automatic call: 'automatic from INC_TUNING=...: a 12 us, b 30 us' naming
    the chosen path first and every candidate with a predicted cost."""
    m = re.search(r"automatic from INC_TUNING=\S+ for \d+ B on \d+ ranks: (.*?)(;|$)", reason)
    if not m:
        return len(candidates) <= 1  # one path: nothing to weigh, nothing to report
    listed = re.findall(r"([a-z_]+) [\d.]+ (?:us|ms)", m.group(1))
    if "not the switch: " in reason:  # the switch could not take this call: not a candidate
        candidates = [a for a in candidates if a != "inc"]
    return bool(listed) and listed[0] == chosen and sorted(listed) == sorted(candidates)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inc", default="build/tools/inc")
    ap.add_argument("--ranks", type=int, default=8, help="loopback: ranks")
    ap.add_argument("--testbed", default="", help="run on inc testbed with these flags instead of loopback")
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="16M")
    ap.add_argument("-f", default="4")
    ap.add_argument("-n", type=int, default=10, help="calls per point")
    ap.add_argument("--rounds", type=int, default=3, help="benchmark jobs (inc tune: -r 3, more where paths are close)")
    ap.add_argument("--tuning", default=None, help="use this tuning file instead of running inc tune")
    ap.add_argument("--save", default=None, help="also write every bench row of every round (JSON) to this file")
    ap.add_argument("--load", default=None, help="no runs: analyse the rows a --save wrote")
    ap.add_argument("--timeout", type=int, default=3600)
    args = ap.parse_args()
    args.inc = os.path.abspath(args.inc)
    tuning = args.tuning
    load = os.getloadavg()[0]
    if args.load:
        with open(args.load) as f:
            saved = json.load(f)
        tuning, table, runs, load = saved.get("tuning_file", "?"), saved["tuning"], saved["rounds"], saved.get("load", 0)
        args.rounds = len(runs)
    elif not tuning:
        tuning = tempfile.mktemp(prefix="inc-tuning-", suffix=".json")
        print(f"# inc tune -b {args.b} -e {args.e} -f 2 -n {args.n} -r 3", flush=True)
        print(job(args, ["tune", "-b", args.b, "-e", args.e, "-f", "2", "-n", str(args.n), "-r", "3", "-o", tuning]),
              end="", flush=True)
    if not args.load:
        with open(tuning) as f:
            table = json.load(f)["table"]
    cands = {c: sorted(paths) for c, paths in table.items()}  # what auto weighs, per collective
    algos = sorted({a for paths in cands.values() for a in paths} | {"pairwise"})
    bench = ["bench", "-c", "all", "-a", ",".join(["auto"] + algos), "--interleave", "-b", args.b, "-e", args.e,
             "-f", args.f, "-n", str(args.n), "-w", "2", "--format", "json", "--no-progress"]
    fixed, auto, chosen, bad_reports = {}, {}, {}, []
    if not args.load:
        runs = []
        for rnd in range(args.rounds):
            print(f"# round {rnd + 1}/{args.rounds}: inc {' '.join(bench)}", flush=True)
            runs.append(json_rows(job(args, bench, {"INC_TUNING": tuning})))
        load = max(load, os.getloadavg()[0])
    for rows in runs:
        for r in rows:
            if r["count"] == 0:
                continue  # nothing to move (nccl-tests' size below one element per rank)
            if r["correct"] == 0:
                raise SystemExit(f"auto_vs_best.py: WRONG result: {r}")
            key = (r["collective"], r["size_bytes"])
            if r["requested"] == "auto":
                auto.setdefault(key, []).append(r["median_us"])
                chosen.setdefault(key, []).append(r["algo"])
                if not report_ok(r["reason"], r["algo"], cands.get(r["collective"], [r["algo"]])):
                    bad_reports.append((key, r["reason"]))
            elif r["requested"] != "inc" or r["in_network"]:  # not 'inc' falling back to the hosts
                fixed.setdefault(key + (r["requested"],), []).append(r["median_us"])
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"tuning_file": tuning, "tuning": table, "rounds": runs, "load": load}, f)
    print(f"# {'collective':<15} {'size':>9}  {'auto chose':<26} {'auto us':>9} {'chosen us':>9}  "
          f"{'fastest':<19} {'fastest us':>10} {'regret':>7} {'auto/best':>9} {'noise':>6}  verdict")
    worst = (0, None)
    worst_ratio = 0
    misses, clear = [], []
    for (coll, size), times in sorted(auto.items()):
        runs = {a: v for (c, s, a), v in fixed.items() if c == coll and s == size}
        if not runs:
            continue
        paths = {a: median(v) for a, v in runs.items()}
        best = min(paths, key=paths.get)
        picks = chosen[(coll, size)]
        # The cost of the choice: the chosen path's time in the same jobs (every round's pick).
        regret = max(paths.get(p, float("nan")) for p in set(picks)) / paths[best]
        ratio = median(times) / paths[best]
        noise = max(runs[best]) / min(runs[best])
        pick = picks[0] if len(set(picks)) == 1 else "/".join(picks)
        if regret > worst[0]:
            worst = (regret, f"{coll} {size} B")
        worst_ratio = max(worst_ratio, ratio)
        verdict = "ok"
        if not regret <= GOAL:
            misses.append(f"{coll} {size} B")
            verdict = "noise"
            if all(p in runs and min(runs[p]) > GOAL * max(runs[best]) for p in set(picks)):
                verdict = "clear"
                clear.append(f"{coll} {size} B")
        print(f"  {coll:<15} {size:>9}  {pick:<26} {median(times):>9.1f} {paths.get(picks[0], float('nan')):>9.1f}  "
              f"{best:<19} {paths[best]:>10.1f} {regret:>6.2f}x {ratio:>8.2f}x {noise:>5.2f}x  {verdict}", flush=True)
    for key, reason in bad_reports:
        print(f"# REPORT does not name the choice and every candidate's prediction: {key}: {reason}")
    print(f"# worst regret {worst[0]:.2f}x ({worst[1]}), worst auto/best {worst_ratio:.2f}x; "
          f"medians of {args.rounds} rounds x {args.n} calls; tuning file {tuning}; load average up to {load:.1f} "
          f"on {os.cpu_count()} cores")
    print(f"# goal (regret <= {GOAL:.2f}x at every collective and size): "
          + ("met" if not misses else f"MISSED at {len(misses)} ({len(clear)} beyond the run's noise: "
                                      f"{', '.join(clear) or 'none'}): {', '.join(misses)}")
          + f"; reports: {'all name the choice and every candidate' if not bad_reports else f'{len(bad_reports)} BAD'}")


if __name__ == "__main__":
    main()
