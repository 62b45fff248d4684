#!/usr/bin/env bash
# The whole test suite, on a fresh machine: provisions what the tests need, then
# runs every test of the workspace, then sums up the battery per backend
# (passed, and skipped with the reason). Prints the time of each phase.
#
# Environment: TERN_KEEP_SERVERS (set: leave the servers running at the end),
# TERN_TEST_HANG_MINUTES (a test running longer is reported hung, default 20),
# TERN_SKIP_CONTAINERS (set: do not build the Redis image; the container battery skips).
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

# Servers: redis-server (and a 3-master Redis Cluster), SecantusDB (MongoDB) and
# Apache Cassandra (one node, a three-node cluster for the fault tests, and a node with TLS
# and passwords for the credentials tests), all on
# 127.0.0.1. Idempotent: what is installed is not installed again, what answers is not
# restarted. Stopped again on exit (only what servers.sh started).
stop_servers() {
  if [[ -z ${TERN_KEEP_SERVERS:-} ]]; then
    scripts/servers.sh stop all valkey valkey-cluster >/dev/null 2>&1 || true
    scripts/redis-image.sh stop-dockerd >/dev/null 2>&1 || true
  fi
}
trap stop_servers EXIT
scripts/servers.sh install all
phase "servers: install"
scripts/servers.sh start all
eval "$(scripts/servers.sh env)"
phase "servers: start"

# Valkey 8 with tern's module (tern-redis-module): the Valkey install (bookworm-backports),
# the module's build (libclang for bindgen: deps.sh) and the servers, each phase timed.
scripts/deps.sh
phase "system packages (deps.sh)"
scripts/servers.sh install valkey valkey-cluster
phase "valkey: install + module build"
scripts/servers.sh start valkey valkey-cluster
eval "$(scripts/servers.sh env valkey valkey-cluster)"
phase "valkey: start"

# The Redis container path (testcontainers on a locally built image). Optional: when
# docker or debootstrap cannot provision here, the container battery reports itself
# skipped with the reason, and the plain-server battery still runs.
if [[ -n ${TERN_SKIP_CONTAINERS:-} ]]; then
  echo "[test.sh] container tests: skipped (TERN_SKIP_CONTAINERS is set)"
elif scripts/redis-image.sh all; then
  export TERN_IT_REDIS_IMAGE=local/tern-redis:7
else
  echo "[test.sh] container tests: provisioning failed (see above); the container battery will be reported skipped"
  export TERN_IT_REDIS_IMAGE=local/tern-redis:7
fi
phase "redis image"

scripts/deps.sh
phase "system packages (deps.sh)"

cargo build --workspace --all-targets --locked
phase "build"

shopt -s nullglob
status=0
# Under a watch: a test that runs longer than TERN_TEST_HANG_MINUTES (default 20; the slowest
# takes about 3 on fresh servers) is named with its threads' stacks, its binary killed, and its binary's
# unfinished tests run once more; a hang is always printed, and one that happens twice fails
# (scripts/lib/test_watch.py, docs/testing.md "Hung tests").
python3 scripts/lib/test_watch.py --hang-minutes "${TERN_TEST_HANG_MINUTES:-20}" -- \
  cargo test --workspace --locked --no-fail-fast || status=$?
phase "cargo test --workspace"

echo "[test.sh] battery per backend (from $TERN_BATTERY_DIR):"
awk -F'\t' '
  $1 == "BATTERY" {
    if ($4 == "passed") passed[$2]++;
    else { skipped[$2]++; if (!(($2, $4) in why)) order[$2] = order[$2] SUBSEP $4; why[$2, $4]++ }
    seen[$2] = 1
  }
  END {
    for (b in seen) {
      printf "  %-16s %3d passed, %3d skipped\n", b, passed[b] + 0, skipped[b] + 0
      n = split(substr(order[b], 2), reasons, SUBSEP)
      for (i = 1; i <= n; i++)
        printf "  %-16s     %d %s\n", b, why[b, reasons[i]], reasons[i]
    }
  }' /dev/null "$TERN_BATTERY_DIR"/* | sort -s -k1,1
exit "$status"
