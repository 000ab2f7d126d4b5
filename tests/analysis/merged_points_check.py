#!/usr/bin/env python3
"""A capture that looks like two capture points merged onto one interface.

mergecap's default (-I all) merges identical interface descriptions: a lab
capture merged with its own copy 4 us later (editcap -t) is one interface
where every packet is seen twice, the same bytes. rdmadiag reported 292
psn_duplicate anomalies on lab_rxe_write_lat_loss and said nothing of why.

Checked: the report's merged_points member and the warning on standard error
count as exact copies what editcap -w 0.001 (its dedup by whole-frame digest
within 1 ms) skips, out of capinfos' packet count (these files are smaller
than the sample the hint looks at, the first 8,192 frames of every 65,536:
tests/analysis/copy_detector_test.cpp checks the sample); the real lab captures,
those with netem `duplicate` faults included (lab_rxe_reorder 3 %, 4 copies;
lab_rxe_write_multipkt_loss, 8), get neither. -j 2 and -j 3 give -j 1's count.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
failures = []


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def packets(path):
    return int(re.search(r"Number of packets:\s*(\d+)", run("capinfos", "-c", path).stdout).group(1))


def analyze(path, tmp, jobs=1):
    out = os.path.join(tmp, "r.json")
    r = run(rdmadiag, "analyze", "-q", "-j", str(jobs), "--json", out, path)
    with open(out) as f:
        return json.load(f), r.stderr


with tempfile.TemporaryDirectory() as tmp:
    for name in ("lab_rxe_write_lat_loss.pcap", "lab_siw_write_bw_loss.pcap", "lab_rxe_nvme.pcap"):
        src = os.path.join(pcaps, name)
        copy, merged, dedup = (os.path.join(tmp, n) for n in ("copy.pcap", "merged.pcapng", "dedup.pcap"))
        run("editcap", "-t", "0.000004", src, copy)
        run("mergecap", "-w", merged, src, copy)  # default -I all: one interface
        r = run("editcap", "-w", "0.001", merged, dedup)
        skipped = int(re.search(r"(\d+) packets skipped", r.stdout + r.stderr).group(1))
        total = packets(merged)
        rep, err = analyze(merged, tmp)
        got = rep.get("merged_points")
        want = {"exact_copies": skipped, "frames": total}
        if not got or {k: got[k] for k in want} != want:
            failures.append(f"{name} merged with its copy: merged_points {got}, editcap/capinfos {want}")
        if f"({skipped} of {total} packets looked at are exact copies" not in err:
            failures.append(f"{name} merged with its copy: no warning on stderr: {err!r}")
        # The same count on several threads (frames without addresses, such as
        # ARP, go to the shards in turn: a copy and its original can be apart).
        for jobs in (2, 3):
            rep_j, _ = analyze(merged, tmp, jobs)
            if rep_j.get("merged_points") != got:
                failures.append(f"{name} merged, -j {jobs}: {rep_j.get('merged_points')}, -j 1: {got}")
    for src in sorted(glob.glob(os.path.join(pcaps, "lab_*.pcap"))):
        rep, err = analyze(src, tmp)
        if "merged_points" in rep or "merged onto one interface" in err:
            failures.append(f"{os.path.basename(src)}: called merged ({rep.get('merged_points')})")

for f in failures:
    print("FAIL:", f)
print("merged_points:", "FAIL" if failures else "ok")
sys.exit(1 if failures else 0)
