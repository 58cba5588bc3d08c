#!/usr/bin/env python3
"""`inc sim` against the emulated testbed (`inc testbed`, docs/TESTBED.md): measured against
simulated Allreduce times per size and algorithm (ring, Rabenseifner, Core-INC), on one switch
and on a two-level tree, with host and switch costs calibrated once and kept in one file.

  # 1. calibrate: measure a few points on one switch, fit the costs, write the [network] file
  python3 bench/sim/validate_testbed.py --inc build/tools/inc calibrate --net bench/testbed/calibration.toml
  # 2. validate: measure every shape, algorithm and size; simulate each with that file
  python3 bench/sim/validate_testbed.py --inc build/tools/inc validate --net bench/testbed/calibration.toml

The file is the [network] table that `inc sim run --net` and `inc model --net` read (docs/MODEL.md,
"Calibration against the testbed"); the link rate is given per run and wins over the file. The
calibration fits, by least squares on relative errors with `inc sim` as the model:
  host_overhead_us    per message (software, TCP, veth, bridge: LogP's o), host algorithms
  reduce_GBps         per byte reduced on the host CPU (gamma = 1 / rate), host algorithms
  ready_notice_us     a receiver's ready notice beyond o and the path latency (the runtime holds
                      messages above INC_EAGER_BYTES until it arrives), host algorithms
  switch_reduce_GBps  the software switch's cost per byte aggregated (one 8 KiB slot per
                      datagram, so inc_chunk / rate is its cost per chunk), Core-INC
and prints the fit's residuals. The simulator runs with `--matching ready --eager-threshold 64KiB`,
what the runtime does (src/coll/executor_ready.cpp; `--matching`, `--eager-bytes` to change).
With `--cores N` (the emulated testbed's processes share N cores; docs/SIMULATOR.md, "CPU of a
software switch and of the hosts") the Core-INC step instead keeps
  switch_packet_us    the software switches' CPU per datagram in or out, MEASURED: the switches'
                      CPU seconds over their datagrams, from their counters in the same runs
  host_packet_us      the hosts' CPU per Core-INC datagram sent or received, fitted (1-D search),
                      or with `--host-packet-us measured` MEASURED: each rank's process CPU per
                      call (inc bench --cpu, kept by `measure`; `--spin-us 0` so that it is work,
                      not wait()'s polling) over its datagrams per call; then nothing is fitted
  cpu_cores = N, switch_multicast = true (the testbed's default), switch_reduce_GBps = 0 (the
                      switch's arithmetic is inside its measured CPU per datagram)
With `--start-skew-trace DIR` (or `--start-skew-us A --start-skew-us-per-MiB B`) every simulation
draws each rank's start uniformly in [0, A + B x MiB] (the testbed's ranks leave inc bench's barrier
over a millisecond or more; bench/testbed/trace_report.py measures it) and reports inc bench's
figure, the most over ranks of a rank's mean time over `--start-skew-draws` draws; calibrate writes
the skew into the file (docs/SIMULATOR.md, "Start skew"). `--uplink fat` simulates the two-level
shape's uplink as the testbed has it, one link at (hosts per leaf / oversubscription) x the rate,
instead of as many host-rate links under D-mod-k (the default, `links`: the same in lock step, not
once flows start apart).
The fit prints its residuals: a point the fit cannot explain (noise of a loaded machine, or a
term the simulator lacks) shows there, it is not absorbed silently. `--measured FILE` reads
measurements saved by an earlier run (`--save FILE`) instead of running the testbed.

Needs root for the testbed (network namespaces). Times are medians of the bench's per-call times
(and of `--repeat` testbed runs).
"""
import argparse
import csv
import datetime
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testbed"))
from claim import human, parse_size, run  # noqa: E402
from calibrate_bench import lstsq  # noqa: E402  (same directory)
from testbed_measure import geometric, host_datagrams, load_measured, measure, spread  # noqa: E402

ALGOS = ("ring", "rabenseifner", "inc")
RUNTIME_EAGER_BYTES = 64 << 10  # the runtime's INC_EAGER_BYTES default (src/api/communicator.cpp)


def tcp_send_buffer():
    """The largest send buffer this kernel's TCP grows a socket to (net.ipv4.tcp_wmem's maximum;
    the testbed's hosts run this kernel): the runtime's send is done once its last byte is in the
    socket, so a message up to this size frees its buffer long before it is delivered."""
    try:
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 4 << 20  # Linux's default maximum


# ---- shapes ---------------------------------------------------------------------------------

def parse_shape(s):
    """'1x8': 8 hosts on one switch; '2x8': 8 hosts under 2 leaves and a spine."""
    try:
        leaves, hosts = (int(x) for x in s.lower().split("x"))
    except ValueError:
        raise SystemExit(f"validate_testbed.py: shape '{s}' is not LEAVESxHOSTS (e.g. 1x8, 2x8)")
    if leaves < 1 or hosts < 2 or hosts % leaves:
        raise SystemExit(f"validate_testbed.py: shape '{s}': hosts must be >= 2 and a multiple of the leaves")
    return leaves, hosts


