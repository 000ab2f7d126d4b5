#!/usr/bin/env python3
"""Whole-process comparison on one capture file.

`rdmadiag analyze` (decode, ICRC check on every frame, PSN analysis, summary
output) against tshark reading the same file and extracting one field
(`-T fields -e infiniband.bth.psn`), run alternately so that both see the same
machine state (the file is read once beforehand, so both find it in the page
cache). Prints every run, then the best of each and the ratio of packet rates.

usage: bench/compare_tshark.py RDMADIAG FILE [--rounds N] [--no-tshark] [-- analyze options, e.g. -j 2]
"""
import argparse
import json
import shutil
import subprocess
import sys
import time


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rdmadiag")
    ap.add_argument("file")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-tshark", action="store_true", help="time rdmadiag only")
    ap.add_argument("extra", nargs="*", help="more `rdmadiag analyze` options (after --)")
    a = ap.parse_args()
    if not a.no_tshark and not shutil.which("tshark"):
        print("compare_tshark: tshark not installed", file=sys.stderr)
        return 77
    report = subprocess.run([a.rdmadiag, "analyze", "--json", "-", a.file], check=True, capture_output=True).stdout
    packets = json.loads(report)["summary"]["packets"]
    with open(a.file, "rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    best_r = best_t = None
    for i in range(1, a.rounds + 1):
        r = timed([a.rdmadiag, "analyze", "-q", *a.extra, a.file])
        best_r = r if best_r is None else min(best_r, r)
        line = f"round {i}: rdmadiag {r:.3f} s ({packets / r:,.0f} packets/s)"
        if not a.no_tshark:
            t = timed(["tshark", "-r", a.file, "-T", "fields", "-e", "infiniband.bth.psn"])
            best_t = t if best_t is None else min(best_t, t)
            line += f"   tshark {t:.3f} s ({packets / t:,.0f} packets/s)"
        print(line, flush=True)
    summary = f"{a.file}: {packets:,} packets; rdmadiag best {best_r:.3f} s ({packets / best_r / 1e6:.2f} Mpackets/s)"
    if best_t is not None:
        summary += f"; tshark best {best_t:.3f} s ({packets / best_t:,.0f} packets/s); ratio {best_t / best_r:.1f}x"
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
