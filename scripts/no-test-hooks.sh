#!/usr/bin/env bash
# Proves that the released `tern` binary holds no test hook (issue 30 item 5): builds it as a
# release is built, `cargo build --release -p tern-cli` on its own (with resolver 3 one cargo
# invocation unifies the features of everything it builds, so the binary is built by itself,
# not beside the tests), then fails when `nm` or `strings` finds any name or message of the
# `fault-injection` hooks (tern-core's fault points, the adapters' after-copy hooks) in it.
# Run by .ci/run; any failure fails CI.
#
# TERN_HOOKS_FEATURES: extra `--features` for the build, to show the check fails when the hooks
# are in, e.g. `TERN_HOOKS_FEATURES=tern-core/fault-injection scripts/no-test-hooks.sh`
# (that run must exit 1).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
features=()
if [[ -n ${TERN_HOOKS_FEATURES:-} ]]; then
  features=(--features "$TERN_HOOKS_FEATURES")
fi
start=$SECONDS
cargo build --release -p tern-cli --locked "${features[@]}"
echo "[no-test-hooks] cargo build --release -p tern-cli: $((SECONDS - start))s"
bin=target/release/tern
# The hooks' types, functions and messages (as symbols, demangled or not, and as strings in
# the binary and its debug info). Plain `fault` is no pattern: `default_hook` holds it.
pattern='FaultAt|FaultPoint|FaultHook|InjectedCrash|injected crash|with_fault_hook|fault_point|after_copy|AfterCopy|fault.injection'
found="$({
  nm -C "$bin" 2>/dev/null || true
  strings -a "$bin"
} | grep -E "$pattern" | cut -c1-200 | sort -u | head -20 || true)"
if [[ -n $found ]]; then
  echo "[no-test-hooks] $bin holds test hooks (feature fault-injection); the first matches:" >&2
  echo "$found" >&2
  exit 1
fi
echo "[no-test-hooks] $bin holds no test hook (nm and strings: no match of $pattern)"
