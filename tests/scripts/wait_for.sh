# Sourced by the process tests: wait_for FILE REGEX WHAT waits until a line of FILE matches
# REGEX (polled every 50 ms; the 60 s deadline only bounds a hang), else prints FILE and fails.
wait_for() {
  local i
  for ((i = 0; i < 1200; ++i)); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "FAIL: no $3 after 60 s:"; cat "$1"; exit 1
}

# free_ports N prints the first of N consecutive ports of 127.0.0.1 that are free for TCP and
# UDP when probed, chosen below the kernel's ephemeral range (ip_local_port_range), so that no
# connection's source port can take them; the probe avoids the fixed ports other tests hold.
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
lo = int(open('/proc/sys/net/ipv4/ip_local_port_range').read().split()[0])
top = lo - n if lo > 12000 + n else 65535 - n
def free(p):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind(('127.0.0.1', p))
        except OSError:
            return False
        finally:
            s.close()
    return True
for _ in range(500):
    base = random.randrange(10000, top)
    if all(free(p) for p in range(base, base + n)):
        print(base)
        sys.exit(0)
sys.exit(f'no {n} consecutive free ports found')
PY
}
