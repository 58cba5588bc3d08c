#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job
# (a local INC job of 8 ranks running every collective, results verified).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target inc_tool
exec build/tools/inc demo "$@"