def sim_flags(shape, args):
    """The same shape in `inc sim`: one switch, or a 2-level fat tree whose leaves have as many up
    links as the testbed's uplink carries host links (D-mod-k routing spreads a leaf's flows over
    them as one fat uplink would); with --burst-model on, the testbed's shapers (burst_flags)."""
    leaves, hosts = shape
    if leaves == 1:
        return ["--topology", "single_switch", "--hosts", str(hosts)] + burst_flags(args)
    d = hosts // leaves
    u = d / args.oversubscription
    if args.uplink == "fat":
        # One uplink per leaf (a radix of d + 1, one spine) at d / oversubscription x the host rate.
        return ["--topology", "fat_tree2", "--hosts", str(hosts), "--radix", str(d + 1), "--oversubscription", str(d),
                "--uplink-gbps", f"{u * args.rate:g}", "--routing", "dmodk"] + burst_flags(args)
    if u != int(u) or u < 1:
        raise SystemExit(f"validate_testbed.py: {d} hosts per leaf at {args.oversubscription:g}:1 is not a "
                         f"whole number of up links in inc sim")
    return ["--topology", "fat_tree2", "--hosts", str(hosts), "--radix", str(d + int(u)),
            "--oversubscription", f"{args.oversubscription:g}", "--routing", "dmodk"] + burst_flags(args)


TESTBED_AUTO_BURST = "1ms"     # src/testbed/spec.hpp kAutoBurstSeconds: 1 ms at the link's rate ...
TESTBED_GSO_BYTES = 65536      # ... but at least kMaxGsoBytes + one frame (MTU + 14 B of Ethernet)


def burst_flags(args):
    """--burst-model on: every link's tbf bucket as `inc testbed` sizes it (src/testbed/spec.cpp
    burst_bytes): --burst from --testbed-args (a time at the link's rate, or bytes), by default
    max(1 ms at the rate, 64 KiB + one frame of --mtu, 9000 by default); passed at
    --burst-peak-gbps (veth speed) after an idle period (docs/SIMULATOR.md, "Token-bucket links").
    The two-level shape's testbed uplink (one link at d/o x the host rate) is u links at the host
    rate here, each with its own bucket: their sum is the testbed's while the time term decides
    (1 ms: 2 x 125 KB for the 2 Gb/s uplink); a byte --burst or the floor gives each of them the
    whole of it."""
    if args.burst_model == "off":
        return []
    extra = args.testbed_args.split()

    def testbed_opt(name, default):
        for i, x in enumerate(extra):
            if x == name and i + 1 < len(extra):
                return extra[i + 1]
            if x.startswith(name + "="):
                return x.split("=", 1)[1]
        return default
    burst = testbed_opt("--burst", "auto").replace("\u00b5s", "us")
    flags = ["--burst-peak-gbps", f"{args.burst_peak_gbps:g}"]
    if burst == "auto":
        frame = int(testbed_opt("--mtu", "9000")) + 14
        return flags + ["--link-burst", TESTBED_AUTO_BURST, "--link-burst-min", f"{TESTBED_GSO_BYTES + frame}B"]
    return flags + ["--link-burst", burst]


def shape_name(shape):
    leaves, hosts = shape
    return f"{hosts} hosts, one switch" if leaves == 1 else f"{hosts} hosts, {leaves} leaves + spine"


# ---- simulating -----------------------------------------------------------------------------

class Sim:
    """`inc sim run` for one point, with the costs either from a [network] file or given."""

    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="inc-validate-")
        self.runs = 0
        self.cpu = None  # --cores: (switch_packet_us, host_packet_us), with theta
        self.shape_cpu = {}  # validate --cpu-per-shape: shape -> its own measured (switch, host) us
        # `inc sim` is deterministic: a point at the same costs is simulated once. The fits ask
        # for the same ones again and again (every left-out fit starts from the same costs, the
        # switch search walks the same grid), and each run is a process start.
        self.memo = {}

    def time(self, point, net=None, theta=None):
        return float(self.row(point, net, theta)["time_s"])

    def row(self, point, net=None, theta=None):
        """The `inc sim run --csv` row of one point (memoised)."""
        a = self.args
        path = os.path.join(self.work, "sim.csv")
        cmd = [a.inc, "sim", "run", "-c", "allreduce", "-a", point["algo"], "-b", f"{point['bytes']}B",
               "--link-gbps", f"{point['rate_gbps']:g}", "--no-progress", "--csv", path,
               "--matching", a.matching, "--eager-threshold", f"{a.eager_bytes}B",
               "--send-buffer", f"{a.send_buffer}B"] + \
            sim_flags(tuple(point["shape"]), a) + skew_flags(a)
        if net:
            cmd += ["--net", net]
            own = self.shape_cpu.get(tuple(point["shape"]))
            if own:  # the flags win over the file's keys
                cmd += ["--switch-packet-us", f"{own[0]:.9g}", "--host-packet-us", f"{own[1]:.9g}"]
        if theta is not None:
            o, g, s, n = theta
            cmd += ["--overhead-us", f"{o:.9g}", "--reduce-GBps", f"{1 / g if g > 0 else 0:.9g}",
                    "--ready-notice-us", f"{n:.9g}",
                    "--switch-reduce-GBps", f"{1 / s if s > 0 else 0:.9g}",
                    "--inc-chunk", a.inc_chunk, "--switch-memory", a.switch_memory]
            if self.cpu is not None:
                cmd += ["--switch-packet-us", f"{self.cpu[0]:.9g}", "--host-packet-us", f"{self.cpu[1]:.9g}",
                        "--switch-multicast", "true", "--cpu-cores", str(a.cores)]
        key = tuple(cmd) + ((open(net, "rb").read(),) if net else ())  # the file's costs, not its name
        if key not in self.memo:
            run(cmd, "inc sim", 600)
            self.runs += 1
            with open(path) as f:
                self.memo[key] = next(csv.DictReader(f))
        return self.memo[key]

    def model(self, point, net):
        """inc model's figure for the same point with the same file: the `model_s` of the same `inc
        sim run` (the alpha-beta-gamma closed form of `inc model cost` on the job's own topology:
        hops, the tree's levels and leaves' fan-in, and for host algorithms the per-step most
        loaded link of the oversubscribed tree, docs/MODEL.md "Oversubscription and contention")."""
        return float(self.row(point, net)["model_s"])


