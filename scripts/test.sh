#!/usr/bin/env bash
# The whole test suite, on a fresh machine: provisions what the tests need, then
# runs every test of the workspace. Prints the time of each phase.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

phase_start=$SECONDS
phase() {
  local now=$SECONDS
  printf '[test.sh] %-40s %4ds\n' "$1" "$((now - phase_start))"
  phase_start=$now
}

cargo build --workspace --all-targets --locked
phase "build"

cargo test --workspace --locked --no-fail-fast 2>&1 | tee "${TERN_TEST_LOG:-/tmp/tern-test.log}"
phase "cargo test --workspace"
