#!/usr/bin/env bash
# Lazy migration on a fresh embedded store: builds the example application
# (examples/lazy-app), which loads users, installs a lazy migration while its old
# code runs (fenced at the install), then adds hits through the lazy client while
# a sweep completes the migration; it fails unless every write survived. Then
# `tern status --exact` and `tern verify` print the final census.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

cargo build --release --locked -p tern-cli -p tern-core --bin tern --example lazy-app
work="$repo/.tern-lazy-demo"
rm -rf "$work"
mkdir -p "$work"
db="$work/lazy.redb"

"$repo/target/release/examples/lazy-app" --store "$db" --migrations examples/lazy-app/migrations "$@"

tern=("$repo/target/release/tern" --store "embedded:$db" --migrations examples/lazy-app/migrations)
printf '\n$ tern status --exact\n'
"${tern[@]}" status --exact
printf '\n$ tern verify\n'
"${tern[@]}" verify
