#!/usr/bin/env python3
"""Mid-stream NVMe-oF captures: a lab capture cut just after the completion of
its last Connect (and, on RoCE, just after the first I/O command after it, whose
completion then answers nothing in the cut) (what `editcap -r FULL CUT R+1-` makes; done here in Python
so the test needs no Wireshark tools), so no Connect, rdma_cm exchange or MPA
negotiation is left. `rdmadiag nvme` on the cut must

- say what it does not know: every queue `connect_seen` false, sqsize and
  kato_ms null, the text "sqsize unknown";
- pair only as the whole capture pairs (same completion frame, CID, QID,
  command, latency): the whole capture's pairing is itself checked against
  tshark (nvme_crosscheck, nvme_iwarp_crosscheck);
- once a command's queue is named (the first completion's SQID names it; on
  RoCE without rdma_cm, --assume-all, the controller's queue pair must be tied
  to the host's first), pair every command the whole capture completes; the
  commands before that, on unknown queues, are few (at most 8 per queue).

  nvme_midstream_check.py --rdmadiag BIN PCAP_DIR
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvme_crosscheck as nc  # noqa: E402

# (capture, options, where to cut): "connect" just after the completion of the
# last Connect; "io" just after the first I/O command that follows it, so the
# first completion on that queue's host queue pair answers a command the cut
# lacks (its CID names no controller queue pair: a later completion must).
CASES = [("lab_siw_nvme", [], "connect"), ("lab_rxe_nvme", ["--assume-all"], "connect"),
         ("lab_rxe_nvme", ["--assume-all"], "io")]


def cut_pcap(src, dst, first_kept):
    """Frames first_kept.. of a classic pcap file (either byte order)."""
    data = open(src, "rb").read()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, off, frame = [data[:24]], 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        frame += 1
        if frame >= first_kept:
            out.append(data[off:off + 16 + incl])
        off += 16 + incl
    open(dst, "wb").write(b"".join(out))


def nvme(rdmadiag, pcap, args, tmp):
    cmds = os.path.join(tmp, "c.tsv")
    out = subprocess.run([rdmadiag, "nvme", pcap, *args, "--capsules", "-", "--commands", cmds], capture_output=True,
                         text=True, check=True)
    report = json.loads(subprocess.run([rdmadiag, "nvme", pcap, *args, "--json", "-"], capture_output=True, text=True,
                                       check=True).stdout)
    text = subprocess.run([rdmadiag, "nvme", pcap, *args], capture_output=True, text=True, check=True).stdout
    return nc.read_tsv(out.stdout, is_path=False), nc.read_tsv(cmds), report, text


def check(rdmadiag, pcap_dir, name, args, where, errors):
    with tempfile.TemporaryDirectory() as tmp:
        full_pcap = os.path.join(pcap_dir, name + ".pcap")
        caps, full, _, _ = nvme(rdmadiag, full_pcap, args, tmp)
        connects = {r["frame"] for r in caps if r["kind"] == "command" and r["fctype"] == "0x01"}
        cut_at = max(int(r["frame"]) for r in caps if r["kind"] == "response" and r["paired_frame"] in connects)
        if where == "io":
            cut_at = min(int(r["frame"]) for r in caps
                         if r["kind"] == "command" and r["qid"] not in ("0", "unknown") and int(r["frame"]) > cut_at)
        cut = os.path.join(tmp, "cut.pcap")
        cut_pcap(full_pcap, cut, cut_at + 1)
        caps_cut, got, report, text = nvme(rdmadiag, cut, args, tmp)
    shift = lambda f: int(f) + cut_at  # noqa: E731  (cut frame -> whole capture frame)
    for q in report["queues"]:
        if q["connect_seen"] or q["sqsize"] is not None or q["kato_ms"] is not None:
            errors.append(f"{name} cut: queue {q['qid']} claims a Connect: {q['connect_seen']} sqsize {q['sqsize']}")
    if "sqsize unknown" not in text:
        errors.append(f"{name} cut: the text does not say the queue size is unknown")
    ref = {int(r["command_frame"]): r for r in full}
    for r in got:
        w = ref.get(shift(r["command_frame"]))
        same = w and all(r[k] == w[k] for k in ("cid", "qid", "command", "latency_us", "status")) and \
            shift(r["response_frame"]) == int(w["response_frame"])
        if not same:
            errors.append(f"{name} cut: command {shift(r['command_frame'])} pairs differently from the whole capture: {r} vs {w}")
    # Once a queue is named (a command shows its QID), every command on it that the whole capture completes pairs;
    # before that (a few per queue: until its first completion, on RoCE until the queue pairs are tied) none is known.
    named = {shift(r["frame"]) for r in caps_cut if r["kind"] == "command" and r["qid"] != "unknown"}
    unknown = sum(1 for r in caps_cut if r["kind"] == "command" and r["qid"] == "unknown")
    want = {f for f in named if f in ref}
    have = {shift(r["command_frame"]) for r in got}
    if not want <= have:
        errors.append(f"{name} cut: {len(want - have)} commands on named queues not paired, e.g. {sorted(want - have)[:5]}")
    if unknown > 8 * len(report["queues"]) or not report["queues"]:
        errors.append(f"{name} cut: {unknown} commands on unknown queues ({len(report['queues'])} queues)")
    return (f"{name} cut after frame {cut_at}: {len(report['queues'])} queues, none claims a Connect; {len(got)} of "
            f"{sum(1 for f in ref if f > cut_at)} completed commands paired, as the whole capture pairs them; "
            f"{len(want)} on named queues, all paired; {unknown} commands on queues not yet known")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("pcap_dir")
    a = ap.parse_args()
    errors = []
    for name, args, where in CASES:
        print(check(a.rdmadiag, a.pcap_dir, name, args, where, errors))
    for e in errors[:30]:
        print("FAIL", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
