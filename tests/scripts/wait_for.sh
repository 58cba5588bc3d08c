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

# serve_on_free_ports N LOG READY START: runs the script's function START in the background
# (START execs its command, so that its PID is $sw; output in LOG) with $base the first of N
# ports free now (free_ports), until a line of LOG matches READY. Another test may take those
# ports in between: a START that exits saying a port is "in use" is tried again on other ports
# (5 times at most).
# Returns 1 (LOG kept, $sw empty) if it never served: any other failure is not retried.
serve_on_free_ports() {
  local n=$1 log=$2 ready=$3 start=$4 attempt i
  for attempt in 1 2 3 4 5; do
    base=$(free_ports "$n") || { echo "FAIL: no free ports"; exit 1; }
    $start >"$log" 2>&1 &
    sw=$!
    for ((i = 0; i < 1200; ++i)); do
      grep -qE "$ready" "$log" && return 0
      kill -0 $sw 2>/dev/null || break
      sleep 0.05
    done
    grep -qE "$ready" "$log" && return 0
    kill -9 $sw 2>/dev/null
    wait $sw 2>/dev/null
    sw=
    grep -q "in use" "$log" || return 1
  done
  return 1
}
