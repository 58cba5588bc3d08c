#!/usr/bin/env bash
# INC's host allreduce against Gloo and Open MPI, side by side on this machine (issue 2;
# docs/PEERS.md). Same rank count, sizes, data type (f32), op (sum), methodology (verified run,
# warm-up, timed back-to-back runs, slowest rank's mean) and CSV columns for all three:
#
#   INC   inc launch -n N -- inc bench -c allreduce -a ring,recursive_doubling,rabenseifner ...
#         and, separately, -a auto (the CSV names the algorithm auto picked, so it runs alone)
#   Gloo  bench/peers/inc_gloo_allreduce (forks N ranks, FileStore rendezvous, TCP on 127.0.0.1)
#   MPI   mpirun --mca btl tcp,self [--mca btl_tcp_if_include lo] -np N inc_mpi_allreduce
#
# Each is run --reps times, interleaved (INC, Gloo, MPI, INC, ...) so slow phases of a noisy
# machine hit all three; the table uses the median per size and algorithm. Raw CSVs, the table
# and the medians go to <results>/peers-<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

usage() {
  cat <<'EOF'
usage: scripts/compare-peers.sh [options]

  --build-dir DIR     CMake build directory (configured if needed)          [build]
  --no-build          do not (re)build the three drivers
  --results DIR       where to save raw CSVs, medians and the table         [bench/results]
  -n, --ranks N       ranks for every implementation                        [8]
  -b, --min-bytes S   smallest size (K/M/G suffixes)                         [8]
  -e, --max-bytes S   largest size; always measured even if the factor
                      steps over it (8 B * 4^k never lands on 64M)           [64M]
  -f, --factor F      size factor (2 or 4)                                   [4]
  --reps R            repetitions of each implementation (median taken)     [3]
  --split S           sizes >= S use the "large" iteration counts            [512K]
  --iters N / --warmup N              timed / warm-up runs below --split     [20 / 5]
  --large-iters N / --large-warmup N  timed / warm-up runs from --split on   [3 / 1]
  --inc-algos LIST    INC host algorithms besides auto   [ring,recursive_doubling,rabenseifner]
  --gloo-algos LIST   Gloo algorithms (ring,ring_chunked,halving_doubling,bcube,allreduce)
                                                       [ring,ring_chunked,halving_doubling,bcube]
  --mpi-if IF         btl_tcp_if_include for Open MPI ("" = do not set it)   [lo]
  --mpirun-args "..." extra mpirun arguments (e.g. "--mca coll_tuned_use_dynamic_rules 1 ...")
  --skip LIST         skip some of: inc,gloo,mpi
  --timeout S         limit for each single run                             [600]
  --report DIR        only print the table again from the CSVs of an earlier run (DIR =
                      <results>/peers-<timestamp>); nothing is built or run
  -h, --help          this text

Prints, per size: INC's best host algorithm and its median time, INC auto's time, Gloo's best
algorithm and time, MPI's time, INC/min(peers), INC/Gloo, INC/MPI; then the sizes where INC is
within 1.2x of the faster peer and whether INC beats both at the smallest size.
EOF
}

BUILD=build
DO_BUILD=1
RESULTS=bench/results
N=8
MINB=8
MAXB=64M
FACTOR=4
REPS=3
SPLIT=512K
ITERS=20
WARMUP=5
LITERS=3
LWARMUP=1
INC_ALGOS=ring,recursive_doubling,rabenseifner
GLOO_ALGOS=ring,ring_chunked,halving_doubling,bcube
MPI_IF=lo
MPIRUN_ARGS=""
SKIP=""
TIMEOUT=600
REPORT=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD=$2; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    --results) RESULTS=$2; shift 2 ;;
    -n|--ranks) N=$2; shift 2 ;;
    -b|--min-bytes) MINB=$2; shift 2 ;;
    -e|--max-bytes) MAXB=$2; shift 2 ;;
    -f|--factor) FACTOR=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --split) SPLIT=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --large-iters) LITERS=$2; shift 2 ;;
    --large-warmup) LWARMUP=$2; shift 2 ;;
    --inc-algos) INC_ALGOS=$2; shift 2 ;;
    --gloo-algos) GLOO_ALGOS=$2; shift 2 ;;
    --mpi-if) MPI_IF=$2; shift 2 ;;
    --mpirun-args) MPIRUN_ARGS=$2; shift 2 ;;
    --skip) SKIP=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --report) REPORT=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare-peers: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

skipped() { [[ ",$SKIP," == *",$1,"* ]]; }

