#!/usr/bin/env bash
# The README's second command (and CI's): install what is missing, build with warnings as
# errors, run the whole test suite, fuzz every parser for a few seconds (scripts/fuzz.sh),
# then rebuild the unit tests and a reduced set of the multi-process tests (label asan_mp)
# with ASan+UBSan and run them.
set -euo pipefail
cd "$(dirname "$0")/.."
stage_start=$SECONDS
stage() {
  echo "== [$((SECONDS - stage_start)) s since start] $*"
}
stage "dependencies"
scripts/install-deps.sh
jobs=$(nproc)
# ccache when there is one (a second run, or a clone at another path: base_dir makes its
# entries path-independent). Each stage prints the time since the start: CI's budget is 25 minutes.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
stage "release build (-Werror)"
# INC_TORCH=ON: the PyTorch backend (python/) is built and tested, never skipped silently.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DINC_WERROR=ON -DINC_TORCH=ON "${launcher[@]}" >/dev/null
cmake --build build -j"$jobs"
stage "test suite"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600)
stage "coverage-guided fuzzing of the parsers (clang, a few seconds per target)"
scripts/fuzz.sh
stage "ASan+UBSan build of the unit tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINC_WERROR=ON -DINC_SANITIZE=ON \
  "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$jobs" --target unit_tests
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && ctest --output-on-failure -j"$jobs" -L unit --timeout 600)
stage "ASan+UBSan: multi-process tests (real processes and switch daemons, label asan_mp)"
cmake --build build-asan -j"$jobs" --target asan_mp_tests
(cd build-asan && ctest --output-on-failure -j"$jobs" -L asan_mp --timeout 600)
stage "done"
