#!/usr/bin/env python3
"""Lists the longest functions of the workspace's non-test Rust code (a heuristic:
a line that starts a `fn` item, up to the line where its braces balance again;
files under tests/, benches/, testkit/ and `#[cfg(test)]` modules are skipped).
Usage: scripts/longest-fns.py [N]  (default: the 15 longest)."""
import re, subprocess, sys

def strip(line):
    """The code of a line without its comment, char literals and strings (whose
    braces would count otherwise)."""
    code = re.sub(r"'(\\[^']*|[^'\\])'", "' '", line)
    code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
    return code.split("//")[0]

def functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    i, in_test_mod = 0, None
    depth = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"\s*#\[cfg\(test\)\]", line):
            in_test_mod = depth
        m = re.match(r"\s*(pub(\([a-z]+\))? )?(async )?(const )?(unsafe )?fn (\w+)", line)
        if m and in_test_mod is None:
            d, j, opened = 0, i, False
            while j < len(lines):
                code = strip(lines[j])
                for ch in code:
                    if ch == "{": d += 1; opened = True
                    elif ch == "}": d -= 1
                if opened and d == 0: break
                if not opened and code.rstrip().endswith(";"): break
                j += 1
            if opened:
                yield (j - i + 1, f"{path}:{i + 1}", m.group(6))
        code = strip(line)
        depth += code.count("{") - code.count("}")
        if in_test_mod is not None and depth <= in_test_mod and "}" in code:
            in_test_mod = None
        i += 1

files = subprocess.run(["git", "ls-files", "*.rs"], capture_output=True, text=True).stdout.split()
skip = re.compile(r"(^|/)(tests|benches|testkit)/|(^|/)tests?\.rs$|/tests/")
found = [f for p in files if not skip.search(p) for f in functions(p)]
for n, where, name in sorted(found, reverse=True)[: int(sys.argv[1]) if len(sys.argv) > 1 else 15]:
    print(f"{n:5} {where} {name}")
