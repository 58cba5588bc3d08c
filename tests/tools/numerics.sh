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
# the host algorithms x host policies (library schedules through run_local): one row per (type,
# collective, algorithm, policy, ranks); widen gives wide's bits (every error column equal) and is
# no less accurate than narrow; the bytes each rank sends are the policies' (f16 ring, 8 ranks:
# narrow 2 x 2 x 7/8, widen 2/8 + 4 x 6/8 + 2 x 7/8, wide 4 x 2 x 7/8)
hcsv=$tmp/numerics_sweep_hosts.csv
hrows=$(($(wc -l < "$hcsv") - 1))
[ "$hrows" = 96 ] || fail "$hrows host CSV rows, want 4 types x 4 algorithms x 3 policies x 2 rank counts = 96"
awk -F, 'NR > 1 { k = $1 FS $2 FS $3 FS $5; e[k FS $4] = $6 FS $7 FS $8; n[k FS $4] = $8 }
  END { for (x in e) { split(x, p, FS); if (p[5] != "widen") continue;
          b = p[1] FS p[2] FS p[3] FS p[4] FS;
          if (e[x] != e[b "wide"]) { print "FAIL: host widen " e[x] " != wide " e[b "wide"] " for " b; exit 1 }
          if (n[x] > n[b "narrow"] * 1.0000001) { print "FAIL: host widen " n[x] " > narrow " n[b "narrow"] " for " b; exit 1 } } }' "$hcsv"
grep -q '^f16,allreduce,ring,narrow,8,.*,3.5000$' "$hcsv" || fail "f16 ring narrow bytes"$'\n'"$(grep '^f16,allreduce,ring' "$hcsv")"
grep -q '^f16,allreduce,ring,widen,8,.*,5.0000$' "$hcsv" || fail "f16 ring widen bytes"$'\n'"$(grep '^f16,allreduce,ring' "$hcsv")"
grep -q '^f16,allreduce,ring,wide,8,.*,7.0000$' "$hcsv" || fail "f16 ring wide bytes"$'\n'"$(grep '^f16,allreduce,ring' "$hcsv")"
grep -q 'host algorithms' "$tmp/out.txt" || fail "no host table on stdout"
if command -v gnuplot > /dev/null; then
  for f in numerics_hosts_error numerics_hosts_bytes; do
    head -c 4 "$tmp/$f.png" | grep -q PNG || fail "$f.png is not a PNG"
  done
  for f in numerics_error numerics_overflow; do
    head -c 4 "$tmp/$f.png" | grep -q PNG || fail "$f.png is not a PNG"
  done
fi
echo "inc numerics: examples, $rows sweep rows and $hrows host rows OK"