# --- medians and the table --------------------------------------------------------------------
report() {  # report DIR: medians.csv and table.txt from DIR's raw CSVs
python3 - "$1" <<'PY' | tee "$1/table.txt"
import csv, glob, os, statistics, sys
out = sys.argv[1]
times = {}    # (impl, algo, size) -> [us per rep]
wrong = []
for path in sorted(glob.glob(os.path.join(out, "*_rep*.csv"))):
    impl = os.path.basename(path).split("_rep")[0]
    with open(path) as fh:
        for row in csv.DictReader(fh):
            key = (impl, row["algo"], int(row["size_bytes"]))
            times.setdefault(key, []).append(float(row["time_us"]))
            if row["correct"] != "1":
                wrong.append(f"{impl} {row['algo']} {row['size_bytes']} B ({os.path.basename(path)})")
med = {k: statistics.median(v) for k, v in times.items()}
sizes = sorted({k[2] for k in times})
with open(os.path.join(out, "medians.csv"), "w") as fh:
    fh.write("impl,algo,size_bytes,median_us,reps,all_us\n")
    for (impl, algo, size), v in sorted(times.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        fh.write(f"{impl},{algo},{size},{med[(impl, algo, size)]:.3f},{len(v)},{' '.join(f'{x:.3f}' for x in v)}\n")

def best(impl, size, pred=lambda a: True):
    c = [(t, a) for (i, a, s), t in med.items() if i == impl and s == size and pred(a)]
    return min(c) if c else (None, None)

def human(b):
    for unit, sh in (("G", 30), ("M", 20), ("K", 10)):
        if b >= 1 << sh and b % (1 << sh) == 0:
            return f"{b >> sh}{unit}"
    return f"{b}"

def us(t):
    if t is None: return "-"
    return f"{t:.0f}" if t >= 100 else f"{t:.1f}"

def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"

print("allreduce f32 sum; each cell: median over repetitions of a run's mean time per call (us). "
      "INC best = its fastest host algorithm at that size; INC auto = what -a auto picked; "
      "Gloo = its fastest algorithm; MPI = Open MPI's own choice (coll/tuned).")
hdr = f"{'size':>6} | {'INC best':>18} {'us':>9} | {'INC auto':>9} | {'Gloo best':>17} {'us':>9} | {'MPI us':>9} | {'INC/min':>7} {'INC/Gloo':>8} {'INC/MPI':>7}"
print(hdr)
print("-" * len(hdr))
within, rows = [], []
for s in sizes:
    it, ia = best("inc", s, lambda a: not a.startswith("auto:"))
    at, aa = best("inc", s, lambda a: a.startswith("auto:"))
    gt, ga = best("gloo", s)
    mt, _ = best("mpi", s)
    peers = [t for t in (gt, mt) if t is not None]
    pmin = min(peers) if peers else None
    print(f"{human(s):>6} | {ia or '-':>18} {us(it):>9} | {us(at):>9} | {(ga or '-'):>17} {us(gt):>9} | {us(mt):>9} | "
          f"{ratio(it, pmin):>7} {ratio(it, gt):>8} {ratio(it, mt):>7}")
    rows.append((s, it, ia, at, aa, gt, ga, mt, pmin))
    if it is not None and pmin and it <= 1.2 * pmin:
        within.append(human(s))
print()
print("INC (best host algorithm) within 1.2x of the faster peer at: " + (", ".join(within) if within else "no size"))
auto_within = [human(r[0]) for r in rows if r[3] is not None and r[8] and r[3] <= 1.2 * r[8]]
print("INC auto within 1.2x of the faster peer at: " + (", ".join(auto_within) if auto_within else "no size"))
s0 = rows[0]
if s0[1] is not None and s0[5] is not None and s0[7] is not None:
    def beats(t):
        return "-" if t is None else ("yes" if t < s0[5] and t < s0[7] else "no")
    print(f"At {human(s0[0])} B (smallest size) INC beats both peers: best algorithm {beats(s0[1])} "
          f"({us(s0[1])} us, {s0[2]}), auto {beats(s0[3])} ({us(s0[3])} us, {s0[4]}); "
          f"Gloo {us(s0[5])} us ({s0[6]}), MPI {us(s0[7])} us")
spread = []
for (impl, algo, size), v in times.items():
    if len(v) > 1 and min(v) > 0:
        spread.append(max(v) / min(v))
if spread:
    spread.sort()
    print(f"noise: max/min over repetitions of one (impl, algo, size): median {statistics.median(spread):.2f}x, worst {spread[-1]:.2f}x")
print("verification: " + ("every run correct" if not wrong else "WRONG results: " + "; ".join(wrong)))
fail = os.path.join(out, "failures.txt")
if os.path.exists(fail):
    lines = [l.strip() for l in open(fail) if l.strip()]
    print(f"FAILED runs: {len(lines)} (rows a failed run did not print are missing from the medians; "
          f"fewer than the intended repetitions in medians.csv):")
    for l in lines:
        print("  " + l)
else:
    print("failed runs: none")
PY
}

if [[ -n "$REPORT" ]]; then
  [[ -d "$REPORT" ]] || { echo "compare-peers: no directory $REPORT" >&2; exit 2; }
  report "$REPORT"
  exit 0
fi

# --- sizes: the geometric sweep, split into runs that `-b -e -f` can express -----------------
to_bytes() {
  local s=$1 m=1
  case "$s" in
    *K|*k) m=1024; s=${s%?} ;;
    *M|*m) m=$((1024 * 1024)); s=${s%?} ;;
    *G|*g) m=$((1024 * 1024 * 1024)); s=${s%?} ;;
  esac
  [[ "$s" =~ ^[0-9]+$ ]] || { echo "compare-peers: bad size $1" >&2; exit 2; }
  echo $((s * m))
}
[[ "$FACTOR" =~ ^[0-9]+$ && "$FACTOR" -ge 2 ]] || { echo "compare-peers: --factor must be an integer >= 2" >&2; exit 2; }
minb=$(to_bytes "$MINB"); maxb=$(to_bytes "$MAXB"); split=$(to_bytes "$SPLIT")
(( minb >= 4 && maxb >= minb )) || { echo "compare-peers: need 4 <= min-bytes <= max-bytes" >&2; exit 2; }
sizes=()
for ((s = minb; s <= maxb; s *= FACTOR)); do sizes+=("$s"); done
(( ${sizes[-1]} == maxb )) || sizes+=("$maxb")
# A "sweep" is: first last factor iters warmup (one invocation of each driver).
sweeps=()
small=() large=()
for s in "${sizes[@]}"; do if (( s < split )); then small+=("$s"); else large+=("$s"); fi; done
add_geometric() {  # a list of sizes -> sweeps, breaking where the factor does not hold
  local it=$1 wu=$2; shift 2
  local first="" prev=""
  for s in "$@"; do
    if [[ -z "$first" ]]; then first=$s
    elif (( s != prev * FACTOR )); then sweeps+=("$first $prev $FACTOR $it $wu"); first=$s
    fi
    prev=$s
  done
  [[ -z "$first" ]] || sweeps+=("$first $prev $FACTOR $it $wu")
}
add_geometric "$ITERS" "$WARMUP" "${small[@]}"
add_geometric "$LITERS" "$LWARMUP" "${large[@]}"

