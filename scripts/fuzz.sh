#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of untrusted input (fuzz/, docs/TESTING.md "Fuzzing").
#   scripts/fuzz.sh                 CI: build the libFuzzer targets (clang, build-fuzz/), run each
#                                   for FUZZ_SECONDS (5) from its committed corpus; any crash,
#                                   invariant failure, leak or timeout fails.
#   scripts/fuzz.sh --grow SECONDS  run each target longer, then merge (minimise) what it found
#                                   into fuzz/corpus/<target> (commit the result).
#   FUZZ_TARGETS="tuning_json sim_model" restricts either mode to some targets.
# New inputs of a CI run go to build-fuzz/fuzz-new/<target>, crashes to build-fuzz/fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
grow=0
if [[ ${1:-} == --grow ]]; then grow=${2:?--grow SECONDS}; fi
seconds=${FUZZ_SECONDS:-5}
jobs=$(nproc)
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
echo "== fuzz build (clang, libFuzzer + ASan + UBSan)"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DINC_FUZZ=ON -DINC_BUILD_BENCH=OFF \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_targets
targets=${FUZZ_TARGETS:-$(sed -n 's/^set(INC_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/targets.cmake)}
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p build-fuzz/fuzz-artifacts
failed=()
for t in $targets; do
  corpus=fuzz/corpus/$t
  mkdir -p "$corpus"
  new=build-fuzz/fuzz-new/$t
  rm -rf "$new" && mkdir -p "$new"
  run_for=$seconds
  ((grow)) && run_for=$grow
  # -timeout: one input may take at most 10 s (a hang is a finding); 2 GB of memory at most.
  if ! build-fuzz/fuzz/${t}_fuzz -max_total_time="$run_for" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix=build-fuzz/fuzz-artifacts/"$t"- \
      "$new" "$corpus" >build-fuzz/fuzz-"$t".log 2>&1; then
    echo "FAIL: $t (build-fuzz/fuzz-$t.log):"
    grep -E "ERROR|invariant|SUMMARY|Test unit written|deadly signal|timeout" build-fuzz/fuzz-"$t".log | head -20
    failed+=("$t")
    continue
  fi
  stats=$(grep -E "^stat::number_of_executed_units" build-fuzz/fuzz-"$t".log | awk '{print $2}')
  cov=$(grep -oE "cov: [0-9]+" build-fuzz/fuzz-"$t".log | tail -1)
  echo "ok: $t: ${stats:-?} inputs in ${run_for} s, $cov, corpus $(ls "$corpus" | wc -l) + $(ls "$new" | wc -l) new"
  if ((grow)); then
    merged=build-fuzz/fuzz-merged/$t
    rm -rf "$merged" && mkdir -p "$merged"
    # Keep one input per new edge (-use_counters=0: hit counts do not count as new), which
    # keeps the corpus at a few hundred files with the coverage of all of them.
    build-fuzz/fuzz/${t}_fuzz -merge=1 -use_counters=0 -timeout=10 -rss_limit_mb=2048 "$merged" "$corpus" "$new" \
      >build-fuzz/fuzz-merge-"$t".log 2>&1
    rm -rf "$corpus" && mkdir -p "$corpus" && cp "$merged"/* "$corpus"/
    echo "   merged into $corpus: $(ls "$corpus" | wc -l) files, $(cat "$corpus"/* | wc -c) bytes"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]} (reproduce: build-fuzz/fuzz/<target>_fuzz build-fuzz/fuzz-artifacts/<file>)"
  exit 1
fi
echo "fuzz: all targets passed"
