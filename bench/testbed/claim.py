#!/usr/bin/env python3
"""The paper's claim, live: Core-INC against host algorithms on an emulated cluster.

For every host-link rate and size, runs `inc bench` on `inc testbed` (8 hosts by default, one
switch, every host link shaped in both directions), once with the host algorithms and once
through the switch, and prints the measured times beside `inc model` and `inc sim` predictions
for the same topology and rates, the speed-up against theory (2(p-1)/p), the switch's
retransmissions and CPU per lane. Writes a CSV, a JSON and PNG plots (gnuplot).

  python3 bench/testbed/claim.py --inc build/tools/inc --rates 1 --sizes 1M,4M,16M
  python3 bench/testbed/claim.py --inc build/tools/inc --rates 0.5,1,2,5 --sizes 16M,64M -o out

Needs root (network namespaces). Timings are medians of the bench's per-call times.
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)([KMG]?)(i?B)?$", re.I)


def parse_size(s):
    m = SIZE_RE.match(s.strip())
    if not m:
        raise SystemExit(f"claim.py: '{s}' is not a size (e.g. 16M)")
    mul = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(float(m.group(1)) * mul)


def human(b):
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << sh and b % (1 << sh) == 0:
            return f"{b >> sh} {unit}"
    return f"{b} B"


def rate_text(gbps):
    return f"{int(gbps * 1000)}mbit" if gbps < 1 or gbps != int(gbps) else f"{int(gbps)}gbit"


def run(cmd, what, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"claim.py: {what} did not finish within {timeout} s: {' '.join(cmd)}")
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise SystemExit(f"claim.py: {what} failed (exit {p.returncode}): {' '.join(cmd)}")
    return p.stdout + p.stderr


def bench_rows(out):
    """CSV rows printed by rank 0 of `inc bench --format csv` (prefixed "[h0 r0] ")."""
    rows, header = [], None
    for line in out.splitlines():
        if not line.startswith("[h0 r0] "):
            continue
        body = line[len("[h0 r0] "):]
        if body.startswith("collective,"):
            header = body.split(",")
        elif header and body.count(",") == len(header) - 1:
            rows.append(dict(zip(header, body.split(","))))
    return rows


def switch_stats(out):
    """Per-lane CPU seconds and the retransmission/aggregation counters, summed over every
    switch of the testbed (`[switch]` on one level; `[leafK]` and `[spine]` on two). The
    lanes are the busiest switch's (the one that would limit the path)."""
    per_switch = {}
    for m in re.finditer(r"^\[(\S+)\]\s+lane \d+ .*cpu ([0-9.]+) s", out, re.M):
        per_switch.setdefault(m.group(1), []).append(float(m.group(2)))
    lanes = max(per_switch.values(), key=sum) if per_switch else []
    tots = [m.groups() for m in re.finditer(
        r"^\[\S+\] switch \S+: packets in (\d+) out (\d+).*aggregations (\d+).*retransmissions (\d+)", out, re.M)]
    return {
        "lane_cpu_s": lanes,
        "packets_in": sum(int(t[0]) for t in tots),
        "aggregations": sum(int(t[2]) for t in tots),
        "retransmissions": sum(int(t[3]) for t in tots),
    }


def cpu_times():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def testbed(args, rate, extra, bench):
    """Runs the bench on a fresh testbed; returns (output, machine CPU busy fraction)."""
    cmd = [args.inc, "testbed", "-q", "--hosts", str(args.hosts), "--link", rate_text(rate)]
    if args.leaves > 1:
        cmd += ["--leaves", str(args.leaves), "--oversubscription", str(args.oversubscription)]
    cmd += extra + ["--", "inc", "bench"] + bench
    b0, t0 = cpu_times()
    out = run(cmd, "inc testbed", args.timeout)
    b1, t1 = cpu_times()
    return out, (b1 - b0) / max(1, t1 - t0)


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def predictions(args, rate, size, work):
    """Model and simulator times (seconds) for ring, rabenseifner and inc."""
    tree_levels = "2" if args.leaves > 1 else "1"
    csv_path = os.path.join(work, "model.csv")
    inc_net = ["--inc-chunk", args.inc_chunk, "--switch-memory", args.switch_memory]
    run([args.inc, "model", "cost", "-c", "allreduce", "-n", str(args.hosts), "-b", f"{size}B",
         "--link-gbps", str(rate), "--tree-levels", tree_levels, "--csv", csv_path] + inc_net, "inc model", 120)
    model = {}
    with open(csv_path) as f:
        for r in csv.DictReader(f):
            model[r["algorithm"]] = float(r["total_s"])
    sim = {}
    for algo in ("ring", "rabenseifner", "inc"):
        path = os.path.join(work, f"sim-{algo}.csv")
        cmd = [args.inc, "sim", "run", "-c", "allreduce", "-a", algo, "-b", f"{size}B",
               "--link-gbps", str(rate), "--hosts", str(args.hosts), "--csv", path] + inc_net
        if args.leaves > 1:
            # A leaf of the simulator's fat tree has radix = hosts down + uplinks up, and its
            # oversubscription is down:up: 4 hosts at 2:1 are radix 6 (radix 2 x 4 would be 1:1).
            per_leaf = args.hosts // args.leaves
            up = max(1, round(per_leaf / args.oversubscription))
            cmd += ["--topology", "fat_tree2", "--radix", str(per_leaf + up),
                    "--oversubscription", str(per_leaf / up)]
        else:
            cmd += ["--topology", "single_switch"]
        run(cmd, "inc sim", 600)
        with open(path) as f:
            for r in csv.DictReader(f):
                sim[algo] = float(r["time_s"])
    return model, sim


