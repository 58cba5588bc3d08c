"""Measuring `inc bench` on the emulated testbed for bench/sim/validate_testbed.py (its `measure`
step and the saved measurements it reads back): the testbed's flags per shape, one testbed run per
shape and repeat with the machine's CPU meanwhile, the switches' counters and the links' drops from
its output, and each point's spread between runs."""
import json
import os
import re
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testbed"))
from claim import bench_rows, human, median, parse_size, rate_text, run  # noqa: E402

def testbed_flags(shape, args):
    leaves, hosts = shape
    f = ["--hosts", str(hosts), "--link", rate_text(args.rate)]
    if leaves > 1:
        f += ["--leaves", str(leaves), "--oversubscription", f"{args.oversubscription:g}"]
    return f


# ---- measuring ------------------------------------------------------------------------------

def geometric(sizes):
    sizes = sorted(sizes)
    if len(sizes) == 1:
        return sizes[0], sizes[0], 2
    f = sizes[1] / sizes[0]
    for a, b in zip(sizes, sizes[1:]):
        if b != a * f:
            raise SystemExit("validate_testbed.py: sizes must be a geometric series (inc bench -b/-e/-f), "
                             f"e.g. 1M,4M,16M,64M; got {','.join(human(s) for s in sizes)}")
    return sizes[0], sizes[-1], f


SWITCH_LINE = re.compile(r"^\[\S+\] switch \S+: packets in (\d+) out (\d+),.*\bcpu ([0-9.]+) s$", re.M)


def switch_cpu(out):
    """(CPU seconds, datagrams in + out) summed over every switch of a testbed run (their --stats)."""
    tot = [m.groups() for m in SWITCH_LINE.finditer(out)]
    return sum(float(t[2]) for t in tot), sum(int(t[0]) + int(t[1]) for t in tot)


DROPS_LINE = re.compile(r"^drops: (\d+) at senders \(shaper queue full\), (\d+) at receivers$", re.M)


def drops(out):
    """Packets the testbed's links dropped in one run (its counters' summary line): TCP's loss
    recovery is a cost the fluid simulator does not model, so a point measured with many drops
    is a weaker check."""
    return sum(int(a) + int(b) for a, b in DROPS_LINE.findall(out))


def machine_cpu():
    """(busy, idle) core-seconds of the whole machine since boot (/proc/stat's cpu line; idle
    includes iowait), or None where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / hz, idle / hz


def children_cpu():
    """User + system CPU seconds of this script's reaped children and their reaped descendants
    (the testbed's ranks and switches: inc testbed waits for them)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_run(cmd, what, timeout):
    """run() and how the machine's CPU was spent meanwhile: wall seconds, the testbed's own CPU
    seconds (its processes, kernel work in their context included) and the machine's busy and
    idle core-seconds; busy minus the testbed's is everybody else's (other work on the machine)."""
    m0, c0, t0 = machine_cpu(), children_cpu(), time.monotonic()
    text = run(cmd, what, timeout)
    m1, c1, wall = machine_cpu(), children_cpu(), time.monotonic() - t0
    cpu = {"wall_s": wall, "testbed_cpu_s": c1 - c0}
    if m0 and m1:
        cpu.update(machine_busy_s=m1[0] - m0[0], machine_idle_s=m1[1] - m0[1])
    return text, cpu


def measure(args, shapes, sizes):
    """[{shape, algo, bytes, rate_gbps, time_s, runs, switch_cpu_s, switch_packets, drops}] from
    `inc bench` on the testbed; the switch counters (summed) and the drops (per run) are the whole
    runs' (every size), the same in each row of a shape."""
    lo, hi, f = geometric(sizes)
    out = []
    acc = {shape: {"per": {}, "cpu_s": 0.0, "packets": 0, "drops": [], "host_cpu": {}, "machine": []} for shape in shapes}
    # The shapes alternate run by run (1x8, 2x8, 1x8, 2x8, ...): the machine's drift over the
    # minutes of a measurement (two shared cores: other work, thermal state) then falls on every
    # shape alike, and the comparison between shapes is the one the validation makes.
    for _ in range(args.repeat):
        for shape in shapes:
            a = acc[shape]
            cmd = [args.inc, "testbed", "-q"] + testbed_flags(shape, args) + args.extra + [
                "--", "inc", "bench", "-c", "allreduce", "-a", ",".join(args.algos), "-b", str(lo), "-e", str(hi),
                "-f", f"{f:g}", "-n", str(args.iters), "-w", str(args.warmup), "--format", "csv",
                "--no-progress", "--interleave", "--cpu"]
            print("# running:", " ".join(cmd), file=sys.stderr, flush=True)
            text, machine = timed_run(cmd, "inc testbed", args.timeout)
            a["machine"].append(machine)
            rows = bench_rows(text)
            c, n = switch_cpu(text)
            a["cpu_s"] += c
            a["packets"] += n
            a["drops"].append(drops(text))
            if not rows:
                raise SystemExit("validate_testbed.py: no bench rows in the testbed output")
            for r in rows:
                if r.get("correct") not in ("1", "-1"):
                    raise SystemExit(f"validate_testbed.py: WRONG result: {r}")
                if r["algo"] == "inc" and r["in_network"] != "1":
                    raise SystemExit(f"validate_testbed.py: the 'inc' row ran on the hosts: {r}")
                a["per"].setdefault((r["algo"], int(r["size_bytes"])), []).append(float(r["time_us"]) * 1e-6)
                if r.get("cpu_us"):  # each rank's process CPU per call, mean over the ranks (inc bench --cpu)
                    a["host_cpu"].setdefault((r["algo"], int(r["size_bytes"])), []).append(float(r["cpu_us"]))
    for shape, a in acc.items():
        for (algo, size), runs in sorted(a["per"].items()):
            out.append({"shape": list(shape), "algo": algo, "bytes": size, "rate_gbps": args.rate,
                        "time_s": median(runs), "runs": runs, "switch_cpu_s": a["cpu_s"],
                        "switch_packets": a["packets"], "drops": a["drops"]})
            cpu = a["host_cpu"].get((algo, size))
            if cpu:  # a host's CPU per call (median of the runs) and its datagrams (Core-INC)
                out[-1].update(host_cpu_us=median(cpu), host_cpu_runs=cpu, spin_us=os.environ.get("INC_SPIN_US"),
                               machine_runs=a["machine"])
                if algo == "inc":
                    out[-1]["host_datagrams"] = host_datagrams(size, parse_size(args.inc_chunk))
    return out


def host_datagrams(size, chunk):
    """Core-INC datagrams one rank sends and receives in one Allreduce of `size` bytes: one per
    switch slot (`chunk` of payload) up, and the result's as many down."""
    return 2 * -(-size // chunk)


def spread(p):
    """Half the range of a point's testbed runs over their median (0 for one run): how far the
    measurement itself moves between runs of the same shape in the same session."""
    runs = p.get("runs") or [p["time_s"]]
    return (max(runs) - min(runs)) / 2 / p["time_s"] if len(runs) > 1 else 0.0


def load_measured(path, shapes, sizes, algos):
    with open(path) as f:
        rows = json.load(f)
    keep = [r for r in rows if tuple(r["shape"]) in shapes and r["bytes"] in sizes and r["algo"] in algos]
    if not keep:
        raise SystemExit(f"validate_testbed.py: {path} holds no measurement of these shapes, sizes and algorithms")
    return keep