def skew_flags(args):
    """inc sim's start skew (--start-skew-*), when one is given or measured; [] leaves the --net
    file's (validate) or none (calibrate)."""
    if args.start_skew is None:
        return []
    a, b = args.start_skew
    return ["--start-skew-us", f"{a:.9g}", "--start-skew-us-per-MiB", f"{b:.9g}",
            "--start-skew-draws", str(args.start_skew_draws)]


# ---- fitting --------------------------------------------------------------------------------

def rel_residuals(sim, points, theta):
    return [(sim.time(p, theta=theta) - p["time_s"]) / p["time_s"] for p in points]


def host_start(args):
    """Where the host fit starts: o us, g ns/B, s ns/B, ready notice us (0 and kept there unless
    --matching ready, the only matching with a notice; the measured one if pinned)."""
    pinned = args.matching == "ready" and args.ready_notice_us is not None
    if args.fit_start:
        o, g, n = args.fit_start
        return (o, g, 0.0, args.ready_notice_us if pinned else n if args.matching == "ready" else 0.0)
    if pinned:
        return (10.0, 0.0, 0.0, args.ready_notice_us)
    return (10.0, 0.0, 0.0, 10.0 if args.matching == "ready" else 0.0)


def fit_host(sim, points, theta):
    """o (us), g (ns/B) and the ready notice n (us) on the host-algorithm points: the simulated
    time is (piecewise) linear in each, so Gauss-Newton with finite differences converges in a
    few steps; a term that comes out negative is pinned at 0 and the others refitted. Under
    --matching dataflow the notice does not exist and is not fitted."""
    steps = {0: 1.0, 1: 0.05, 3: 10.0}  # us, ns/B, us
    free = [0, 1, 3] if sim.args.matching == "ready" and sim.args.ready_notice_us is None else [0, 1]
    for _ in range(4):
        r0 = rel_residuals(sim, points, theta)
        cols = []
        for k in free:
            t = list(theta)
            t[k] += steps[k]
            rk = rel_residuals(sim, points, t)
            cols.append([(b - a) / steps[k] for a, b in zip(r0, rk)])
        rows = [[c[i] for c in cols] for i in range(len(points))]
        delta = lstsq(rows, [-x for x in r0]) if rows and rows[0] else None
        if delta is None:
            break
        new = list(theta)
        for k, d in zip(free, delta):
            new[k] = theta[k] + d
        neg = [k for k in free if new[k] < 0]
        if neg:
            for k in neg:
                new[k] = 0.0
                free.remove(k)
        moved = max(abs(new[k] - theta[k]) / steps[k] for k in steps)
        theta = new
        if not free or moved < 1e-3:
            break
    return theta


def fit_switch(sim, points, theta):
    """s (ns/B) on the Core-INC points: the time does not fall as s grows (a slower switch), and is
    flat while the links are the bottleneck, so a 1-D search: a geometric grid, then golden section."""
    def cost(s):
        t = (theta[0], theta[1], s, theta[3])
        return sum(x * x for x in rel_residuals(sim, points, t))
    grid = [0.0] + [0.01 * 2 ** i for i in range(16)]  # up to ~330 ns/B (3 MB/s)
    return (theta[0], theta[1], search_1d(cost, grid), theta[3])


def switch_packet_us(args, points):
    """--cores: the switches' CPU per datagram, from their counters (every shape's runs, once each)."""
    if args.switch_packet_us is not None:
        return args.switch_packet_us
    seen, cpu_s, packets = set(), 0.0, 0
    for p in points:
        if tuple(p["shape"]) not in seen and p.get("switch_packets"):
            seen.add(tuple(p["shape"]))
            cpu_s, packets = cpu_s + p["switch_cpu_s"], packets + p["switch_packets"]
    if not packets:
        raise SystemExit("validate_testbed.py: --cores needs the switches' CPU counters (measurements from this "
                         "script's testbed runs) or --switch-packet-us")
    return 1e6 * cpu_s / packets