# --- build ------------------------------------------------------------------------------------
INC="$BUILD/tools/inc"
GLOO="$BUILD/bench/peers/inc_gloo_allreduce"
MPI="$BUILD/bench/peers/inc_mpi_allreduce"
if (( DO_BUILD )); then
  if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  targets=(inc_tool)
  skipped gloo || targets+=(inc_gloo_allreduce)
  skipped mpi || targets+=(inc_mpi_allreduce)
  echo "== building ${targets[*]} in $BUILD" >&2
  cmake --build "$BUILD" --target "${targets[@]}" -j"$(nproc)" >&2
fi
for b in "$INC" $(skipped gloo || echo "$GLOO") $(skipped mpi || echo "$MPI"); do
  [[ -x "$b" ]] || { echo "compare-peers: $b is missing (build it, or --skip that peer)" >&2; exit 1; }
done
if ! skipped mpi; then command -v mpirun >/dev/null || { echo "compare-peers: mpirun not found (apt install openmpi-bin)" >&2; exit 1; }; fi

# `inc launch` if this build has it; otherwise a minimal launcher with the same environment.
have_inc_launch=0
"$INC" launch --help >/dev/null 2>&1 && have_inc_launch=1
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
launch_inc() {  # launch_inc prog args...  (rank 0's stdout on ours)
  if (( have_inc_launch )); then
    timeout "$TIMEOUT" "$INC" launch -n "$N" --no-prefix -- "$@"
    return
  fi
  local port pids=() r rc=0
  port=$(free_port)
  for ((r = 0; r < N; r++)); do
    if (( r == 0 )); then
      INC_RANK=$r INC_WORLD_SIZE=$N INC_LOCAL_RANK=$r INC_LOCAL_SIZE=$N INC_STORE=127.0.0.1:$port \
        timeout "$TIMEOUT" "$@" &
    else
      INC_RANK=$r INC_WORLD_SIZE=$N INC_LOCAL_RANK=$r INC_LOCAL_SIZE=$N INC_STORE=127.0.0.1:$port \
        timeout "$TIMEOUT" "$@" >/dev/null &
    fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

STAMP=$(date +%Y%m%d-%H%M%S)
OUT="$RESULTS/peers-$STAMP"
mkdir -p "$OUT"
{
  echo "date: $(date -Iseconds)"
  echo "host: $(uname -n) $(uname -r); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "inc: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)'); launcher: $( ((have_inc_launch)) && echo 'inc launch' || echo 'shell')"
  echo "gloo: $(dpkg-query -W -f '${Version}' libgloo-dev 2>/dev/null || echo '?'); open mpi: $(mpirun --version 2>/dev/null | head -1 || echo '?')"
  echo "ranks $N; sizes ${sizes[*]}; reps $REPS"
  for s in "${sweeps[@]}"; do echo "sweep (first last factor iters warmup): $s"; done
} > "$OUT/setup.txt"
cat "$OUT/setup.txt" >&2

