#!/usr/bin/env python3
"""Compare t_typical of ib_*_lat and rdmadiag perftest *-lat runs from a lab results dir.

usage: lab_compare.py LAB_OUT_DIR
Reads <dir>/client/cmd.N and step N stdout, takes the first result row after perftest's
latency header (column 5 = t_typical), groups by verb and tool, prints per-run values, the
medians, rdmadiag's median relative to perftest's, and each tool's spread (max-min)/median.
"""
import os
import re
import statistics
import sys

HEADER = " #bytes #iterations    t_min[usec]"


def typical(stdout):
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(HEADER) and i + 1 < len(lines):
            fields = lines[i + 1].split()
            if len(fields) >= 5:
                return float(fields[4])
    return None


def main():
    d = os.path.join(sys.argv[1], "client")
    runs = {}
    n = 1
    while os.path.exists(os.path.join(d, f"cmd.{n}")):
        cmd = open(os.path.join(d, f"cmd.{n}")).read()
        out_path = os.path.join(d, f"step{n}.stdout")
        value = typical(open(out_path).read()) if os.path.exists(out_path) else None
        m = re.search(r"ib_(\w+)_lat|perftest (\w+)-lat", cmd)
        if m:
            verb = m.group(1) or m.group(2)
            tool = "ib" if m.group(1) else "rdmadiag"
            runs.setdefault((verb, tool), []).append(value)
        n += 1
    ok = True
    for verb in ("write", "read", "send"):
        ib = [v for v in runs.get((verb, "ib"), []) if v is not None]
        rd = [v for v in runs.get((verb, "rdmadiag"), []) if v is not None]
        if not ib or not rd:
            print(f"{verb}: missing runs (ib {runs.get((verb, 'ib'))}, rdmadiag {runs.get((verb, 'rdmadiag'))})")
            ok = False
            continue
        mi, mr = statistics.median(ib), statistics.median(rd)
        rel = (mr - mi) / mi * 100
        spread_ib = (max(ib) - min(ib)) / mi * 100
        spread_rd = (max(rd) - min(rd)) / mr * 100
        print(f"{verb}-lat t_typical usec: ib {['%.2f' % v for v in ib]} median {mi:.2f} (spread {spread_ib:.1f}%)")
        print(f"{verb}-lat t_typical usec: rdmadiag {['%.2f' % v for v in rd]} median {mr:.2f} (spread {spread_rd:.1f}%)")
        print(f"{verb}-lat: rdmadiag median is {rel:+.1f}% of ib's -> {'within' if abs(rel) <= 10 else 'OUTSIDE'} 10%")
        ok = ok and abs(rel) <= 10
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
