#!/usr/bin/env python3
"""Does the in-network path share a link fairly with TCP?

On `inc testbed` (8 hosts, one switch, host links shaped both ways), runs a long series of
Allreduces through the switch while one TCP flow (another job's traffic) goes from host 1 to
host 0: it shares host 1's uplink with host 1's contributions and host 0's downlink with the
switch's results to host 0. Prints each one's share of the link, against each alone.

  python3 bench/testbed/fairness.py --inc build/tools/inc --link 1gbit --size 16M --iters 40

Needs root. The TCP flow is Linux's default congestion control (cubic), one connection.
"""
import argparse
import os
import re
import subprocess
import sys
import time

PORT = 29999
RECEIVER = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", %d)); s.listen(1)
c, _ = s.accept()
buf = bytearray(1 << 20); total = 0; t0 = time.monotonic(); last = t0
while True:
    try:
        n = c.recv_into(buf)
    except OSError:
        break
    if n == 0: break
    total += n
    now = time.monotonic()
    if now - last >= 0.1:
        print(f"{now:.3f} {total}", flush=True); last = now
print(f"{time.monotonic():.3f} {total}", flush=True)
""" % PORT
SENDER = r"""
import socket, sys, time
end = time.monotonic() + float(sys.argv[2])
for _ in range(100):
    try:
        c = socket.create_connection((sys.argv[1], %d)); break
    except OSError: time.sleep(0.05)
buf = b"x" * (1 << 20)
try:
    while time.monotonic() < end: c.sendall(buf)
    c.close()
except OSError:
    pass  # the testbed removed the receiver's host

""" % PORT


def wait_netns(prefix, pid, roles, timeout=30):
    names = [f"{prefix}-{pid}-{r}" for r in roles]
    t = time.time() + timeout
    while time.time() < t:
        have = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        if all(n in have for n in names):
            # the links come up after the namespaces: wait for the host address
            out = subprocess.run(["ip", "-n", names[0], "-o", "addr"], capture_output=True, text=True).stdout
            if "10.99." in out:
                return names
        time.sleep(0.05)
    raise SystemExit("fairness.py: the testbed's namespaces did not appear")


def run_testbed(args, bench, tcp_seconds):
    """Starts the testbed; if tcp_seconds, a TCP flow h1 -> h0 once the hosts exist. Returns
    (testbed output, [(t, bytes)] of the receiver, (t_start, t_end) of the testbed)."""
    cmd = [args.inc, "testbed", "-q", "--no-counters", "--hosts", str(args.hosts), "--link", args.link,
           "--prefix", "incfair"] + (["--no-switch"] if bench is None else [])
    cmd += ["--"] + (["inc", "bench"] + bench if bench else ["sleep", str(tcp_seconds)])
    t0 = time.monotonic()
    tb = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples, rx = [], None
    if tcp_seconds:
        h0, h1 = wait_netns("incfair", tb.pid, ["h0", "h1"])
        rx = subprocess.Popen(["ip", "netns", "exec", h0, sys.executable, "-c", RECEIVER],
                              stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)
        tx = subprocess.Popen(["ip", "netns", "exec", h1, sys.executable, "-c", SENDER, "10.99.1.1",
                               str(tcp_seconds)])
    out = tb.communicate(timeout=args.timeout)[0]
    t1 = time.monotonic()
    if tb.returncode != 0:
        sys.stderr.write(out[-3000:])
        raise SystemExit(f"fairness.py: the testbed failed (exit {tb.returncode})")
    if rx:
        tx.wait(timeout=60)
        for line in rx.communicate(timeout=60)[0].splitlines():
            t, b = line.split()
            samples.append((float(t), int(b)))
    return out, samples, (t0, t1)


def bench_time_us(out):
    m = re.search(r"\[h0 r0\]\s+allreduce\s+\d+\s+\d+\s+\S+\s+\S+\s+(\S+)\s+([0-9.]+)", out)
    if not m:
        raise SystemExit("fairness.py: no bench row:\n" + out[-2000:])
    return m.group(1), float(m.group(2))


def rate(samples, lo, hi):
    """TCP goodput (bits/s) between monotonic times lo and hi."""
    pts = [(t, b) for t, b in samples if lo <= t <= hi]
    if len(pts) < 2:
        return 0.0
    return 8 * (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inc", default="build/tools/inc")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--size", default="16M")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--algo", default="inc", help="the job's path: inc, or a host algorithm to compare")
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    args.inc = os.path.abspath(args.inc)
    link_bps = float(re.match(r"([0-9.]+)", args.link).group(1)) * (1e9 if "g" in args.link else 1e6)
    size = int(re.match(r"(\d+)", args.size).group(1)) << (20 if args.size.endswith("M") else 10 if args.size.endswith("K") else 0)
    bench = ["-c", "allreduce", "-a", args.algo, "-b", args.size, "-e", args.size, "-n", str(args.iters),
             "-w", "2", "--check", "0", "--no-progress"]
    # Bytes each host puts on its uplink per call: the vector once through the switch, 2(p-1)/p
    # times around a ring.
    p = args.hosts
    per_call = size if args.algo == "inc" else 2 * (p - 1) / p * size

    out, _, _ = run_testbed(args, bench, 0)
    algo, alone_us = bench_time_us(out)
    _, tcp_alone, (a0, a1) = run_testbed(args, None, 6)
    tcp_alone_bps = rate(tcp_alone, a0 + 2, a1 - 1)
    # Together: the TCP flow runs longer than the job; its rate is taken while the job runs.
    est = (alone_us * 1e-6 * 2.5) * (args.iters + 2) + 10
    out, tcp, (t0, t1) = run_testbed(args, bench, est)
    algo2, shared_us = bench_time_us(out)
    job_lo, job_hi = t0 + 2.5, t1 - 1.0  # the testbed's setup and teardown take about this
    tcp_shared_bps = rate(tcp, job_lo, job_hi)
    job_alone_bps = 8 * per_call / (alone_us * 1e-6)
    job_shared_bps = 8 * per_call / (shared_us * 1e-6)
    print(f"# {p} hosts, {args.link} links shaped both ways; Allreduce {args.size} x {args.iters} ({algo}) "
          f"while one TCP flow goes host 1 -> host 0")
    print(f"  job alone:      {alone_us / 1e3:8.1f} ms per call = {job_alone_bps / 1e6:7.1f} Mb/s on each host link "
          f"({100 * job_alone_bps / link_bps:.0f}% of the link)")
    print(f"  TCP alone:      {tcp_alone_bps / 1e6:7.1f} Mb/s ({100 * tcp_alone_bps / link_bps:.0f}%)")
    print(f"  together: job   {shared_us / 1e3:8.1f} ms per call = {job_shared_bps / 1e6:7.1f} Mb/s "
          f"({100 * job_shared_bps / link_bps:.0f}% of host 1's uplink)")
    print(f"            TCP   {tcp_shared_bps / 1e6:7.1f} Mb/s ({100 * tcp_shared_bps / link_bps:.0f}%)")
    share = job_shared_bps / max(1.0, job_shared_bps + tcp_shared_bps)
    print(f"  shares of the contended link: job {100 * share:.0f}%, TCP {100 * (1 - share):.0f}% "
          f"(sum {100 * (job_shared_bps + tcp_shared_bps) / link_bps:.0f}% of the link)")


if __name__ == "__main__":
    main()
