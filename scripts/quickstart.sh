#!/usr/bin/env bash
# tern's main job on the embedded store, no server needed: builds tern, loads the
# blog of [SE] into a fresh embedded store, shows the plan, applies releases 2 and 3
# with progress, verifies the census and prints the migrated entities.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

./scripts/deps.sh
cargo build --release --locked -p tern-cli
tern="$repo/target/release/tern"

work="$repo/.tern-quickstart"
rm -rf "$work"
mkdir -p "$work"
cp -r examples/blog/tern.toml examples/blog/migrations "$work/"
cfg=(--config "$work/tern.toml")

step() { printf '\n\033[1m$ tern %s\033[0m\n' "$*"; }

step import examples/blog/data.jsonl
"$tern" "${cfg[@]}" import examples/blog/data.jsonl
step status
"$tern" "${cfg[@]}" status
step check
"$tern" "${cfg[@]}" check
step plan
"$tern" "${cfg[@]}" plan --samples 1
step up
"$tern" "${cfg[@]}" up
step verify
"$tern" "${cfg[@]}" verify
step export
"$tern" "${cfg[@]}" export
printf '\nThe project is in %s; run `%s --config %s/tern.toml status` to look around.\n' "$work" "$tern" "$work"
