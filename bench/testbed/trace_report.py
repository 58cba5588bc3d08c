#!/usr/bin/env python3
"""Summarise a directory of engine traces (INC_TRACE=DIR: DIR/rank-N.csv, docs/ARCHITECTURE.md,
"The event trace"): per collective, algorithm and message size

  notice flight   a ready notice from the receiver telling it (notice_told) to the sender
                  reading it (notice_arrived): what `inc sim` charges as ready_notice_us
  send wait       a send op ready -> its message posted (waiting for the notice)
  transfer        posted on the sender -> last byte read on the receiver
  per step        the k-th send of each rank: wait, transfer and ready -> received
  collective      first rank's start -> last rank's end (span), and each rank's own time
  start skew      each rank's start after the call's earliest rank (offset), and per call the
                  latest one's (range): what `inc sim --start-skew-us` draws (docs/SIMULATOR.md,
                  "Start skew"); with the width S of a uniform [0, S] that has this mean range

All in microseconds (collectives in ms): median, mean, p10, p90 over every message / call of
the group. Intervals between ranks (flight, transfer, span) compare CLOCK_MONOTONIC across
processes: right on one machine (the emulated testbed's namespaces), meaningless across real
hosts unless their clocks are synchronised; per-rank intervals (send wait, a rank's time) are
right anywhere.

  python3 bench/testbed/trace_report.py /tmp/trace            # the tables
  python3 bench/testbed/trace_report.py /tmp/trace --chrome all.json   # one file for ui.perfetto.dev
  python3 bench/testbed/trace_report.py /tmp/trace --json summary.json
"""
import argparse
import collections
import csv
import glob
import json
import os
import re
import sys

STEM = re.compile(r"rank-(\d+)(?:\.(\d+))?\.csv$")


def read_dir(path):
    """Every record of every rank-N[.g].csv: dicts with ints, plus gen and rank; and the drops."""
    files = sorted(glob.glob(os.path.join(path, "rank-*.csv")))
    if not files:
        raise SystemExit(f"trace_report.py: no rank-N.csv in {path} (was INC_TRACE={path} set, and did the job end?)")
    rows, dropped = [], {}
    for fn in files:
        m = STEM.search(os.path.basename(fn))
        if not m:
            continue
        rank, gen = int(m.group(1)), int(m.group(2) or 0)
        with open(fn) as f:
            head = f.readline()
            d = re.search(r"dropped=(\d+)", head)
            if not head.startswith("#") or not d:
                raise SystemExit(f"trace_report.py: {fn} is not an engine trace (first line: {head.strip()!r})")
            dropped[(gen, rank)] = int(d.group(1))
            for r in csv.DictReader(f):
                for k in ("t_ns", "comm", "seq", "op", "peer", "msg_index", "bytes"):
                    r[k] = int(r[k])
                r["gen"], r["rank"] = gen, rank
                rows.append(r)
    return rows, dropped


def stats(v):
    if not v:
        return None
    v = sorted(v)
    n = len(v)
    q = lambda p: v[min(n - 1, int(p * n))]  # noqa: E731
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return {"n": n, "median": med, "mean": sum(v) / n, "p10": q(0.1), "p90": q(0.9), "max": v[-1]}


