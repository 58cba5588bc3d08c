#!/usr/bin/env bash
# Every shipped simulator example (examples/sim/*.toml) and model file (models/*.toml) loads and
# gives sane figures through the `inc sim` and `inc model` commands; the plots are written and
# are PNG files. (Issue 13, item 6: these files and commands were never run by a test.)
set -euo pipefail
inc=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

n=0
for f in "$src"/examples/sim/*.toml; do
  out=$("$inc" sim run -f "$f") || fail "inc sim run -f $f exited $?"
  grep -q '^makespan [0-9.]* [mu]\?s' <<<"$out" || fail "$f: no makespan line"$'\n'"$out"
  # one row per [[job]] of the file: time > 0 and a positive sim/model ratio
  rows=$(awk '$6 ~ /^(B|KiB|MiB|GiB)$/ && $7 ~ /^[0-9.]+$/ && $8 ~ /^(ns|us|ms|s)$/ {print}' <<<"$out")
  want=$(grep -c '^\[\[job' "$f")
  got=$(grep -c . <<<"$rows" || true)
  [ "$got" = "$want" ] || fail "$f: $got job rows, the file has $want jobs"$'\n'"$out"
  awk -v f="$f" '{ if (!($7 > 0) || !($13 > 0)) { print "FAIL: " f ": time " $7 ", sim/model " $13 " in: " $0; exit 1 } }' <<<"$rows"
  n=$((n + 1))
done
echo "examples/sim: $n files simulated"

m=0
for f in "$src"/models/*.toml; do
  out=$("$inc" model iteration -f "$f" --json "$tmp/it.json") || fail "inc model iteration -f $f exited $?"
  host=$(sed -n 's/^iteration with host collectives: *\([0-9.]*\) \(m\?s\).*/\1 \2/p' <<<"$out")
  inc_t=$(sed -n 's/^iteration with Core-INC: *\([0-9.]*\) \(m\?s\).*/\1 \2/p' <<<"$out")
  [ -n "$host" ] && [ -n "$inc_t" ] || fail "$f: no iteration times"$'\n'"$out"
  python3 - "$f" "$host" "$inc_t" "$tmp/it.json" <<'PY' || exit 1
import json, sys
f, host, inc, js = sys.argv[1:]
def sec(s):
    v, u = s.split()
    return float(v) * (1e-3 if u == "ms" else 1.0)
h, i = sec(host), sec(inc)
if not (0 < i <= h):
    sys.exit(f"FAIL: {f}: iteration with Core-INC {i} s, with host collectives {h} s")
json.load(open(js))  # valid JSON
PY
  m=$((m + 1))
done
echo "models: $m files modelled"

"$inc" model paper-figure5 -o "$tmp/fig5" >/dev/null || fail "inc model paper-figure5 exited $?"
for p in figure5-gain.png figure5-iteration.png; do
  [ "$(head -c 8 "$tmp/fig5/$p" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$p is not a PNG"
done
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d, 'empty'" "$tmp/fig5/figure5.json" ||
  fail "figure5.json"
echo "paper-figure5: PNG plots and JSON written"
echo "OK"
