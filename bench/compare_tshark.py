#!/usr/bin/env python3
"""Whole-process comparison on one capture file.

`rdmadiag analyze` (decode, ICRC check on every frame, PSN analysis, summary
output) against tshark reading the same file and extracting one field
(`-T fields -e infiniband.bth.psn`), run alternately so that both see the same
machine state (the file is read once beforehand, so both find it in the page
cache). Prints every run, then the best of each and the ratio of packet rates,
by wall-clock time and by CPU time (user + system, of the process and its
children): on a shared machine the CPU time is the steadier measure.

usage: bench/compare_tshark.py RDMADIAG FILE [--rounds N] [--no-tshark] [-- analyze options, e.g. -j 2]
"""
import argparse
import json
import resource
import shutil
import subprocess
import sys
import time


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd):
    """(wall seconds, CPU seconds) of one run."""
    t0, c0 = time.perf_counter(), cpu_children()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, cpu_children() - c0


def rate(packets, seconds):
    return f"{packets / seconds:,.0f} packets/s"


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
    best = {"rdmadiag": None, "tshark": None}  # (wall, cpu), each the minimum over the rounds

    def keep(name, wall_cpu):
        b = best[name]
        best[name] = wall_cpu if b is None else (min(b[0], wall_cpu[0]), min(b[1], wall_cpu[1]))

    for i in range(1, a.rounds + 1):
        r = timed([a.rdmadiag, "analyze", "-q", *a.extra, a.file])
        keep("rdmadiag", r)
        line = f"round {i}: rdmadiag {r[0]:.2f} s wall, {r[1]:.2f} s CPU ({rate(packets, r[1])} CPU)"
        if not a.no_tshark:
            t = timed(["tshark", "-r", a.file, "-T", "fields", "-e", "infiniband.bth.psn"])
            keep("tshark", t)
            line += f"   tshark {t[0]:.2f} s wall, {t[1]:.2f} s CPU ({rate(packets, t[1])} CPU)"
        print(line, flush=True)
    r = best["rdmadiag"]
    print(f"{a.file}: {packets:,} packets")
    print(f"  rdmadiag best: {r[0]:.2f} s wall ({rate(packets, r[0])}), {r[1]:.2f} s CPU ({rate(packets, r[1])})")
    t = best["tshark"]
    if t is not None:
        print(f"  tshark best:   {t[0]:.2f} s wall ({rate(packets, t[0])}), {t[1]:.2f} s CPU ({rate(packets, t[1])})")
        print(f"  ratio: {t[0] / r[0]:.1f}x by wall-clock time, {t[1] / r[1]:.1f}x by CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