def analyse(rows, skip=0, min_bytes=0):
    """Groups (coll, algo, bytes) -> metric -> list of values (us; collectives ms); the first
    `skip` calls of each group (a benchmark's warm-up) and calls below `min_bytes` left out."""
    calls = {}  # (gen, comm, seq) -> (coll, algo, bytes)
    start, end = collections.defaultdict(dict), collections.defaultdict(dict)  # call -> rank -> t
    msg = collections.defaultdict(dict)  # (gen, comm, seq, sender, receiver, idx) -> event -> t
    sends = collections.defaultdict(list)  # (call, rank) -> [(op, msg key)]
    for r in rows:
        call = (r["gen"], r["comm"], r["seq"])
        ev = r["event"]
        if ev == "coll_start":
            calls[call] = (r["coll"], r["algo"], r["bytes"])
            start[call][r["rank"]] = r["t_ns"]
        elif ev == "coll_end":
            end[call][r["rank"]] = r["t_ns"]
        elif ev in ("op_ready", "send_posted", "send_done", "notice_arrived", "notice_told", "msg_header", "msg_end"):
            if ev == "op_ready" and r["kind"] not in ("send", "recv", "recv_reduce"):
                continue
            sender_side = ev in ("send_posted", "send_done", "notice_arrived") or (ev == "op_ready" and r["kind"] == "send")
            s, d = (r["rank"], r["peer"]) if sender_side else (r["peer"], r["rank"])
            key = call + (s, d, r["msg_index"])
            name = ("send_ready" if sender_side else "recv_ready") if ev == "op_ready" else ev
            msg[key].setdefault(name, r["t_ns"])
            if name == "send_ready":
                sends[(call, r["rank"])].append((r["op"], key))
    by_group = collections.defaultdict(list)
    for call, g in calls.items():
        by_group[g].append(call)
    calls = {c: g for g, lst in by_group.items() if g[2] >= min_bytes for c in sorted(lst)[skip:]}
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for call, (coll, algo, nbytes) in calls.items():
        g = groups[(coll, algo, nbytes)]
        first = min(start[call].values())
        g["start_offset_us"] += [(t - first) / 1e3 for t in start[call].values()]
        g["start_range_us"].append((max(start[call].values()) - first) / 1e3)
        g["ranks"].append(len(start[call]))
        if call in end and len(end[call]) == len(start[call]):
            g["collective_ms"].append((max(end[call].values()) - min(start[call].values())) / 1e6)
            g["rank_ms"] += [(end[call][k] - start[call][k]) / 1e6 for k in end[call]]
    for key, e in msg.items():
        call = key[:3]
        if call not in calls:
            continue
        g = groups[calls[call]]
        if "notice_told" in e and "notice_arrived" in e:
            g["notice_flight_us"].append((e["notice_arrived"] - e["notice_told"]) / 1e3)
            if "send_ready" in e and "send_posted" in e:
                g["send_wait_us"].append((e["send_posted"] - e["send_ready"]) / 1e3)
        if "send_posted" in e and "msg_end" in e:
            g["transfer_us"].append((e["msg_end"] - e["send_posted"]) / 1e3)
    for (call, rank), lst in sends.items():
        if call not in calls:
            continue
        g = groups[calls[call]]
        for step, (_, key) in enumerate(sorted(lst)):
            e = msg[key]
            if "send_posted" in e:
                g[f"step{step}_wait_us"].append((e["send_posted"] - e["send_ready"]) / 1e3)
            if "msg_end" in e and "send_posted" in e:
                g[f"step{step}_transfer_us"].append((e["msg_end"] - e["send_posted"]) / 1e3)
            if "msg_end" in e:
                g[f"step{step}_total_us"].append((e["msg_end"] - e["send_ready"]) / 1e3)
    return {k: {m: stats(v) for m, v in g.items()} for k, g in groups.items()}


def human(b):
    for unit, s in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s} {unit}"
    return f"{b} B"


def line(label, s, unit="us"):
    if not s:
        return f"  {label:<22} -"
    return (f"  {label:<22} n {s['n']:>5}  median {s['median']:>9.1f}  mean {s['mean']:>9.1f}  "
            f"p10 {s['p10']:>9.1f}  p90 {s['p90']:>9.1f}  max {s['max']:>9.1f} {unit}")