# Each run writes its CSV rows (header stripped) to a file; failures are reported and kept.
run_to() {  # run_to file cmd...
  local f=$1; shift
  local tmp="$f.part"
  echo "   $*" >> "$OUT/commands.txt"
  if "$@" > "$tmp" 2> "$f.stderr"; then :; else
    local rc=$?
    echo "compare-peers: failed (exit $rc): $* -- see $f.stderr" >&2
    echo "$(basename "$f") exit $rc: $* (stderr: $(basename "$f").stderr)" >> "$OUT/failures.txt"
  fi
  grep -E '^allreduce,' "$tmp" >> "$f" || true
  rm -f "$tmp"
  [[ -s "$f.stderr" ]] || rm -f "$f.stderr"
}

echo "# launch_inc = $( ((have_inc_launch)) && echo "$INC launch -n $N --no-prefix --" || echo "shell launcher, $N ranks") (each with timeout $TIMEOUT s)" > "$OUT/commands.txt"
HEADER="collective,size_bytes,count,dtype,op,algo,in_network,ranks,time_us,algbw_GBps,busbw_GBps,correct"
# shellcheck disable=SC2054  # "tcp,self" is one argument
mpi_cmd=(mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self)
[[ -z "$MPI_IF" ]] || mpi_cmd+=(--mca btl_tcp_if_include "$MPI_IF")
# shellcheck disable=SC2206
[[ -z "$MPIRUN_ARGS" ]] || mpi_cmd+=($MPIRUN_ARGS)
mpi_cmd+=(-np "$N")

t_start=$SECONDS
for ((rep = 1; rep <= REPS; rep++)); do
  for impl in inc gloo mpi; do
    skipped "$impl" && continue
    f="$OUT/${impl}_rep$rep.csv"
    echo "$HEADER" > "$f"
    echo "== rep $rep/$REPS: $impl ($((SECONDS - t_start)) s so far)" >&2
    for sw in "${sweeps[@]}"; do
      read -r b e fa it wu <<< "$sw"
      case $impl in
        inc)
          common=(-c allreduce -d f32 -o sum -b "$b" -e "$e" -f "$fa" -n "$it" -w "$wu" --format csv --no-progress)
          run_to "$f" launch_inc "$INC" bench "${common[@]}" -a "$INC_ALGOS"
          # auto names the algorithm it picked; tag its rows "auto:<picked>".
          g="$OUT/inc_auto_rep$rep.part.csv"
          run_to "$g" launch_inc "$INC" bench "${common[@]}" -a auto
          [[ ! -f "$g" ]] || { awk -F, 'BEGIN{OFS=","} {$6="auto:"$6; print}' "$g" >> "$f"; rm -f "$g"; }
          ;;
        gloo)
          run_to "$f" timeout "$TIMEOUT" "$GLOO" -n "$N" -a "$GLOO_ALGOS" -b "$b" -e "$e" -f "$fa" -i "$it" -w "$wu" --no-header
          ;;
        mpi)
          run_to "$f" timeout "$TIMEOUT" "${mpi_cmd[@]}" "$MPI" -b "$b" -e "$e" -f "$fa" -i "$it" -w "$wu" --no-header
          ;;
      esac
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); total $((SECONDS - t_start)) s of runs" >> "$OUT/setup.txt"

report "$OUT"
echo "raw CSVs, medians.csv, table.txt, setup.txt, commands.txt: $OUT" >&2
