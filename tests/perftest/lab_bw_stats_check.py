#!/usr/bin/env python3
"""Checks lab_perftest_bw_stats (issue 18: --cpu_util and completion latency, -D, -q 2).

usage: lab_bw_stats_check.py LAB_OUT_DIR

The lab run's steps (tests/perftest/lab.cmake) are, all write-bw -D 4 -q 2 -s 1024 --cpu_util
on Soft-RoCE: 1 ib<->ib, 2 rdmadiag<->rdmadiag, 3 ib server / rdmadiag client, 4 rdmadiag
server / ib client, 5 ib<->ib again, 6 rdmadiag<->rdmadiag again; then write-lat -D 4 --cpu_util
7 ib server / rdmadiag client, 8 rdmadiag server / ib client.

Checks, each against something rdmadiag did not compute itself:
* bandwidth: every client's average (rdmadiag's and perftest's, whichever side the peer is)
  lies within the range of the two perftest<->perftest runs (steps 1, 5) widened by their
  spread (|run 1 - run 5|, at least 25 % of their mean: TCG emulation on a shared machine);
* CPU_Util: the column perftest prints is printed by rdmadiag's client too (same place), and
  rdmadiag's value lies in the same widened range of perftest's own (steps 1, 5), 0..100;
* completion latency (rdmadiag's JSON, steps 2, 3, 6): Little's law. The sender keeps -t = 128
  operations in flight on each of its 2 QPs, so the mean post -> completion time must be
  2 * 128 / message rate (the rate perftest's figures were just checked against), within 25 %;
  every QP has its p50/p99; the sample count is the window's messages / -Q (100) within 2 per QP.
"""
import json
import os
import re
import sys

ROW = re.compile(r"^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?\s*$")
QPS, DEPTH, CQ_MOD = 2, 128, 100


def read(out, role, step, name="stdout"):
    with open(os.path.join(out, role, f"step{step}.{name}")) as f:
        return f.read()


def bw_row(text, where):
    """The first bandwidth row after perftest's header: (avg MB/s, msg rate, cpu or None)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(" #bytes     #iterations    BW peak"):
            m = ROW.match(lines[i + 1])
            if not m:
                sys.exit(f"{where}: no bandwidth row after the header: {lines[i + 1]!r}")
            has_cpu = "CPU_Util" in line
            return float(m.group(4)), float(m.group(5)), (float(m.group(6)) if has_cpu and m.group(6) else None)
    sys.exit(f"{where}: no bandwidth table in:\n{text}")


def widened(reference, floor_share):
    lo, hi = min(reference), max(reference)
    spread = max(hi - lo, floor_share * (lo + hi) / 2)
    return lo - spread, hi + spread


def check_completion_latency(path):
    report = json.load(open(path))
    r = report["results"][0]
    cl = r["completion_latency"]["statistics"]
    rate = r["bandwidth"]["msg_rate_mpps"] * 1e6
    expected = QPS * DEPTH / rate * 1e6
    share = abs(cl["t_avg"] - expected) / expected
    print(f"{path}: completion latency mean {cl['t_avg']:.1f} usec, Little's law {expected:.1f} usec "
          f"({share:.0%}), p50 {cl['percentiles']['p50']:.1f} p99 {cl['percentiles']['p99']:.1f}, {cl['sample_count']} samples")
    if share > 0.25:
        sys.exit(f"{path}: completion latency mean {cl['t_avg']} usec, but {QPS} x {DEPTH} in flight at {rate:.0f}/s "
                 f"means {expected:.1f} usec")
    if len(r["per_qp"]) != QPS or any("completion_p50_usec" not in q for q in r["per_qp"]):
        sys.exit(f"{path}: per_qp without completion percentiles: {r['per_qp']}")
    expected_samples = r["iterations"] / CQ_MOD
    if abs(cl["sample_count"] - expected_samples) > 2 * QPS:
        sys.exit(f"{path}: {cl['sample_count']} completion samples, {r['iterations']} messages in the window / {CQ_MOD}")
    if "cpu_util" not in r:
        sys.exit(f"{path}: no cpu_util")


def main():
    out = sys.argv[1]
    rows = {s: bw_row(read(out, "client", s), f"step {s} client") for s in range(1, 7)}
    for s, (avg, rate, cpu) in rows.items():
        print(f"step {s}: client BW average {avg:.2f} MB/s, {rate:.6f} Mpps, CPU_Util {cpu}")
    lo, hi = widened([rows[1][0], rows[5][0]], 0.25)
    for s in (2, 3, 4, 6):
        if not lo <= rows[s][0] <= hi:
            sys.exit(f"step {s}: BW average {rows[s][0]} MB/s outside perftest's {lo:.2f} .. {hi:.2f} (steps 1, 5)")
    cpu_ref = [rows[1][2], rows[5][2]]
    if None in cpu_ref:
        sys.exit("perftest printed no CPU_Util column (steps 1, 5)")
    lo, hi = widened(cpu_ref, 0.25)
    for s in (2, 3, 6):
        cpu = rows[s][2]
        if cpu is None or not 0 <= cpu <= 100 or not lo <= cpu <= hi:
            sys.exit(f"step {s}: rdmadiag's CPU_Util {cpu} outside perftest's {lo:.2f} .. {hi:.2f} (steps 1, 5)")
    for s in (2, 3, 6):
        check_completion_latency(os.path.join(out, "client", f"wbw-{s}.json"))
    for s, role in ((7, "client"), (8, "server")):
        text = read(out, role, s)
        if "CPU_Util[%]" not in text:
            sys.exit(f"step {s} {role}: write-lat -D --cpu_util printed no CPU_Util column:\n{text}")
    print("bw_stats: bandwidth, CPU_Util and completion latency consistent with perftest's runs")


if __name__ == "__main__":
    main()
