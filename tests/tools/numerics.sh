#!/usr/bin/env bash
# `inc numerics` (issue 9): the paper's int4 examples give the paper's numbers under each policy,
# and the sweep writes one CSV row per (type, policy, members, shape) with widen as accurate as
# wide and never less accurate than narrow for floats, and the plots as PNG files.
set -euo pipefail
inc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

ex=$("$inc" numerics examples) || fail "inc numerics examples exited $?"
grep -Eq 'narrow, wrap-around +7, 2, 7, -4, -7, 2 +2 +2 ' <<<"$ex" || fail "wrap-around sum trace"$'\n'"$ex"
grep -Eq 'narrow, saturating +7, 2, 7, 7, 4, -3 +1 +-3 +WRONG' <<<"$ex" || fail "saturating sum trace"$'\n'"$ex"
grep -Eq 'products 2, 4, -4 +/2 = +-2 +WRONG' <<<"$ex" || fail "2*2*3/2 wrap-around is not -2"$'\n'"$ex"
grep -Eq 'products 2, 4, 12 +/2 = +6 +right' <<<"$ex" || fail "2*2*3/2 wide is not 6"$'\n'"$ex"

"$inc" numerics sweep --members 2,8 --elements 512 --out "$tmp" > "$tmp/out.txt" || fail "sweep exited $?"
csv=$tmp/numerics_sweep.csv
rows=$(($(wc -l < "$csv") - 1))
[ "$rows" = 108 ] || fail "$rows CSV rows, want 6 types x 3 policies x 2 member counts x 3 shapes = 108"
# floats: widen's mean error equals wide's (same single rounding) and is at most narrow's
awk -F, 'NR > 1 && $1 ~ /^(f16|bf16|e4m3|e5m2)$/ { e[$1 FS $3 FS $4 FS $2] = $5 }
  END { for (k in e) { split(k, p, FS); if (p[4] != "widen") continue;
          b = p[1] FS p[2] FS p[3] FS;
          if (e[k] != e[b "wide"]) { print "FAIL: widen " e[k] " != wide " e[b "wide"] " for " b; exit 1 }
          if (e[k] > e[b "narrow"] * 1.0000001) { print "FAIL: widen " e[k] " > narrow " e[b "narrow"] " for " b; exit 1 } } }' "$csv"
# bytes: i4 narrow on one switch is 0.5 B/element per member, wide 4
grep -q '^i4,narrow,8,flat,.*,0.5000$' "$csv" || fail "i4 narrow flat bytes"$'\n'"$(grep '^i4' "$csv")"
grep -q '^i4,wide,8,flat,.*,4.0000$' "$csv" || fail "i4 wide flat bytes"
if command -v gnuplot > /dev/null; then
  for f in numerics_error numerics_overflow; do
    head -c 4 "$tmp/$f.png" | grep -q PNG || fail "$f.png is not a PNG"
  done
fi
echo "inc numerics: examples and $rows sweep rows OK"