def report(summary, dropped, out=sys.stdout):
    total = sum(dropped.values())
    print(f"# {len(dropped)} rank trace file(s); events dropped (INC_TRACE_EVENTS cap): {total}"
          + (" -- the figures miss the calls after the cap" if total else ""), file=out)
    for (coll, algo, nbytes), g in sorted(summary.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        print(f"{coll} {algo} {human(nbytes)}:", file=out)
        print(line("collective (span)", g.get("collective_ms"), "ms"), file=out)
        print(line("collective (a rank)", g.get("rank_ms"), "ms"), file=out)
        print(line("start offset", g.get("start_offset_us")), file=out)
        print(line("start range", g.get("start_range_us")), file=out)
        w = uniform_width(g)
        if w is not None:
            print(f"  {'':<22} a uniform [0, S] over {int(g['ranks']['median'])} ranks with this mean range: "
                  f"S = {w:.1f} us", file=out)
        print(line("notice flight", g.get("notice_flight_us")), file=out)
        print(line("send wait (notice)", g.get("send_wait_us")), file=out)
        print(line("transfer", g.get("transfer_us")), file=out)
        steps = sorted({int(m[4:m.index("_")]) for m in g if m.startswith("step")})
        if steps:
            print(f"  {'step':>6} {'n':>5} {'wait med':>10} {'xfer med':>10} {'ready->recv med':>16} {'mean':>10}  (us)",
                  file=out)
        for k in steps:
            w, x, t = g.get(f"step{k}_wait_us"), g.get(f"step{k}_transfer_us"), g.get(f"step{k}_total_us")
            f = lambda s, key: f"{s[key]:>10.1f}" if s else f"{'-':>10}"  # noqa: E731
            total = f"{t['median']:>16.1f}" if t else f"{'-':>16}"
            print(f"  {k:>6} {(t or w or {'n': 0})['n']:>5} {f(w, 'median')} {f(x, 'median')} {total} {f(t, 'mean')}",
                  file=out)


def uniform_width(g):
    """S of a uniform [0, S] start offset whose expected range over p ranks, S (p - 1) / (p + 1),
    is the group's mean range (None without calls of two ranks or more)."""
    r, p = g.get("start_range_us"), g.get("ranks")
    if not r or not p or p["median"] < 2:
        return None
    n = p["median"]
    return r["mean"] * (n + 1) / (n - 1)


def start_skew(paths, skip=0, min_bytes=0):
    """The start skew of one or more trace directories as inc sim takes it: S = a + b x MiB, fitted
    by least squares to every (algorithm, size) group's uniform width (uniform_width); one size
    gives b = 0. Returns (a_us, b_us_per_MiB, [(algo, bytes, S_us, calls)])."""
    return fit_start_skew([analyse(read_dir(path)[0], skip, min_bytes) for path in paths], ", ".join(paths))


def fit_start_skew(summaries, where):
    """start_skew's fit over analyse() summaries already made (`where` names them in the error)."""
    pts = []
    for summary in summaries:
        for (coll, algo, nbytes), g in summary.items():
            w = uniform_width(g)
            if w is not None and coll != "barrier":
                pts.append((algo, nbytes, w, g["start_range_us"]["n"]))
    if not pts:
        raise SystemExit(f"trace_report.py: no collective call of two ranks or more in {where}")
    x = [b / (1 << 20) for _, b, _, _ in pts]
    y = [w for _, _, w, _ in pts]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx = sum((v - mx) ** 2 for v in x)
    b = sum((u - mx) * (v - my) for u, v in zip(x, y)) / sxx if sxx > 0 else 0.0
    a = my - b * mx
    if a < 0:  # S may not go below 0 at small sizes: through the origin instead
        a, b = 0.0, sum(u * v for u, v in zip(x, y)) / sum(u * u for u in x)
    return a, max(b, 0.0), sorted(pts)


def merge_chrome(path, out):
    events = []
    for fn in sorted(glob.glob(os.path.join(path, "rank-*.json"))):
        with open(fn) as f:
            events += json.load(f)["traceEvents"]
    with open(out, "w") as f:
        json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)
    return len(events)


def mean_flight(path, algos=None, skip=0):
    """The mean notice flight (us) over every group (of `algos` if given) of a trace directory,
    and how many notices: what validate_testbed.py pins ready_notice_us to."""
    rows, _ = read_dir(path)
    v = []
    summary = analyse(rows, skip)
    for (coll, algo, nbytes), g in summary.items():
        s = g.get("notice_flight_us")
        if s and (not algos or algo in algos):
            v.append((s["mean"], s["n"]))
    n = sum(k for _, k in v)
    if not n:
        raise SystemExit(f"trace_report.py: no ready notice in the traces of {path} (messages above INC_EAGER_BYTES?)")
    return sum(m * k for m, k in v) / n, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="the INC_TRACE directory (rank-N.csv files)")
    ap.add_argument("--chrome", metavar="OUT", help="also merge the ranks' rank-N.json into OUT (Perfetto, chrome://tracing)")
    ap.add_argument("--json", metavar="OUT", help="also write the summary as JSON")
    ap.add_argument("--skip", type=int, default=0, metavar="N",
                    help="leave out the first N calls of each collective, algorithm and size (the bench's -w)")
    ap.add_argument("--min-bytes", type=int, default=0, metavar="B", help="only calls of at least B bytes")
    args = ap.parse_args()
    if args.skip < 0 or args.min_bytes < 0:
        raise SystemExit("trace_report.py: --skip and --min-bytes must be >= 0")
    rows, dropped = read_dir(args.dir)
    summary = analyse(rows, args.skip, args.min_bytes)
    report(summary, dropped)
    a, b, pts = fit_start_skew([summary], args.dir)  # the summary just printed, not a second reading
    print(f"# start skew for inc sim (uniform [0, S] per rank, fitted on {len(pts)} groups): "
          f"--start-skew-us {a:.1f} --start-skew-us-per-MiB {b:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"coll": c, "algo": a, "bytes": b, **g} for (c, a, b), g in sorted(summary.items())], f, indent=1)
    if args.chrome:
        print(f"# {merge_chrome(args.dir, args.chrome)} trace events written: {args.chrome}")


if __name__ == "__main__":
    main()