def host_packet_us(args, points):
    """--cores --host-packet-us measured: the hosts' CPU per Core-INC datagram sent or received,
    MEASURED: each rank's process CPU per call (inc bench --cpu, best with --spin-us 0: work, not
    polling) over its datagrams per call, summed over the Core-INC points (None: not asked)."""
    if args.host_packet_us is None:
        return None
    if args.host_packet_us != "measured":
        return float(args.host_packet_us)
    pts = [p for p in points if p["algo"] == "inc" and p.get("host_cpu_us")]
    if not pts:
        raise SystemExit("validate_testbed.py: --host-packet-us measured needs the hosts' CPU per call in the "
                         "measurements (this script's measure step records it, inc bench --cpu)")
    spins = {p.get("spin_us") for p in pts}
    if spins != {"0"}:
        print(f"# note: the hosts' CPU was measured with INC_SPIN_US {sorted(str(x) for x in spins)} (not 0): "
              f"it includes wait()'s polling", file=sys.stderr)
    chunk = parse_size(args.inc_chunk)
    return sum(p["host_cpu_us"] for p in pts) / sum(host_datagrams(p["bytes"], chunk) for p in pts)


def fit_cpu(sim, points, theta):
    """--cores: host_packet_us (us per datagram) on the Core-INC points, with the switches' cost per
    datagram measured (sim.cpu[0]) and no per-byte switch ALU: a 1-D search as fit_switch's."""
    theta = (theta[0], theta[1], 0.0, theta[3])

    def cost(h):
        sim.cpu = (sim.cpu[0], h)
        return sum(x * x for x in rel_residuals(sim, points, theta))
    h = search_1d(cost, [0.0] + [0.125 * 2 ** i for i in range(9)])  # up to 32 us per datagram
    sim.cpu = (sim.cpu[0], h)
    return theta


def keep_cpu(sim, points, theta):
    """--cores with both CPU costs measured (sim.cpu): no Core-INC term is fitted, and the
    switch's arithmetic is inside its measured CPU per datagram (no per-byte ALU)."""
    return (theta[0], theta[1], 0.0, theta[3])


