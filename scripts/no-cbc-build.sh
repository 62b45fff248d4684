#!/usr/bin/env bash
# Proves that `cargo install --path cli --no-default-features` needs no system library: runs it
# where pkg-config cannot find CBC (an empty
# PKG_CONFIG_PATH directory and an empty PKG_CONFIG_LIBDIR), then checks that `tern advise` says
# how to get the solver. Run by .ci/run; any failure fails CI.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
empty="$(mktemp -d)"
trap 'rm -rf "$empty"' EXIT
export PKG_CONFIG_PATH="$empty" PKG_CONFIG_LIBDIR=""
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists cbc; then
  echo "[no-cbc-build] pkg-config still finds cbc: the check would prove nothing" >&2
  exit 1
fi
# `cargo install` itself (the dev profile and the workspace's target dir, so CI compiles no
# dependency twice), into a root of its own.
cargo install --path cli --no-default-features --locked --debug --target-dir target \
  --root "$empty/root" --quiet
tern="$empty/root/bin/tern"
if ldd "$tern" | grep -i cbc; then
  echo "[no-cbc-build] the binary links a CBC library" >&2
  exit 1
fi
out="$("$tern" advise examples/advisor/eac.model examples/advisor/eac.workload 2>&1)" && {
  echo "[no-cbc-build] tern advise succeeded without a solver: $out" >&2
  exit 1
}
if [[ $out != *coinor-libcbc-dev* ]]; then
  echo "[no-cbc-build] tern advise did not say how to get the solver: $out" >&2
  exit 1
fi
echo "[no-cbc-build] tern-cli builds without CBC; tern advise says: $out"
