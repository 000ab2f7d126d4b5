#!/usr/bin/env python3
"""Checks every sequence verdict rdmadiag makes on a capture against tshark's
per-frame PSN list (an independent decode of the same bytes):

- a PSN called lost (psn_gap) must not appear on that flow (same direction,
  destination QP and PSN space: requests, or READ responses) before the frame
  that reports it, nor after it in a packet sent before it (an older IPv4 ID:
  reordered, not lost);
- a frame flagged duplicate or retransmission must carry a PSN that appeared
  before on that flow (a re-issued READ: a PSN its earlier READ reserved);
- a frame flagged out of order (a late original) must carry a PSN that did
  not appear before, unless its IPv4 ID is older than every earlier copy's (the
  sender's clock: the original, overtaken by its own resend);
- a READ response (or atomic ACK) whose PSN appeared before on its flow must be
  flagged a retransmission or a duplicate (it is not new data);
- a gap whose PSN appears later on its flow must not say it was never resent;
- a READ flagged a spurious retransmission (nothing lost: every copy answered)
  must have as many READ responses with its PSN, between the same two ends, as
  copies of it were sent;
- a resend the report calls needed (retransmission, cause ack_lost) is not
  flagged spurious on its packet;
- a UD PSN jump is never a loss: no psn_gap and no out-of-order on UD flows;
- with --expect KIND=N (repeatable), the report must count N anomalies of KIND
  (N taken from an oracle by the caller, e.g. the netem or kernel counters).

Usage: psn_oracle_check.py --rdmadiag BIN [--expect KIND=N ...] [--min KIND=N ...] PCAP|DIR...
Exit status 1 if any verdict contradicts the oracle.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

FIELDS = ["frame.number", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "infiniband.lrh.slid", "infiniband.lrh.dlid",
          "infiniband.grh.sgid", "infiniband.grh.dgid", "infiniband.bth.opcode", "infiniband.bth.destqp",
          "infiniband.bth.psn", "infiniband.reth.dmalen", "infiniband.deth.srcqp", "ip.id"]
RESPONSES = {13, 14, 15, 16, 17, 18}  # RC READ responses, ACK, atomic ACK (IBA table 38)
UD_OPCODES = {100, 101}


def first(v):
    return v.split(",")[0] if v else ""


def tshark_frames(pcap):
    """frame -> dict(ends, qp, psn, opcode, dmalen) for every frame tshark decodes a BTH in."""
    cmd = ["tshark", "-n", "-r", pcap, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return None  # a link type tshark cannot read (e.g. 247, native IB)
    out = res.stdout
    frames = {}
    for line in out.splitlines():
        c = line.split("\t")
        c += [""] * (len(FIELDS) - len(c))
        if not c[9] or not c[11]:
            continue
        if c[1]:
            ends = (c[1], c[2])
        elif c[3]:
            ends = (c[3], c[4])
        elif c[5]:
            ends = ("LID %d" % int(first(c[5]), 0), "LID %d" % int(first(c[6]), 0))
        else:
            ends = (c[7], c[8])
        frames[int(c[0])] = dict(ends=ends, qp=int(first(c[10]), 0), psn=int(first(c[11])),
                                 opcode=int(first(c[9]), 0), dmalen=int(first(c[12]) or "0", 0),
                                 srcqp=int(first(c[13]), 0) if c[13] else None,
                                 ipid=int(first(c[14]), 0) if c[14] else None)
    return frames


def space_of(fr):
    """READ responses and atomic ACKs carry PSNs of their own; ACKs/NAKs only acknowledge."""
    if fr["opcode"] == 17:
        return "ack"
    return "response" if fr["opcode"] in RESPONSES else "request"


class Index:
    """First frame of each PSN per flow and PSN space, and each flow's READ requests."""

    def __init__(self, frames):
        self.first = {}
        self.reads = {}
        self.order = {}  # flow -> [(frame, psn)] in frame order
        self.answers = {}  # (ends, psn) -> READ responses carrying it
        self.copies = {}   # (flow, psn) -> READ requests carrying it
        self.last = {}
        for n in sorted(frames):
            fr = frames[n]
            key = (fr["ends"], fr["qp"], space_of(fr))
            self.first.setdefault(key + (fr["psn"],), n)
            self.order.setdefault(key, []).append((n, fr["psn"]))
            if fr["opcode"] == 12:
                self.reads.setdefault(key, []).append((n, fr["psn"], fr["dmalen"]))
            if fr["opcode"] in (13, 14, 15, 16):
                self.answers[(fr["ends"], fr["psn"])] = self.answers.get((fr["ends"], fr["psn"]), 0) + 1
            if fr["opcode"] == 12:
                self.copies[key + (fr["psn"],)] = self.copies.get(key + (fr["psn"],), 0) + 1
            self.last[key + (fr["psn"],)] = n

    def seen_before(self, at, fr, psn, reserved=False):
        """Whether `psn` appeared on fr's flow and PSN space in a frame before `at`."""
        key = (fr["ends"], fr["qp"], space_of(fr))
        if self.first.get(key + (psn,), at) < at:
            return True
        # A READ request reserves one PSN per response packet: at most one per 256 bytes.
        for n, r, length in self.reads.get(key, []) if reserved else []:
            if n < at and 0 <= (psn - r) % (1 << 24) < max(1, (length + 255) // 256):
                return True
        return False


    def overtaken(self, at, fr, frames):
        """Whether every earlier copy of fr's PSN on its flow was sent after fr
        (IPv4 IDs, mod 2^16): fr is the original, overtaken on the path."""
        if fr["ipid"] is None:
            return False
        key = (fr["ends"], fr["qp"], space_of(fr))
        earlier = [frames[n]["ipid"] for n, psn in self.order.get(key, []) if n < at and psn == fr["psn"]]
        return all(i is not None and 0 < (i - fr["ipid"]) % 65536 < 32768 for i in earlier)

    def late_original(self, at, fr, psn, frames):
        """Whether `psn` arrives after frame `at` on fr's flow in a packet sent
        before it (older IPv4 ID): it was late, not lost."""
        if fr["ipid"] is None:
            return False
        key = (fr["ends"], fr["qp"], space_of(fr))
        return any(n > at and p == psn and frames[n]["ipid"] is not None
                   and 0 < (fr["ipid"] - frames[n]["ipid"]) % 65536 < 32768 for n, p in self.order.get(key, []))

    def seen_after(self, at, fr, psn):
        key = (fr["ends"], fr["qp"], space_of(fr))
        return self.last.get(key + (psn,), 0) > at

    def read_all_answered(self, fr):
        """Whether the READ `fr` got as many first responses (either QP) as copies of it were sent."""
        back = (fr["ends"][1], fr["ends"][0])
        key = (fr["ends"], fr["qp"], space_of(fr), fr["psn"])
        return self.answers.get((back, fr["psn"]), 0) >= self.copies.get(key, 0)

    def behind(self, at, fr, psn):
        """Whether a later PSN than `psn` appeared on fr's flow before `at`: the sender had sent it."""
        key = (fr["ends"], fr["qp"], space_of(fr))
        for n, other in self.order.get(key, []):
            if n >= at:
                return False
            d = (other - psn) % (1 << 24)
            if 0 < d < (1 << 23):
                return True
        return False


def check(bin_path, pcap, expect, minimum):
    frames = tshark_frames(pcap)
    if frames is None:
        return None, {}
    index = Index(frames)
    lines = subprocess.run([bin_path, "analyze", "--jsonl", "-", pcap], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    report = json.loads(lines[-1])
    problems = []
    kinds = {}
    for a in report.get("anomalies", []):
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
        if a["kind"] != "psn_gap":
            continue
        fr = frames.get(a["frame"])
        if fr is None:
            problems.append("psn_gap at frame %d: tshark decodes no BTH there" % a["frame"])
            continue
        if fr["opcode"] in UD_OPCODES:
            problems.append("psn_gap on a UD flow at frame %d" % a["frame"])
        if not a.get("count"):  # (JSON leaves a zero count out)
            problems.append("psn_gap at frame %d names no missing PSN (from %s)" % (a["frame"], a.get("expected_psn")))
        for i in range(a.get("count", 0)):
            psn = (a["expected_psn"] + i) % (1 << 24)
            if index.seen_before(a["frame"], fr, psn):
                problems.append("frame %d calls PSN %d lost, but the capture holds it before" % (a["frame"], psn))
            elif index.late_original(a["frame"], fr, psn, frames):
                problems.append("frame %d calls PSN %d lost, but it arrives later with an older IPv4 ID: reordered"
                                % (a["frame"], psn))
            elif "never resent" in a.get("text", "") and index.seen_after(a["frame"], fr, psn):
                problems.append("frame %d says PSN %d was never resent, but it comes later" % (a["frame"], psn))
    # A resend the report says was needed (an answer was lost: cause ack_lost)
    # is not called spurious on its packet (docs/analysis.md: one verdict).
    needed = {a["frame"] for a in report.get("anomalies", [])
              if a["kind"] == "retransmission" and a.get("cause") == "ack_lost"}
    for line in lines[:-1]:
        p = json.loads(line)
        v = p.get("analysis")
        fr = frames.get(p["frame"])
        if v and p["frame"] in needed and v.get("spurious_retransmission"):
            problems.append("frame %d flagged a spurious resend, but the report says it was needed (ack_lost)"
                            % p["frame"])
        if not v or fr is None:
            continue
        # A packet flagged with a gap must say where it starts, and those PSNs must not be held.
        if v.get("gap"):
            if v.get("expected_psn") is None:
                problems.append("frame %d flagged with a gap but no expected PSN" % p["frame"])
            elif any(index.seen_before(p["frame"], fr, (v["expected_psn"] + i) % (1 << 24)) for i in range(v["gap"])):
                problems.append("frame %d flags PSNs from %d lost, but the capture holds one before"
                                % (p["frame"], v["expected_psn"]))
        seen = index.seen_before(p["frame"], fr, fr["psn"], reserved=fr["opcode"] == 12)
        if v.get("duplicate") and not seen:
            problems.append("frame %d flagged duplicate, but PSN %d never appeared before on its flow"
                            % (p["frame"], fr["psn"]))
        # A resend of a packet lost before the capture point is behind PSNs seen already.
        if v.get("retransmission") and not seen and not index.behind(p["frame"], fr, fr["psn"]):
            problems.append("frame %d flagged retransmission, but PSN %d was neither seen nor passed before"
                            % (p["frame"], fr["psn"]))
        if fr["opcode"] in (13, 14, 15, 16, 18) and seen and not (v.get("retransmission") or v.get("duplicate")):
            problems.append("frame %d: response PSN %d seen before, but not flagged resent" % (p["frame"], fr["psn"]))
        if v.get("spurious_retransmission") and fr["opcode"] == 12 and not index.read_all_answered(fr):
            problems.append("frame %d: READ called a spurious resend, but fewer responses with PSN %d than copies"
                            % (p["frame"], fr["psn"]))
        if v.get("out_of_order"):
            if fr["opcode"] in UD_OPCODES:
                problems.append("frame %d: a UD datagram called out of order" % p["frame"])
            elif index.seen_before(p["frame"], fr, fr["psn"]) and not index.overtaken(p["frame"], fr, frames):
                problems.append("frame %d flagged out of order (a late original), but PSN %d appeared before"
                                % (p["frame"], fr["psn"]))
    for kind, n in expect.items():
        if kinds.get(kind, 0) != n:
            problems.append("%s: %d reported, the oracle says %d" % (kind, kinds.get(kind, 0), n))
    for kind, n in minimum.items():
        if kinds.get(kind, 0) < n:
            problems.append("%s: %d reported, the oracle says at least %d" % (kind, kinds.get(kind, 0), n))
    return problems, kinds


def parse_counts(items):
    out = {}
    for it in items or []:
        k, n = it.split("=")
        out[k] = int(n)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("--expect", action="append", help="KIND=N: exactly N anomalies of KIND")
    ap.add_argument("--min", action="append", help="KIND=N: at least N anomalies of KIND")
    ap.add_argument("pcaps", nargs="+", help="capture files, or directories of them")
    args = ap.parse_args()
    if not shutil.which("tshark"):
        print("tshark not found: skipped")
        return 77
    pcaps = []
    for p in args.pcaps:
        pcaps += sorted(glob.glob(os.path.join(p, "*.pcap"))) if os.path.isdir(p) else [p]
    failed = 0
    for pcap in pcaps:
        problems, kinds = check(args.rdmadiag, pcap, parse_counts(args.expect), parse_counts(args.min))
        if problems is None:
            print("skip %s: tshark cannot read it" % pcap)
            continue
        print("%s %s %s" % ("FAIL" if problems else "ok  ", pcap, kinds))
        for p in problems[:8]:
            print("    " + p)
        if len(problems) > 8:
            print("    ... %d more" % (len(problems) - 8))
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
