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