def plot(results, out_dir, hosts):
    if not shutil.which("gnuplot"):
        print("claim.py: gnuplot not found: no plots", file=sys.stderr)
        return []
    pngs = []
    sizes = sorted({r["bytes"] for r in results})
    rates = sorted({r["rate_gbps"] for r in results})
    dat = os.path.join(out_dir, "claim.dat")
    with open(dat, "w") as f:
        for s in sizes:
            f.write(f"# size {s}\n")
            for r in sorted((r for r in results if r["bytes"] == s), key=lambda r: r["rate_gbps"]):
                f.write(f"{r['rate_gbps']} {r['ring_s'] * 1e3} {r['inc_s'] * 1e3} {r['model_ring_s'] * 1e3} "
                        f"{r['model_inc_s'] * 1e3} {r['sim_ring_s'] * 1e3} {r['sim_inc_s'] * 1e3} "
                        f"{r['speedup']} {r['best_host_s'] * 1e3}\n")
            f.write("\n\n")
    theory = 2 * (hosts - 1) / hosts
    if len(rates) > 1:
        xlabel, xcol = "host link (Gb/s, each direction)", 1
        logx = f"set logscale x\nset xrange [{min(rates) / 1.3}:{max(rates) * 1.3}]"
        series = [(i, human(s)) for i, s in enumerate(sizes)]
    else:
        # One rate: plot against the size instead.
        with open(dat, "w") as f:
            for r in sorted(results, key=lambda r: r["bytes"]):
                f.write(f"{r['bytes'] / 2**20} {r['ring_s'] * 1e3} {r['inc_s'] * 1e3} {r['model_ring_s'] * 1e3} "
                        f"{r['model_inc_s'] * 1e3} {r['sim_ring_s'] * 1e3} {r['sim_inc_s'] * 1e3} "
                        f"{r['speedup']} {r['best_host_s'] * 1e3}\n")
        xlabel, xcol = "Allreduce size (MiB)", 1
        lo, hi = min(sizes) / 2**20, max(sizes) / 2**20
        logx = f"set logscale x 2\nset xrange [{lo / 1.5}:{hi * 1.5}]"
        series = [(0, f"{rates[0]:g} Gb/s")]
    times_png = os.path.join(out_dir, "claim-times.png")
    speed_png = os.path.join(out_dir, "claim-speedup.png")
    lines = []
    for idx, label in series:
        lines.append(f"'{dat}' index {idx} using {xcol}:2 with linespoints pt 7 lc rgb '#d62728' title 'ring, measured ({label})'")
        lines.append(f"'{dat}' index {idx} using {xcol}:3 with linespoints pt 5 lc rgb '#1f77b4' title 'INC, measured ({label})'")
        lines.append(f"'{dat}' index {idx} using {xcol}:4 with lines dt 2 lc rgb '#d62728' title 'ring, model'")
        lines.append(f"'{dat}' index {idx} using {xcol}:5 with lines dt 2 lc rgb '#1f77b4' title 'INC, model'")
        lines.append(f"'{dat}' index {idx} using {xcol}:7 with points pt 6 lc rgb '#1f77b4' title 'INC, inc sim'")
    script = f"""set terminal pngcairo size 900,560 font 'sans,10' noenhanced
set output '{times_png}'
set title 'Allreduce on {hosts} emulated hosts (inc testbed): measured vs predicted'
set xlabel '{xlabel}'
set ylabel 'time (ms)'
{logx}
set logscale y
set grid
set key top right
plot {", ".join(lines)}
set output '{speed_png}'
set title 'Core-INC speed-up over the ring (theory 2(p-1)/p = {theory:.2f})'
unset logscale y
set ylabel 'ring time / INC time'
set yrange [0:{max(2.2, theory + 0.3)}]
plot {theory} with lines dt 2 lc rgb 'black' title 'theory', """ + ", ".join(
        f"'{dat}' index {idx} using {xcol}:8 with linespoints pt 7 title 'measured ({label})'" for idx, label in series) + "\n"
    gp = os.path.join(out_dir, "claim.gp")
    with open(gp, "w") as f:
        f.write(script)
    subprocess.run(["gnuplot", gp], check=True)
    return [times_png, speed_png]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inc", default="build/tools/inc", help="the inc binary")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--leaves", type=int, default=1, help="2+: leaves + spine (two-level tree)")
    ap.add_argument("--oversubscription", type=float, default=2.0, help="two levels: uplink oversubscription")
    ap.add_argument("--rates", default="1", help="host link rates, Gb/s, comma list")
    ap.add_argument("--sizes", default="16M", help="Allreduce sizes, comma list")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1, help="testbed runs per point (median of the runs' medians)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--host-algos", default="ring,rabenseifner")
    ap.add_argument("--testbed-args", default="", help="extra inc testbed flags, e.g. '--mtu 65000'")
    ap.add_argument("--auth", choices=["on", "off"], default="off",
                    help="the switch job keyed (every packet authenticated, inc testbed's default) or not "
                         "[off: this claim is about the links; on a few cores the testbed concentrates the "
                         "MAC work of every emulated host and the switch, docs/TESTBED.md]")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per testbed run")
    ap.add_argument("--inc-chunk", default="8KiB", help="switch slot payload for the model/sim (MTU 9000: 2048 x f32)")
    ap.add_argument("--switch-memory", default="512KiB", help="the job's switch memory for the model/sim (slots x lanes x chunk)")
    ap.add_argument("-o", "--out", default=None, help="directory for CSV/JSON/PNG [temporary]")
    args = ap.parse_args()
    args.inc = os.path.abspath(args.inc)
    out_dir = args.out or tempfile.mkdtemp(prefix="inc-claim-")
    os.makedirs(out_dir, exist_ok=True)
    rates = [float(x) for x in args.rates.split(",")]
    sizes = [parse_size(x) for x in args.sizes.split(",")]
    extra = args.testbed_args.split() if args.testbed_args else []
    if args.auth == "off":
        extra = ["--no-auth"] + extra
    theory = 2 * (args.hosts - 1) / args.hosts
    results = []
    shape = (f"{args.hosts} hosts, one switch" if args.leaves <= 1 else
             f"{args.hosts} hosts under {args.leaves} leaves + spine, uplinks {args.oversubscription:g}:1")
    print(f"# Allreduce f32 on inc testbed: {shape}; host links shaped both ways; "
          f"medians of {args.iters} calls; theory (ring/INC) = 2(p-1)/p = {theory:.2f}; "
          f"switch job {'keyed (authenticated packets)' if args.auth == 'on' else 'unauthenticated (--auth on to key it)'}; "
          f"results {'unicast (--no-multicast)' if '--no-multicast' in extra else 'multicast, replicated by the bridges (the default)'}")
    print(f"# {'link':>8} {'size':>8} {'ring':>10} {'best host':>24} {'INC':>10} {'speed-up':>9} "
          f"{'model ring/INC':>17} {'sim ring/INC':>17} {'INC/model':>9} {'retx':>6} {'switch cpu/lane':>16} "
          f"{'cores':>6} {'limit':>9}")
    work = tempfile.mkdtemp(prefix="inc-claim-work-")
    for rate in rates:
        for size in sizes:
            bench = ["-c", "allreduce", "-b", str(size), "-e", str(size), "-n", str(args.iters),
                     "-w", str(args.warmup), "--format", "csv", "--no-progress"]
            host_runs, inc_runs, outs, busy_machine = [], [], [], []
            for _ in range(args.repeat):  # interleaved: a slow spell hits both alike
                host_out, _busy = testbed(args, rate, extra, bench + ["-a", args.host_algos])
                inc_out, busy = testbed(args, rate, extra, bench + ["-a", "inc"])
                hr, ir = bench_rows(host_out), bench_rows(inc_out)
                if not hr or not ir:
                    raise SystemExit("claim.py: no bench rows in the testbed output:\n" + host_out[-2000:] + inc_out[-2000:])
                bad = [r for r in hr + ir if r.get("correct") not in ("1", "-1")]
                if bad:
                    raise SystemExit(f"claim.py: WRONG results: {bad}")
                if ir[0]["in_network"] != "1":
                    raise SystemExit(f"claim.py: the 'inc' row ran on the hosts: {ir[0]}")
                host_runs.append({r["algo"]: float(r["time_us"]) * 1e-6 for r in hr})
                inc_runs.append(float(ir[0]["time_us"]) * 1e-6)
                outs.append(inc_out)
                busy_machine.append(busy)
            host = {a: median([h[a] for h in host_runs]) for a in host_runs[0]}
            inc_s = median(inc_runs)
            inc_out = outs[sorted(range(len(inc_runs)), key=lambda i: inc_runs[i])[len(inc_runs) // 2]]
            best_algo = min(host, key=host.get)
            sw = switch_stats(inc_out)
            model, sim = predictions(args, rate, size, work)
            # Switch CPU per lane while the INC calls ran (all calls of the run: warm-up and check
            # included), as a fraction of the run's INC time.
            calls = args.iters + args.warmup
            busy = [c / (inc_s * calls) for c in sw["lane_cpu_s"]] if sw["lane_cpu_s"] else []
            machine = median(busy_machine)
            link_bound = r_model = model.get("inc", 0)
            # What limits the in-network path: the links (near the model), the switch (a lane
            # busy most of the time), or this machine's cores (ranks, bridges and shapers).
            if r_model and inc_s <= 1.15 * r_model:
                bottleneck = "links"
            elif busy and max(busy) >= 0.85:
                bottleneck = "switch"
            elif machine >= 0.9:
                bottleneck = "host CPU"
            else:
                bottleneck = "?"
            r = {
                "rate_gbps": rate, "bottleneck": bottleneck, "machine_cpu_busy": machine, "bytes": size, "ring_s": host.get("ring", float("nan")),
                "best_host": best_algo, "best_host_s": host[best_algo], "inc_s": inc_s,
                "speedup": host.get("ring", host[best_algo]) / inc_s,
                "speedup_vs_best": host[best_algo] / inc_s, "theory": theory,
                "model_ring_s": model.get("ring", 0), "model_inc_s": model.get("inc", 0),
                "sim_ring_s": sim.get("ring", 0), "sim_inc_s": sim.get("inc", 0),
                "switch_retransmissions": sw["retransmissions"], "switch_aggregations": sw["aggregations"],
                "switch_lane_cpu_s": sw["lane_cpu_s"], "switch_lane_busy": busy,
            }
            results.append(r)
            del link_bound
            retx = (f"{100 * sw['retransmissions'] / max(1, sw['packets_in']):.2f}%" if sw["packets_in"] else "-")
            cpu = "/".join(f"{100 * b:.0f}%" for b in busy) or "-"
            print(f"  {rate:>6g}G {human(size):>8} {r['ring_s'] * 1e3:>8.1f}ms "
                  f"{best_algo + ' ' + format(r['best_host_s'] * 1e3, '.1f') + 'ms':>24} {inc_s * 1e3:>8.1f}ms "
                  f"{r['speedup']:>8.2f}x {r['model_ring_s'] * 1e3:>8.1f}/{r['model_inc_s'] * 1e3:<8.1f}"
                  f"{r['sim_ring_s'] * 1e3:>8.1f}/{r['sim_inc_s'] * 1e3:<8.1f} "
                  f"{inc_s / r['model_inc_s'] if r['model_inc_s'] else 0:>8.2f} {retx:>6} {cpu:>16} "
                  f"{100 * machine:>5.0f}% {bottleneck:>9}", flush=True)
    with open(os.path.join(out_dir, "claim.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out_dir, "claim.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[k for k in results[0] if not isinstance(results[0][k], list)],
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(results)
    pngs = plot(results, out_dir, args.hosts)
    print(f"# speed-up = ring / INC; INC/model = measured / `inc model` prediction; retx = switch "
          f"retransmissions per packet in; switch cpu = per lane, CPU seconds over the INC calls' time; "
          f"cores = this machine's CPU busy during the INC run; limit = links (within 15% of the model), "
          f"switch (a lane >= 85% busy), host CPU (machine >= 90% busy)")
    print(f"# written: {out_dir}/claim.csv, claim.json" + "".join(f", {os.path.basename(p)}" for p in pngs))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
