#!/usr/bin/env bash
# System packages the build needs beyond Rust: pkg-config and CBC (coinor-libcbc-dev), the solver
# of `tern advise` (crate coin_cbc links it; see docs/advisor.md); libclang-dev, for bindgen in
# the build of tern-redis-module (crate valkey-module generates the module API's bindings). Idempotent: installs only what is
# missing, with apt-get (as root, or through sudo).
set -euo pipefail

need=()
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if ! pkg-config --exists cbc 2>/dev/null; then
  need+=(coinor-libcbc-dev)
fi
if [[ $(dpkg-query -W -f='${Status}' libclang-dev 2>/dev/null) != "install ok installed" ]] &&
  ! ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1; then
  need+=(libclang-dev)
fi
# iproute2's `ip`: tern-cli's tests/netns.rs puts `tern worker`s in network namespaces (#31).
command -v ip >/dev/null 2>&1 || need+=(iproute2)
if ((${#need[@]} == 0)); then
  exit 0
fi
echo "[deps.sh] installing ${need[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[deps.sh] no apt-get here: install ${need[*]} (CBC 2.10 with its pkg-config file cbc.pc) by hand" >&2
  exit 1
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
pkg-config --exists cbc || { echo "[deps.sh] CBC still not found by pkg-config" >&2; exit 1; }
echo "[deps.sh] done: CBC $(pkg-config --modversion cbc)"
