#!/usr/bin/python3
"""Writes the congestion test capture tests/pcaps/cc/cc_basic.pcap and its ground truth
tests/pcaps/cc/cc_basic.truth.json (committed; rerun to remake: the jitter has a fixed seed).

The RoCEv2 packets come from scapy's own layers (Debian's python3-scapy, scapy.contrib.roce:
BTH with the ICRC scapy computes, its cnp() helper for the IBA Annex A17.9 CNP, opcode 0x81),
a generator written and tuned by nobody here. The schedule is the scenario: senders at a steady
rate, a switch marking some packets CE (IP ECN = 3, RFC 3168), receivers answering with CNPs to
the sender's QP, and senders that slow down (their gap grows) or keep their rate. The truth file
records what each sender was made to do; tests/cc/cc_crosscheck.py compares rdmadiag's report
with it and with tshark's decode of the same frames.

Run with Debian's interpreter, which has scapy:  /usr/bin/python3 tests/cc/make_cc_pcaps.py
"""
import json
import os
import random
import struct

from scapy.contrib.roce import BTH, cnp
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "pcaps", "cc")
ECT0, CE = 2, 3
SEND_ONLY = 0x04  # RC SEND Only
rng = random.Random(20)


def roce(src, dst, dqpn, psn, ecn, dscp=26):
    ip = IP(src=src, dst=dst, tos=dscp << 2 | ecn, id=psn & 0xFFFF, flags="DF")
    bth = BTH(opcode=SEND_ONLY, dqpn=dqpn, psn=psn)
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip / UDP(sport=49152, dport=4791) /
                 bth / Raw(b"\x00" * 64))


def cnp_frame(src, dst, sender_qp):
    ip = IP(src=src, dst=dst, tos=48 << 2 | ECT0, flags="DF")
    return bytes(Ether(src="02:00:00:00:00:02", dst="02:00:00:00:00:01") / ip / UDP(sport=49153, dport=4791) /
                 cnp(sender_qp))


class Flow:
    """A sender's packets to one QP: `gaps` (µs, jitter added) between packets, CE on the listed packets."""

    def __init__(self, src, dst, qp, sender_qp, start_us, gaps, ce, cnp_after):
        self.src, self.dst, self.qp, self.sender_qp = src, dst, qp, sender_qp
        self.times = []
        t = start_us
        for g in gaps:
            t += g * rng.uniform(0.95, 1.05)
            self.times.append(t)
        self.ce = set(ce)
        self.cnps = [self.times[i] + d for i, d in cnp_after]  # (packet index, µs after it)


def steady_then(n_before, gap_before, n_after, gap_after):
    return [gap_before] * n_before + [gap_after] * n_after


def scenario():
    flows = [
        # Reacts: CE on packets 20, 21; a CNP 3.5 µs after the first; the gap doubles 3 packets after it.
        Flow("10.0.0.1", "10.0.0.2", 0x11, 0x21, 10, steady_then(24, 1.0, 30, 2.0), [20, 21], [(20, 3.5)]),
        # Keeps its rate: CE on 20, 25, 30, a CNP 4.5 µs after each.
        Flow("10.0.0.1", "10.0.0.3", 0x12, 0x22, 10.3, [1.0] * 60, [20, 25, 30], [(20, 4.5), (25, 4.5), (30, 4.5)]),
        # Two QPs between the same hosts: CE on QP 0x32 only; its CNPs name sender QP 0x42. Its rate
        # halves after the first CNP; a second CNP comes with no mark before it.
        Flow("10.0.0.4", "10.0.0.5", 0x31, 0x41, 10.1, [1.0] * 60, [], []),
        Flow("10.0.0.4", "10.0.0.5", 0x32, 0x42, 10.6, steady_then(22, 1.0, 38, 2.0), [18], [(18, 2.5), (50, 0.5)]),
    ]
    return flows


def main():
    os.makedirs(OUT, exist_ok=True)
    records = []
    truth = {"flows": [], "cnps_unmatched": 1}
    for f in scenario():
        for i, t in enumerate(f.times):
            records.append((t, roce(f.src, f.dst, f.qp, 1000 + i, CE if i in f.ce else ECT0)))
        for t in f.cnps:
            records.append((t, cnp_frame(f.dst, f.src, f.sender_qp)))
        truth["flows"].append({"src": f.src, "dst": f.dst, "dest_qp": f.qp, "sender_qp": f.sender_qp,
                               "ce_marked": len(f.ce), "cnps": len(f.cnps),
                               "slowed": f.qp in (0x11, 0x32), "kept_rate": f.qp == 0x12})
    records.append((5.0, cnp_frame("10.0.0.9", "10.0.0.8", 0x99)))  # a CNP for no flow in the capture
    # A flow that is not ECN-capable: the analysis keeps no state for it.
    for i in range(10):
        records.append((12.0 + i, roce("10.0.0.6", "10.0.0.7", 0x51, 1 + i, 0)))
    records.sort(key=lambda r: r[0])
    with open(os.path.join(OUT, "cc_basic.pcap"), "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for t_us, data in records:
            ns = round(t_us * 1000)
            out.write(struct.pack("<IIII", 1_700_000_000 + ns // 1_000_000_000, ns % 1_000_000_000, len(data), len(data)))
            out.write(data)
    with open(os.path.join(OUT, "cc_basic.truth.json"), "w") as out:
        json.dump(truth, out, indent=1)
        out.write("\n")
    print(f"cc_basic.pcap: {len(records)} frames")


if __name__ == "__main__":
    main()