def search_1d(cost, grid):
    """The minimum of a cost that is flat, then grows (or the reverse): the best point of a grid,
    refined by golden section between its neighbours."""
    costs = [cost(s) for s in grid]
    i = min(range(len(grid)), key=lambda j: costs[j])
    lo, hi = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = cost(a), cost(b)
    for _ in range(20):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = cost(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = cost(b)
    best = min([(costs[i], grid[i]), (fa, a), (fb, b)])
    return best[1]


def write_net(path, theta, args, fitted, res, warning, cpu=None, cpu_fitted=True):
    o, g, s, n = theta
    rms = math.sqrt(sum(x * x for x in res) / len(res))
    lines = [
        "# Host and switch costs of the emulated testbed (inc testbed), fitted by",
        "# bench/sim/validate_testbed.py calibrate with inc sim as the model (docs/MODEL.md,",
        "# \"Calibration against the testbed\"). Read by `inc sim run --net` and `inc model --net`;",
        "# the link rate is given per run (--link-gbps wins over the file).",
        f"# fitted {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on {len(fitted)} points "
        f"({', '.join(sorted({shape_name(tuple(p['shape'])) for p in fitted}))}, {args.rate:g} Gb/s);",
        f"# relative residuals: rms {100 * rms:.1f}%, worst {100 * max(abs(x) for x in res):.1f}%",
        f"# inc sim --matching {args.matching} --eager-threshold {human(args.eager_bytes)}"
        + (f"; measurements from {args.measured}" if args.measured else ""),
    ]
    for p, r in zip(fitted, res):
        lines.append(f"#   {p['algo']:<13} {human(p['bytes']):>8}  measured {p['time_s'] * 1e3:9.3f} ms  residual {100 * r:+6.1f}%")
    if warning:
        lines.append(f"# WARNING: {warning}")
    lines += [
        "[network]",
        f"host_overhead_us = {o:.6g}",
        f"ready_notice_us = {n:.6g}   # --matching ready, messages above {human(args.eager_bytes)}{args.notice_source}",
        f"reduce_GBps = {1 / g:.6g}   # gamma {g:.4g} ns/B" if g > 0 else
        "reduce_GBps = 0   # free: the fit found no per-byte reduce cost",
        f"switch_reduce_GBps = {1 / s:.6g}   # {s:.4g} ns/B: {parse_size(args.inc_chunk) * s * 1e-3:.3g} us "
        f"per {args.inc_chunk} chunk" if s > 0 else "switch_reduce_GBps = 0   # line rate: no switch cost found"
        if cpu is None else "switch_reduce_GBps = 0   # inside switch_packet_us (the switches' measured CPU)",
        f"send_buffer = \"{args.send_buffer}B\"   # a send this small is done once the kernel has it (TCP)",
        f"inc_chunk = \"{args.inc_chunk}\"",
        f"switch_memory = \"{args.switch_memory}\"",
    ]
    if cpu is not None:
        lines += [
            f"switch_packet_us = {cpu[0]:.4g}   # measured: the switches' CPU seconds / their datagrams in + out",
            f"host_packet_us = {cpu[1]:.4g}   # fitted on the Core-INC points" if cpu_fitted else
            f"host_packet_us = {cpu[1]:.4g}   # measured: the ranks' process CPU per call (inc bench --cpu) / their datagrams",
            "switch_multicast = true   # inc testbed's default: a leaf sends each result once to its hosts",
            f"cpu_cores = {args.cores}   # the emulated testbed's processes share {args.cores} cores (not a cluster's property)",
        ]
    if args.start_skew is not None:
        lines += [f"start_skew_us = {args.start_skew[0]:.6g}   # ranks start uniform in [0, S], S = this + the next x MiB"
                  f"{args.skew_source}",
                  f"start_skew_us_per_MiB = {args.start_skew[1]:.6g}"]
    if args.burst_model == "on":
        b = burst_flags(args)
        keys = {"--link-burst": "link_burst", "--link-burst-min": "link_burst_min", "--burst-peak-gbps": "burst_peak_gbps"}
        lines.append("# the testbed's shapers, which the fit simulated (docs/SIMULATOR.md, \"Token-bucket links\")")
        lines += [f"{keys[k]} = {v}" if k == "--burst-peak-gbps" else f'{keys[k]} = "{v}"' for k, v in zip(b[::2], b[1::2])]
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def leave_one_out(sim, host, inc, theta, fit_inc=None):
    """Each point's residual when the costs are fitted without it: a point that only fits because
    the fit bent the costs towards it (noise absorbed) shows here, far from its fitted residual."""
    out = []
    for i, p in enumerate(host):
        rest = host[:i] + host[i + 1:]
        out.append(rel_residuals(sim, [p], fit_host(sim, rest, host_start(sim.args)))[0] if len(rest) >= 2 else None)
    cpu = sim.cpu
    for i, p in enumerate(inc):
        rest = inc[:i] + inc[i + 1:]
        out.append(rel_residuals(sim, [p], (fit_inc or fit_switch)(sim, rest, theta))[0] if rest else None)
        sim.cpu = cpu
    return out


def calibrate(args, sim, measured):
    host = [p for p in measured if p["algo"] != "inc"]
    inc = [p for p in measured if p["algo"] == "inc"]
    if len(host) < 2:
        raise SystemExit("validate_testbed.py: the calibration needs at least two host-algorithm points")
    fit_inc = None
    if args.cores > 0:  # before the host fit: the host algorithms' work shares the cores too
        sim.cpu = (switch_packet_us(args, measured), 0.0)
        fit_inc = fit_cpu
        h = host_packet_us(args, measured)
        if h is not None:  # both CPU costs measured: nothing of Core-INC is fitted
            sim.cpu = (sim.cpu[0], h)
            fit_inc = keep_cpu
    theta = fit_host(sim, host, host_start(args))
    if inc:
        theta = (fit_inc or fit_switch)(sim, inc, theta)
    pts = host + inc
    res = rel_residuals(sim, pts, theta)
    loo = leave_one_out(sim, host, inc, theta, fit_inc)
    o, g, s, n = theta
    print(f"# fitted on {len(pts)} points ({sim.runs} inc sim runs): host_overhead_us = {o:.2f}, "
          f"ready_notice_us = {n:.2f}{args.notice_source}, "
          f"reduce_GBps = {1 / g if g > 0 else 0:.3g} (gamma {g:.3f} ns/B), "
          f"switch_reduce_GBps = {1 / s if s > 0 else 0:.3g} ({s:.3f} ns/B)")
    if sim.cpu is not None:
        print(f"# {args.cores} shared cores: switch_packet_us = {sim.cpu[0]:.3f} (measured), "
              f"host_packet_us = {sim.cpu[1]:.3f} ({'fitted' if fit_inc is fit_cpu else 'measured'})")
    print(f"# {'shape':<28} {'algorithm':<13} {'size':>8} {'measured':>12} {'fitted sim':>12} {'residual':>9} "
          f"{'left out':>9}")
    for p, r, lo in zip(pts, res, loo):
        lo_txt = f"{100 * lo:+8.1f}%" if lo is not None else f"{'-':>9}"
        print(f"  {shape_name(tuple(p['shape'])):<28} {p['algo']:<13} {human(p['bytes']):>8} "
              f"{p['time_s'] * 1e3:>10.3f}ms {p['time_s'] * (1 + r) * 1e3:>10.3f}ms {100 * r:>+8.1f}% {lo_txt}")
    worst = max(abs(x) for x in res)
    worst_loo = max((abs(x) for x in loo if x is not None), default=0.0)
    print(f"# residuals: rms {100 * math.sqrt(sum(x * x for x in res) / len(res)):.1f}%, worst {100 * worst:.1f}%; "
          f"left out (each point predicted by a fit without it): worst {100 * worst_loo:.1f}%")
    warning = None
    if worst > 0.10 or worst_loo > 0.10:
        warning = ("the costs do not explain every point within 10% (fitted or left out): noisy measurements "
                   "(a loaded machine) or a cost the simulator does not model; rerun on an idle machine before "
                   "trusting the file")
        print(f"# WARNING: {warning}", flush=True)
    write_net(args.net, theta, args, pts, res, warning, sim.cpu, cpu_fitted=fit_inc is fit_cpu)
    print(f"# written: {args.net}")


def shape_cpu_costs(args, measured):
    """validate --cpu-per-shape: each shape's own measured CPU per datagram (switches' counters,
    ranks' CPU per call), which the simulation of that shape's points then uses instead of the
    file's: with them the CPU model's mechanics (sharing of the cores, datagrams per switch) are
    checked without the question whether one shape's costs carry over to the other."""
    out = {}
    for shape in sorted({tuple(p["shape"]) for p in measured}):
        pts = [p for p in measured if tuple(p["shape"]) == shape]
        a = argparse.Namespace(switch_packet_us=None, host_packet_us="measured", inc_chunk=args.inc_chunk)
        out[shape] = (switch_packet_us(a, pts), host_packet_us(a, pts))
        print(f"# {shape_name(shape)}: its own measured CPU per datagram: switches {out[shape][0]:.3f} us, "
              f"hosts {out[shape][1]:.3f} us")
    return out


def validate(args, sim, measured):
    if not os.path.exists(args.net):
        raise SystemExit(f"validate_testbed.py: {args.net} does not exist (run the calibrate step first)")
    if args.cpu_per_shape:
        sim.shape_cpu = shape_cpu_costs(args, measured)
    print(f"# Allreduce f32, {args.rate:g} Gb/s host links; costs from {args.net}; inc sim --matching {args.matching} "
          f"(eager up to {human(args.eager_bytes)}); error = sim / measured - 1")
    if args.start_skew is not None:
        print(f"# inc sim: ranks start uniform in [0, {args.start_skew[0]:.1f} us + {args.start_skew[1]:.1f} us per MiB], "
              f"{args.start_skew_draws} draws, inc bench's figure (the most over ranks of a rank's mean time)"
              f"{args.skew_source}; two-level uplink: {args.uplink}")
    print(f"# {'shape':<28} {'algorithm':<13} {'size':>8} {'measured':>12} {'inc sim':>12} {'error':>8} "
          f"{'inc model':>12} {'error':>8} {'runs':>4} {'spread':>7}")
    rows, errs = [], []
    for p in sorted(measured, key=lambda p: (p["shape"], ALGOS.index(p["algo"]) if p["algo"] in ALGOS else 9, p["bytes"])):
        t_sim = sim.time(p, net=args.net)
        t_mod = sim.model(p, args.net)
        e_sim, e_mod = t_sim / p["time_s"] - 1, t_mod / p["time_s"] - 1
        rows.append(dict(p, sim_s=t_sim, model_s=t_mod, sim_error=e_sim, model_error=e_mod))
        if p["bytes"] >= 1 << 20:
            errs.append((abs(e_sim), p))
        print(f"  {shape_name(tuple(p['shape'])):<28} {p['algo']:<13} {human(p['bytes']):>8} {p['time_s'] * 1e3:>10.3f}ms "
              f"{t_sim * 1e3:>10.3f}ms {100 * e_sim:>+7.1f}% {t_mod * 1e3:>10.3f}ms {100 * e_mod:>+7.1f}% "
              f"{len(p.get('runs') or [1]):>4} {100 * spread(p):>6.1f}%", flush=True)
    if errs:
        within = sum(1 for e, _ in errs if e <= 0.10)
        e, p = max(errs, key=lambda x: x[0])
        print(f"# from 1 MiB up: {within} of {len(errs)} points within 10% of the measurement (goal: all); "
              f"worst {100 * e:.1f}% ({shape_name(tuple(p['shape']))}, {p['algo']}, {human(p['bytes'])})")
        seen = {}
        for p in measured:
            if "drops" in p:
                seen.setdefault(shape_name(tuple(p["shape"])), p["drops"])
        for name, d in seen.items():
            print(f"# {name}: packets dropped by the testbed's links, per run (every algorithm and size): "
                  f"{', '.join(str(x) for x in d)}")
        noisy = [p for _, p in errs if spread(p) > 0.05]
        if noisy:
            print(f"# {len(noisy)} of these points moved more than +-5% between their own testbed runs (spread "
                  f"column): their error is no better known than that")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
        print(f"# written: {args.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["calibrate", "validate", "measure"],
                    help="calibrate: fit and write --net; validate: compare with --net; measure: only --save")
    ap.add_argument("--inc", default="build/tools/inc", help="the inc binary")
    ap.add_argument("--net", default="bench/testbed/calibration.toml", help="the [network] file written / read")
    ap.add_argument("--shapes", default=None,
                    help="LEAVESxHOSTS list [calibrate: 1x8; validate and measure: 1x8,2x8]")
    ap.add_argument("--oversubscription", type=float, default=1.0, help="two levels: uplink oversubscription")
    ap.add_argument("--rate", type=float, default=1.0, help="host link rate, Gb/s")
    ap.add_argument("--sizes", default=None, help="geometric list [calibrate: 1M,4M,16M; validate: 1M,4M,16M,64M]")
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3,
                    help="testbed runs per shape, the shapes alternating run by run (median of their medians)")
    ap.add_argument("--testbed-args", default="", help="extra inc testbed flags")
    ap.add_argument("--auth", choices=["on", "off"], default="off", help="key the switch job (as claim.py)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per testbed run")
    ap.add_argument("--inc-chunk", default="8KiB", help="switch slot payload (MTU 9000: 2048 x f32)")
    ap.add_argument("--switch-memory", default="512KiB", help="the job's switch memory (slots x lanes x chunk)")
    ap.add_argument("--matching", choices=["ready", "dataflow", "rendezvous", "eager"], default="ready",
                    help="inc sim's matching (ready: what the runtime does; docs/SIMULATOR.md)")
    ap.add_argument("--eager-bytes", type=parse_size, default=RUNTIME_EAGER_BYTES,
                    help="eager threshold: the runtime's INC_EAGER_BYTES (default 64 KiB)")
    ap.add_argument("--ready-notice-us", type=float, default=None,
                    help="calibrate: pin ready_notice_us to this measured value instead of fitting it")
    ap.add_argument("--ready-notice-trace", metavar="DIR",
                    help="calibrate: pin ready_notice_us to the mean notice flight of an INC_TRACE directory "
                         "of a testbed run (bench/testbed/trace_report.py)")
    ap.add_argument("--send-buffer", type=parse_size, default=None,
                    help="inc sim --send-buffer: a send up to this size is done once the transport has it, as the "
                         "runtime's over TCP [this kernel's net.ipv4.tcp_wmem maximum; 0: done on delivery]")
    ap.add_argument("--cores", type=int, default=0,
                    help="calibrate: the testbed's processes share this many cores (e.g. $(nproc)): model the "
                         "switches' and hosts' CPU per datagram on them (0: fit switch_reduce_GBps instead)")
    ap.add_argument("--switch-packet-us", type=float, default=None,
                    help="calibrate --cores: this switch CPU per datagram instead of the switches' counters")
    ap.add_argument("--host-packet-us", default=None, metavar="US|measured",
                    help="calibrate --cores: the hosts' CPU per Core-INC datagram instead of fitting it; 'measured': "
                         "from the measurements' host CPU per call (inc bench --cpu; measure with --spin-us 0) over "
                         "the datagrams, so no CPU term is fitted")
    ap.add_argument("--cpu-per-shape", action="store_true",
                    help="validate: simulate each shape with its own measured switch and host CPU per datagram "
                         "(the file's other costs kept; needs a --net file with cpu_cores): checks the CPU model's "
                         "mechanics apart from whether the costs carry over between shapes")
    ap.add_argument("--burst-model", choices=["on", "off"], default="off",
                    help="on: simulate the testbed's token buckets (every link's tbf burst, passed at --burst-peak-gbps "
                         "after an idle period; --burst in --testbed-args is honoured). Off by default: on the idle "
                         "measurements it does not improve the fit (docs/SIMULATOR.md, the sixth round)")
    ap.add_argument("--burst-peak-gbps", type=float, default=8.0,
                    help="--burst-model on: a link's rate while its bucket holds tokens, veth speed (8: one "
                         "unshaped TCP flow on a loaded machine; docs/SIMULATOR.md, \"Token-bucket links\")")
    ap.add_argument("--fit-start", type=lambda t: tuple(float(x) for x in t.split(",")), default=None,
                    metavar="O_US,GAMMA_NS_PER_B,NOTICE_US",
                    help="calibrate: start the host fit here (default 10,0,10); with --burst-model on the costs "
                         "barely move the simulated time near 0 (idle gaps refill the buckets), so the fit may not "
                         "leave a start point there")
    ap.add_argument("--spin-us", type=int, default=None,
                    help="measure: INC_SPIN_US for the testbed's ranks (0: wait() sleeps at once, so the hosts' CPU "
                         "per call that inc bench --cpu records is work, not polling) [inherited; the runtime's 500]")
    ap.add_argument("--start-skew-us", type=float, default=None, metavar="A",
                    help="inc sim: every rank starts at an offset uniform in [0, A + B x MiB] (B: "
                         "--start-skew-us-per-MiB); the figure is inc bench's over the draws")
    ap.add_argument("--start-skew-us-per-MiB", type=float, default=0.0, metavar="B",
                    help="with --start-skew-us: the width's growth per MiB of the collective")
    ap.add_argument("--start-skew-trace", metavar="DIR[,DIR]",
                    help="the start skew measured instead: A and B fitted to the ranks' start offsets in INC_TRACE "
                         "directories of testbed runs (bench/testbed/trace_report.py)")
    ap.add_argument("--start-skew-draws", type=int, default=16, help="with a start skew: draws per simulated point")
    ap.add_argument("--uplink", choices=["links", "fat"], default="links",
                    help="two levels: a leaf's uplink as d/o host-rate links under D-mod-k (links) or as one link "
                         "at d/o x the rate, as the testbed's (fat)")
    ap.add_argument("--measured", help="JSON of earlier measurements (--save) instead of running the testbed")
    ap.add_argument("--save", help="write the measurements to this JSON")
    ap.add_argument("-o", "--out", help="validate: write the rows to this JSON")
    args = ap.parse_args()
    args.inc = os.path.abspath(args.inc)
    if args.repeat < 1:
        raise SystemExit(f"validate_testbed.py: --repeat {args.repeat}: need at least one testbed run per shape")
    if args.fit_start is not None and len(args.fit_start) != 3:
        raise SystemExit("validate_testbed.py: --fit-start takes three numbers: O_US,GAMMA_NS_PER_B,NOTICE_US")
    args.notice_source = ""
    if args.ready_notice_us is not None and args.ready_notice_trace:
        raise SystemExit("validate_testbed.py: --ready-notice-us and --ready-notice-trace both pin the notice; give one")
    if args.ready_notice_trace:
        from trace_report import mean_flight  # bench/testbed, on the path above
        args.ready_notice_us, count = mean_flight(args.ready_notice_trace)
        args.notice_source = f" (measured: mean flight of {count} notices in {args.ready_notice_trace})"
    elif args.ready_notice_us is not None:
        if not args.ready_notice_us >= 0:
            raise SystemExit(f"validate_testbed.py: --ready-notice-us {args.ready_notice_us} must be >= 0")
        args.notice_source = " (pinned by --ready-notice-us)"
    if args.host_packet_us not in (None, "measured"):
        try:
            ok = float(args.host_packet_us) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise SystemExit(f"validate_testbed.py: --host-packet-us {args.host_packet_us}: a number of us >= 0 or 'measured'")
    args.start_skew, args.skew_source = None, ""
    if args.start_skew_trace and args.start_skew_us is not None:
        raise SystemExit("validate_testbed.py: --start-skew-us and --start-skew-trace both set the skew; give one")
    if args.start_skew_draws < 1:
        raise SystemExit(f"validate_testbed.py: --start-skew-draws {args.start_skew_draws}: need at least one")
    if args.start_skew_trace:
        from trace_report import start_skew  # bench/testbed, on the path above
        a, b, pts = start_skew(args.start_skew_trace.split(","), skip=2, min_bytes=1 << 20)  # the traced runs' -w 2
        args.start_skew = (a, b)
        args.skew_source = (f" (measured: fitted to {len(pts)} groups of calls of 1 MiB and up in "
                            f"{args.start_skew_trace})")
        print(f"# start skew from {args.start_skew_trace}: S = {a:.1f} us + {b:.1f} us per MiB ("
              + ", ".join(f"{al} {human(by)} {w:.0f} us" for al, by, w, _ in pts) + ")", file=sys.stderr)
    elif args.start_skew_us is not None:
        if not (args.start_skew_us >= 0 and args.start_skew_us_per_MiB >= 0):
            raise SystemExit("validate_testbed.py: --start-skew-us and --start-skew-us-per-MiB must be >= 0")
        args.start_skew = (args.start_skew_us, args.start_skew_us_per_MiB)
        args.skew_source = " (pinned by --start-skew-us)"
    if args.send_buffer is None:
        args.send_buffer = tcp_send_buffer()
    args.algos = [a for a in args.algos.split(",") if a]
    bad = [a for a in args.algos if a not in ALGOS]
    if bad:
        raise SystemExit(f"validate_testbed.py: unknown algorithm(s) {bad}; choose from {ALGOS}")
    shapes = [parse_shape(s) for s in (args.shapes or ("1x8" if args.step == "calibrate" else "1x8,2x8")).split(",")]
    sizes = [parse_size(s) for s in (args.sizes or ("1M,4M,16M" if args.step == "calibrate" else "1M,4M,16M,64M")).split(",")]
    if args.spin_us is not None:  # inc testbed passes the environment on to the ranks (docs/TESTBED.md)
        if not 0 <= args.spin_us <= 1000000:
            raise SystemExit(f"validate_testbed.py: --spin-us {args.spin_us}: 0..1000000 (INC_SPIN_US)")
        os.environ["INC_SPIN_US"] = str(args.spin_us)
    args.extra = (["--no-auth"] if args.auth == "off" else []) + (args.testbed_args.split() if args.testbed_args else [])
    if args.measured:
        measured = load_measured(args.measured, set(shapes), set(sizes), set(args.algos))
    else:
        measured = measure(args, shapes, sizes)
    if args.save:
        with open(args.save, "w") as f:
            json.dump(measured, f, indent=1)
        print(f"# measurements written: {args.save}")
    sim = Sim(args)
    if args.step == "calibrate":
        calibrate(args, sim, measured)
    elif args.step == "validate":
        validate(args, sim, measured)


if __name__ == "__main__":
    main()
