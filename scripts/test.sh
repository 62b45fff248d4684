#!/usr/bin/env bash
# The whole test suite, on a fresh machine: provisions what the tests need, then
# runs every test of the workspace, then sums up the battery per backend
# (passed, and skipped with the reason). Prints the time of each phase.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

phase_start=$SECONDS
phase() {
  local now=$SECONDS
  printf '[test.sh] %-40s %4ds\n' "$1" "$((now - phase_start))"
  phase_start=$now
}

export TERN_BATTERY_DIR="${TERN_BATTERY_DIR:-$repo/target/battery}"
rm -rf "$TERN_BATTERY_DIR"
mkdir -p "$TERN_BATTERY_DIR"

cargo build --workspace --all-targets --locked
phase "build"

shopt -s nullglob
status=0
cargo test --workspace --locked --no-fail-fast || status=$?
phase "cargo test --workspace"

echo "[test.sh] battery per backend (from $TERN_BATTERY_DIR):"
awk -F'\t' '
  $1 == "BATTERY" {
    if ($4 == "passed") passed[$2]++; else { skipped[$2]++; reason[$2] = $4 }
    seen[$2] = 1
  }
  END {
    for (b in seen)
      printf "  %-16s %3d passed, %3d skipped%s\n", b, passed[b] + 0, skipped[b] + 0,
        (skipped[b] ? "  (" reason[b] ")" : "")
  }' /dev/null "$TERN_BATTERY_DIR"/* | sort
exit "$status"
