#!/usr/bin/env python3
"""The plugin on two capture points merged into one pcapng file: each
interface's packets are analysed as that point saw them.

Point A is a real lab capture; point B the same traffic as a receiver's copy
would show it (editcap -t: 4 us later) with two frames lost between the points
(editcap deletes them); `mergecap -I none` writes both into one file, each as
its own interface (tshark's frame.interface_id). The plugin once analysed such
a file as one stream: every packet seen twice, half of them called duplicates
(lab_rxe_write_lat_loss: 290 frames with anomalies where A alone has 3 and B 4).

Checked, per interface i: the analysis fields the plugin gives its frames, in
order (anomaly count, PSN duplicate / gap / out-of-order / expected,
retransmission, spurious retransmission, latency, peer QP, request and
response frame as a position among the interface's frames) are those it gives
the same frames of point i's capture read alone (frame for frame: the same
number of frames too).

  plugin_points_check.py PLUGIN_ROOT PCAP_DIR
Exit 77 (CTest skip) when tshark or the plugin cannot be run."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here))
from tshark_plugin import tshark_or_skip  # noqa: E402

SOURCES = ["lab_rxe_write_lat_loss.pcap", "lab_rxe_send_lat_rdmacm_near_psn.pcap", "lab_siw_write_bw_loss.pcap"]
FIELDS = ["rdmadiag.anomalies", "rdmadiag.psn.duplicate", "rdmadiag.psn.gap", "rdmadiag.psn.out_of_order",
          "rdmadiag.psn.expected", "rdmadiag.retransmission", "rdmadiag.retransmission.spurious",
          "rdmadiag.latency", "rdmadiag.peer_qp", "rdmadiag.iwarp.resync"]
FRAME_REFS = ["rdmadiag.request_frame", "rdmadiag.response_frame"]
failures = []


def check(name, ok, detail=""):
    print("%-5s%s" % ("ok" if ok else "FAIL", name) + (": " + detail if detail else ""))
    failures.extend([] if ok else [name])


def frames(ts, path):
    """[(interface, frame number, analysis fields, frame references)] of every frame, in order."""
    args = ["-r", path, "-2", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,", "-e", "frame.number",
            "-e", "frame.interface_id"]
    for f in FIELDS + FRAME_REFS:
        args += ["-e", f]
    r = ts.run(args)
    if r.returncode != 0:
        raise SystemExit(f"tshark failed on {path}: {r.stderr.strip()[:300]}")
    out = []
    for line in r.stdout.splitlines():
        cols = line.split("\t")
        cols += [""] * (2 + len(FIELDS) + len(FRAME_REFS) - len(cols))
        out.append((int(cols[1] or 0), int(cols[0]), tuple(cols[2:2 + len(FIELDS)]),
                    tuple(cols[2 + len(FIELDS):])))
    return out


def positional(rows):
    """Each frame's analysis with its frame references turned into positions among `rows`."""
    pos = {num: i + 1 for i, (_, num, _, _) in enumerate(rows)}
    res = []
    for _, _, fields, refs in rows:
        mapped = tuple(",".join(str(pos.get(int(x), "?" + x)) for x in r.split(",") if x) for r in refs)
        res.append(fields + mapped)
    return res


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"frame {i + 1} of the interface: {x} against {y}"
    return f"{len(a)} frames against {len(b)}"


def main():
    plugin_root, pcaps = sys.argv[1], sys.argv[2]
    ts = tshark_or_skip(plugin_root)
    if not ts:
        return 77
    for tool in ("editcap", "mergecap"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not installed")
            return 77
    work = tempfile.mkdtemp(prefix="rdmadiag-plugin-points-")
    os.chmod(work, 0o755)  # tshark may run as user 65534
    try:
        for name in SOURCES:
            a = os.path.join(pcaps, name)
            b = os.path.join(work, "b-" + name)
            m = os.path.join(work, "m-" + name + "ng")
            # B: 4 us later, frames 100 and 101 lost between the points.
            subprocess.run(["editcap", "-F", "pcap", "-t", "0.000004", a, b, "100", "101"], check=True)
            subprocess.run(["mergecap", "-I", "none", "-w", m, a, b], check=True)
            for f in (b, m):
                os.chmod(f, 0o644)
            merged = frames(ts, m)
            for iface, alone_path in ((0, a), (1, b)):
                alone = positional(frames(ts, alone_path))
                mine = positional([r for r in merged if r[0] == iface])
                check(f"{name}: interface {iface} analysed as its capture alone ({len(alone)} frames, "
                      f"{sum(1 for x in alone if x[0])} with anomalies)", mine == alone,
                      "" if mine == alone else first_difference(mine, alone))
            total = sum(1 for r in merged if r[2][0])
            check(f"{name}: merged file, frames with anomalies {total}", total == sum(
                1 for p in (a, b) for x in positional(frames(ts, p)) if x[0]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"plugin points check: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
