#!/usr/bin/env bash
# Verifies the workspace's declared minimum Rust version (`rust-version` in the root
# Cargo.toml), without needing that toolchain:
#
#   1. every crate of tern declares the same `rust-version` (the workspace's);
#   2. no package in Cargo.lock declares a newer `rust-version` than that (cargo would
#      build it with a newer compiler only);
#   3. the language features tern's own code uses need no newer compiler (a table of
#      syntax probes below: edition 2024, let chains);
#   4. the standard-library items tern's code uses: clippy's `incompatible_msrv` lint
#      (warn by default, denied by CI's `cargo clippy -- -D warnings`) reads the same
#      `rust-version`; this script fails if that lint is switched off anywhere;
#   5. when the toolchain itself is installed (`rustup toolchain list`), a real
#      `cargo +VERSION check --workspace --all-targets --locked`; otherwise it says it is
#      skipped and why (TERN_MSRV_INSTALL=1: try `rustup toolchain install` first).
#
# Prints the floor each source sets; exits non-zero naming the package or file at fault.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
PYTHON=${TERN_PYTHON:-python3}

meta="$(mktemp)"
trap 'rm -f "$meta"' EXIT
cargo metadata --locked --format-version 1 >"$meta"

msrv="$("$PYTHON" - "$meta" "$repo" <<'EOF'
import json, pathlib, re, sys

meta = json.load(open(sys.argv[1]))
repo = pathlib.Path(sys.argv[2])

def ver(v):
    return tuple(int(x) for x in v.split(".")) + (0,) * (3 - len(v.split(".")))

def show(v):
    return ".".join(str(x) for x in v).removesuffix(".0") if v[2] == 0 else ".".join(map(str, v))

members = set(meta["workspace_members"])
ours = [p for p in meta["packages"] if p["id"] in members]
declared = {p["name"]: p.get("rust_version") for p in ours}
missing = [n for n, v in declared.items() if not v]
if missing:
    sys.exit(f"[msrv] FAIL: no rust-version in {', '.join(sorted(missing))}: add `rust-version.workspace = true` to their Cargo.toml")
if len(set(declared.values())) != 1:
    sys.exit(f"[msrv] FAIL: the crates declare different rust-versions: {declared}; use `rust-version.workspace = true` in each")
msrv = ver(next(iter(declared.values())))
print(f"[msrv] declared rust-version: {show(msrv)}", file=sys.stderr)

failures = []

# 2. The lock's packages.
deps = [(ver(p["rust_version"]), p["name"], p["version"]) for p in meta["packages"]
        if p["id"] not in members and p.get("rust_version")]
deps.sort(reverse=True)
top = deps[0] if deps else ((0, 0, 0), "-", "-")
print(f"[msrv] highest rust-version in Cargo.lock: {show(top[0])} ({top[1]} {top[2]})", file=sys.stderr)
for v, name, version in deps:
    if v > msrv:
        failures.append(f"{name} {version} declares rust-version {show(v)} > {show(msrv)}: raise the "
                        f"workspace's rust-version or hold it back (`cargo update -p {name} --precise <older>`)")

# 3. Language features of tern's own code (what clippy's incompatible_msrv does not see).
probes = [
    ("let chains", (1, 88, 0), re.compile(r"^\s*(?:\}\s*else\s+)?(?:if|while)\s+let\b[^{;]*&&|^\s*&&\s*let\b")),
]
floor = ((1, 85, 0), "edition 2024") if any(p["edition"] == "2024" for p in ours) else ((1, 56, 0), "edition 2021")
for p in ours:
    root = pathlib.Path(p["manifest_path"]).parent
    for path in root.rglob("*.rs"):
        if "target" in path.relative_to(root).parts:
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for name, v, rx in probes:
                if rx.search(line) and v > floor[0]:
                    floor = (v, f"{name} ({path.relative_to(repo)}:{lineno})")
print(f"[msrv] language floor of tern's code: {show(floor[0])} ({floor[1]})", file=sys.stderr)
if floor[0] > msrv:
    failures.append(f"tern's code uses {floor[1]}, stable since {show(floor[0])} > {show(msrv)}: raise rust-version")

# 4. The lint that checks standard-library items against rust-version must stay on.
for path in [repo / "Cargo.toml", repo / "clippy.toml", *[pathlib.Path(p["manifest_path"]) for p in ours]]:
    if path.exists():
        text = path.read_text()
        if re.search(r"incompatible_msrv\s*=\s*\"?(allow|\{[^}]*allow)", text) or re.search(r"^\s*msrv\s*=", text, re.M):
            failures.append(f"{path.relative_to(repo)} switches off or overrides clippy's incompatible_msrv check")
for p in ours:
    for path in pathlib.Path(p["manifest_path"]).parent.rglob("*.rs"):
        if "target" not in path.parts and re.search(r"allow\([^)]*incompatible_msrv", path.read_text(errors="replace")):
            failures.append(f"{path.relative_to(repo)} allows clippy::incompatible_msrv")

needed = max(top[0], floor[0])
if needed < msrv:
    print(f"[msrv] note: nothing found needs more than {show(needed)}; the declared {show(msrv)} may be lowered", file=sys.stderr)
if failures:
    sys.exit("[msrv] FAIL:\n  " + "\n  ".join(failures))
print(show(msrv))
EOF
)"
echo "[msrv] lock and code: OK (the standard-library check is clippy's incompatible_msrv, run by .ci/run)"

# 5. The real toolchain, when present.
if [[ -n ${TERN_MSRV_INSTALL:-} ]] && ! rustup toolchain list | grep -q "^$msrv"; then
  rustup toolchain install "$msrv" --profile minimal || echo "[msrv] could not install $msrv"
fi
if rustup toolchain list 2>/dev/null | grep -q "^$msrv"; then
  echo "[msrv] cargo +$msrv check --workspace --all-targets --locked"
  cargo "+$msrv" check --workspace --all-targets --locked
else
  echo "[msrv] build with $msrv: skipped (toolchain not installed; TERN_MSRV_INSTALL=1 installs it with rustup)"
fi
