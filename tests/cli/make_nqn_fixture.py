#!/usr/bin/env python3
"""Make tests/pcaps/derived/rxe_nvme_nqn_not_utf8.pcap.

The first 200 records of tests/pcaps/lab_rxe_nvme.pcap (the rdma_cm exchanges
and NVMe-oF Connects of the lab's real nvme-rdma traffic), with the subsystem
NQN in every Connect's data changed from "nqn.2026-11.org.rdmadiag:lab" to
"nqn." + byte 0xFF (not UTF-8) + ESC "[2J" (a terminal's clear-screen) +
"11.org.rdmadiag:lab": what a capture can hold, since the NQN bytes come from
the wire. ICRCs recomputed by tests/crosscheck/derive_pcaps.py's independent
code; every other record is unchanged.
Usage: make_nqn_fixture.py [--src tests/pcaps/lab_rxe_nvme.pcap] [--out tests/pcaps/derived/...]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "crosscheck"))
import derive_pcaps as dp  # noqa: E402  (the repository's independent ICRC/checksum code)

NQN = b"nqn.2026-11.org.rdmadiag:lab"
FOREIGN = b"nqn.\xff\x1b[2J11.org.rdmadiag:lab"
TAKE = 200


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(HERE, "..", "pcaps", "lab_rxe_nvme.pcap"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "pcaps", "derived", "rxe_nvme_nqn_not_utf8.pcap"))
    args = ap.parse_args()
    linktype, _, recs = dp.read_pcap(args.src)
    roce = {(f.sec, f.usec, bytes(f.ib)): f for f in dp.roce_frames(args.src)}
    assert len(FOREIGN) == len(NQN)
    out, patched = [], 0
    for sec, usec, wirelen, pkt in recs[:TAKE]:
        f = next((f for (s, u, ib), f in roce.items() if s == sec and u == usec and ib in pkt and NQN in ib), None)
        if f is not None:
            f.ib = f.ib.replace(NQN, FOREIGN)
            pkt = f.eth + dp.roce_v2_ipv4(f)
            patched += 1
        out.append((sec, usec, wirelen, pkt))
    if not patched:
        raise SystemExit("no Connect data with %r in the first %d records of %s" % (NQN, TAKE, args.src))
    dp.write_pcap(args.out, linktype, out)
    print("wrote %s: %d records, %d NQNs changed" % (os.path.relpath(args.out), len(out), patched))
    return 0


if __name__ == "__main__":
    sys.exit(main())
