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
host algorithms (T = alpha x rounds + beta x bytes + gamma x bytes reduced); Core-INC rows are predicted with the same
alpha/beta plus the tree pass (reported, not fitted).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile


def run_bench(build, ranks, colls, algos, lo, hi, switch):
    inc = os.path.join(build, "tools", "inc")
    out = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    launch = [inc, "launch", "-n", str(ranks), "--no-prefix"] + (["--switch"] if switch else [])
    cmd = launch + ["--", inc, "bench", "-c", colls, "-a", algos,
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


def lstsq(rows, ys):
    """Least squares by normal equations and Gaussian elimination (no numpy on the machine)."""
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] + [sum(r[i] * y for r, y in zip(rows, ys))]
         for i in range(k)]
    for c in range(k):
        piv = max(range(c, k), key=lambda r: abs(a[r][c]))
        if abs(a[piv][c]) < 1e-300:
            return None
        a[c], a[piv] = a[piv], a[c]
        for r in range(k):
            if r != c:
                f = a[r][c] / a[c][c]
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return [a[i][k] / a[i][i] for i in range(k)]


def fit(points):
    """T = alpha x rounds + beta x bytes sent + gamma x bytes reduced, all >= 0, minimising the
    relative error (each row divided by its measured time, so small sizes weigh as much as large
    ones). Terms that come out negative are dropped and the rest refitted."""
    active = [0, 1, 2]
    while active:
        rows = [[(r, s, g)[i] / t for i in active] for r, s, g, t in points if t > 0]
        sol = lstsq(rows, [1.0] * len(rows))
        if sol is not None and all(x >= 0 for x in sol):
            out = [0.0, 0.0, 0.0]
            for i, x in zip(active, sol):
                out[i] = x
            return out
        if sol is None:
            active.pop()
        else:
            active.pop(min(range(len(sol)), key=lambda j: sol[j]))
    return [0.0, 0.0, 0.0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="*", help="inc bench CSV files")
    ap.add_argument("--run", metavar="BUILD_DIR", help="run inc bench on loopback first")
    ap.add_argument("--inc", help="path of the inc binary (default: BUILD_DIR/tools/inc or inc in PATH)")
    ap.add_argument("-n", "--ranks", type=int, default=4, help="ranks (for --run, or CSVs without a ranks column)")
    ap.add_argument("--colls", default="allreduce")
    ap.add_argument("--algos", default="ring,recursive_doubling,rabenseifner",
                    help="host algorithms to fit on; --switch adds the in-network one")
    ap.add_argument("--switch", action="store_true",
                    help="with --run: start a Core-INC switch (inc launch --switch) and also measure 'inc'")
    ap.add_argument("--min-bytes", default="4K")
    ap.add_argument("--max-bytes", default="16M")
    args = ap.parse_args()
    inc = args.inc or (os.path.join(args.run, "tools", "inc") if args.run else "inc")
    files = list(args.csv)
    if args.run:
        algos = args.algos + (",inc" if args.switch and "inc" not in args.algos.split(",") else "")
        files.append(run_bench(args.run, args.ranks, args.colls, algos, args.min_bytes, args.max_bytes,
                               args.switch))
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
    host = [(x["c"]["rounds"], x["c"]["bytes_sent"], x["c"]["bytes_reduced"], x["t"]) for x in rows
            if x["c"]["inc_bytes"] == 0]
    if len(host) < 3:
        sys.exit("need at least three host-algorithm rows to fit alpha, beta and gamma")
    a, b, g = fit(host)
    print(f"fitted on {len(host)} host-algorithm rows: alpha = {a*1e6:.2f} us per round, "
          f"beta = {b*1e9:.4f} ns/byte ({(1/b/1e9 if b else float('inf')):.2f} GB/s), "
          f"gamma = {g*1e9:.4f} ns/byte reduced ({(1/g/1e9 if g else float('inf')):.2f} GB/s)")
    # The in-network path has its own cost: the software switch, one more process on the same
    # cores, is what limits it here, not the link. Fit T = alpha_sw + beta_sw x bytes on its rows.
    inc_rows = [(1.0, x["c"]["inc_bytes"], 0.0, x["t"]) for x in rows if x["c"]["inc_bytes"]]
    a_sw = b_sw = None
    if len(inc_rows) >= 2:
        a_sw, b_sw, _ = fit(inc_rows)
        print(f"fitted on {len(inc_rows)} in-network rows: alpha_sw = {a_sw*1e6:.2f} us per collective, "
              f"beta_sw = {b_sw*1e9:.4f} ns/byte ({(1/b_sw/1e9 if b_sw else float('inf')):.2f} GB/s "
              f"through the software switch)")
    print(f"{'collective':<12} {'algorithm':<20} {'ranks':>5} {'bytes':>10} {'measured':>12} {'model':>12} {'model/meas':>10}")
    for x in rows:
        c = x["c"]
        if c["inc_bytes"] and a_sw is not None:
            pred = a_sw + b_sw * c["inc_bytes"]
        else:
            pred = a * (c["rounds"] - (1 if c["inc_bytes"] else 0)) + b * max(c["bytes_sent"], c["inc_bytes"]) \
                + g * c["bytes_reduced"]
            if c["inc_bytes"]:
                pred += a  # one tree pass: one round of per-message cost
        print(f"{x['coll']:<12} {x['algo']:<20} {x['ranks']:>5} {x['size']:>10} {x['t']*1e6:>10.1f}us "
              f"{pred*1e6:>10.1f}us {pred/x['t']:>10.3f}")
    print("\nFor predictions at scale: inc model cost --overhead-us <alpha - path latency> "
          "--link-gbps <8/beta> --reduce-GBps <1/gamma>")


if __name__ == "__main__":
    main()
