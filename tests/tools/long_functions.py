#!/usr/bin/env python3
"""List C++ functions longer than a limit (default 80 lines).

Uses universal-ctags (--fields=+ne gives each function's first and last
line).  Usage:
    long_functions.py [--limit N] [--root DIR] [--check] DIR...
Without --check it prints every function over the limit, longest first.
With --check it exits 1 when any function over the limit is not in the
allow-list below (and 0 otherwise), printing the offenders; 77 (CTest's
skip) without universal-ctags.
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys

# "path:function" entries allowed to exceed the limit (keep it short, say why).
ALLOWED: set = set()

SOURCE_SUFFIXES = (".cpp", ".cc", ".h", ".hpp")


def find_ctags():
    for name in ("ctags-universal", "universal-ctags", "ctags"):
        path = shutil.which(name)
        if path:
            return path
    print("SKIP: universal-ctags not found (install-deps.sh installs it)")
    sys.exit(77)


def functions(ctags, files):
    out = subprocess.run(
        [ctags, "--fields=+ne", "--c++-kinds=f", "--language-force=C++",
         "-o", "-"] + [str(f) for f in files],
        check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split("\t")
        fields = dict(p.split(":", 1) for p in parts[3:] if ":" in p)
        if "line" not in fields or "end" not in fields:
            continue
        scope = fields.get("class") or fields.get("struct") or \
            fields.get("namespace") or ""
        name = f"{scope}::{parts[0]}" if scope else parts[0]
        name = re.sub(r"__anon[0-9a-f]+", "(anon)", name)
        start, end = int(fields["line"]), int(fields["end"])
        yield parts[1], name, start, end - start + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=80)
    ap.add_argument("--root", default=".")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    root = pathlib.Path(args.root).resolve()
    files = sorted(f for d in args.dirs for f in (root / d).rglob("*")
                   if f.suffix in SOURCE_SUFFIXES and f.is_file())
    long_ones = []
    for path, name, start, length in functions(find_ctags(), files):
        if length > args.limit:
            rel = pathlib.Path(path).resolve().relative_to(root)
            long_ones.append((length, f"{rel}:{start}", f"{rel}:{name}"))
    long_ones.sort(reverse=True)
    bad = [x for x in long_ones if x[2] not in ALLOWED] if args.check \
        else long_ones
    for length, where, key in bad:
        print(f"{length:5d}  {where}  {key.split(':', 1)[1]}")
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
