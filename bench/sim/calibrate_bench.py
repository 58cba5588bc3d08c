#!/usr/bin/env python3
"""Calibrate the analytical model's alpha and beta from `inc bench` and print its predictions
beside the measured times (docs/MODEL.md, "Validation against our runtime").

Input: CSV written by `inc bench --csv FILE` with the columns
  collective,size_bytes,count,dtype,op,algo,in_network,ranks,time_us,algbw_GBps,busbw_GBps,correct
(older files without in_network/ranks need --ranks). Or --run BUILD_DIR runs the benchmark on
loopback first:  inc launch -n N -- inc bench -c allreduce -a ring,recursive_doubling,... --csv

The counts (message rounds on the critical path, bytes sent per rank, bytes handed to switch
trees) come from the real schedules through `inc model cost --from-schedules --json`, so the fit
uses the same schedules the runtime executed. alpha and beta are fitted by least squares on the
host algorithms (T = alpha x rounds + beta x bytes); Core-INC rows are predicted with the same
alpha/beta plus the tree pass (reported, not fitted).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile


def run_bench(build, ranks, colls, algos, lo, hi):
    inc = os.path.join(build, "tools", "inc")
    out = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    cmd = [inc, "launch", "-n", str(ranks), "--no-prefix", "--", inc, "bench", "-c", colls, "-a", algos,
           "-b", lo, "-e", hi, "-f", "4", "-n", "10", "-w", "3", "--no-progress", "--csv", out]
    print("running:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def counts(inc, coll, algo, ranks, size, cache={}):
    key = (coll, algo, ranks, size)
    if key not in cache:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            subprocess.run([inc, "model", "cost", "-c", coll, "-a", algo, "-n", str(ranks), "-b", str(size),
                            "--from-schedules", "--json", f.name], check=True, stdout=subprocess.DEVNULL)
            rows = json.load(open(f.name))
        cache[key] = rows[0] if rows else None
    return cache[key]


def fit(points):
    # Least squares of the relative error (T = a x r + b x s, each row divided by its measured
    # time, so small sizes weigh as much as large ones), a, b >= 0.
    points = [(r / t, s / t, 1.0) for r, s, t in points if t > 0]
    srr = sum(r * r for r, s, t in points)
    sss = sum(s * s for r, s, t in points)
    srs = sum(r * s for r, s, t in points)
    srt = sum(r * t for r, s, t in points)
    sst = sum(s * t for r, s, t in points)
    det = srr * sss - srs * srs
    if det > 0:
        a = (srt * sss - sst * srs) / det
        b = (sst * srr - srt * srs) / det
        if a >= 0 and b >= 0:
            return a, b
    a = max(0.0, srt / srr) if srr else 0.0
    b = max(0.0, sst / sss) if sss else 0.0
    # Pick the better of the two one-parameter fits.
    ea = sum((a * r - t) ** 2 for r, s, t in points)
    eb = sum((b * s - t) ** 2 for r, s, t in points)
    return (a, 0.0) if ea < eb else (0.0, b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="*", help="inc bench CSV files")
    ap.add_argument("--run", metavar="BUILD_DIR", help="run inc bench on loopback first")
    ap.add_argument("--inc", help="path of the inc binary (default: BUILD_DIR/tools/inc or inc in PATH)")
    ap.add_argument("-n", "--ranks", type=int, default=4, help="ranks (for --run, or CSVs without a ranks column)")
    ap.add_argument("--colls", default="allreduce")
    ap.add_argument("--algos", default="ring,recursive_doubling,rabenseifner,inc")
    ap.add_argument("--min-bytes", default="4K")
    ap.add_argument("--max-bytes", default="16M")
    args = ap.parse_args()
    inc = args.inc or (os.path.join(args.run, "tools", "inc") if args.run else "inc")
    files = list(args.csv)
    if args.run:
        files.append(run_bench(args.run, args.ranks, args.colls, args.algos, args.min_bytes, args.max_bytes))
    if not files:
        ap.error("give inc bench CSV files or --run BUILD_DIR")
    rows = []
    for fn in files:
        with open(fn) as f:
            for r in csv.DictReader(f):
                if r.get("correct", "1") not in ("1", "true", "yes", "ok"):
                    continue
                coll = r.get("collective") or args.colls.split(",")[0]
                ranks = int(r.get("ranks") or args.ranks)
                size = int(r["size_bytes"])
                if size <= 0:
                    continue
                c = counts(inc, coll, r["algo"], ranks, size)
                if not c:
                    continue
                rows.append(dict(coll=coll, algo=r["algo"], ranks=ranks, size=size,
                                 t=float(r["time_us"]) * 1e-6, c=c))
    host = [(x["c"]["rounds"], x["c"]["bytes_sent"], x["t"]) for x in rows if x["c"]["inc_bytes"] == 0]
    if len(host) < 2:
        sys.exit("need at least two host-algorithm rows to fit alpha and beta")
    a, b = fit(host)
    print(f"fitted on {len(host)} host-algorithm rows: alpha = {a*1e6:.2f} us per round, "
          f"beta = {b*1e9:.4f} ns/byte ({(1/b/1e9 if b else float('inf')):.2f} GB/s)")
    print(f"{'collective':<12} {'algorithm':<20} {'ranks':>5} {'bytes':>10} {'measured':>12} {'model':>12} {'model/meas':>10}")
    for x in rows:
        c = x["c"]
        pred = a * (c["rounds"] - (1 if c["inc_bytes"] else 0)) + b * max(c["bytes_sent"], c["inc_bytes"])
        if c["inc_bytes"]:
            pred += a  # one tree pass: one round of per-message cost
        print(f"{x['coll']:<12} {x['algo']:<20} {x['ranks']:>5} {x['size']:>10} {x['t']*1e6:>10.1f}us "
              f"{pred*1e6:>10.1f}us {pred/x['t']:>10.3f}")
    print("\nRun `inc model cost` with --overhead-us/--link-gbps set from these values for predictions at scale.")


if __name__ == "__main__":
    main()
