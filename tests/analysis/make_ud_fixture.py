#!/usr/bin/env python3
"""Make tests/pcaps/derived/rxe_ud_one_source_three_destinations.pcap (issue 15, class 4).

A UD QP numbers its packets with one PSN counter for every destination (IBA
Vol 1 9.8.2). A two-VM lab has one destination per UD QP, so this fixture is
derived: 24 consecutive real UD SEND frames of one source QP (DETH source QP
0x11, 10.77.0.2) from tests/pcaps/lab_rxe_ud.pcap keep their transport bytes
and PSNs, and are spread over three destinations as one sender would address
them: every second frame to QP 0x15 instead of 0x11, every fourth to QP 0x16 on
10.77.0.3. Every IPv4 header checksum and ICRC is recomputed by
tests/crosscheck/derive_pcaps.py's independent code (rules in ../shared/README.md).

Expected (from the construction, not from rdmadiag): no datagram is lost,
duplicated or reordered, so no sequence anomaly at all.
Usage: make_ud_fixture.py [--src tests/pcaps/lab_rxe_ud.pcap] [--out tests/pcaps/derived/...]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "crosscheck"))
import derive_pcaps as dp  # noqa: E402  (the repository's independent ICRC/checksum code)

UD_SEND_ONLY = 0x64
SOURCE_QP = 0x11
TAKE = 24


def readdress(f, dest_qp, dst_ip):
    ib = bytearray(f.ib)
    ib[5:8] = dest_qp.to_bytes(3, "big")          # BTH destination QP
    ip = bytearray(f.ipv4)
    ip[16:20] = dst_ip
    return dp.Frame(f.sec, f.usec, f.eth, dp.ipv4_header_checksum(bytes(ip)), f.udp, bytes(ib))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(HERE, "..", "pcaps", "lab_rxe_ud.pcap"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "pcaps", "derived",
                                                  "rxe_ud_one_source_three_destinations.pcap"))
    args = ap.parse_args()
    frames = [f for f in dp.roce_frames(args.src)
              if f.ib[0] == UD_SEND_ONLY and int.from_bytes(f.ib[16:20], "big") & 0xFFFFFF == SOURCE_QP
              and f.src_ip == bytes([10, 77, 0, 2])][:TAKE]
    if len(frames) < TAKE:
        raise SystemExit("only %d UD frames of source QP 0x%x in %s" % (len(frames), SOURCE_QP, args.src))
    records = []
    for i, f in enumerate(frames):
        if i % 4 == 3:
            f = readdress(f, 0x16, bytes([10, 77, 0, 3]))
        elif i % 2 == 1:
            f = readdress(f, 0x15, f.dst_ip)
        records.append((f.sec, f.usec, 14 + len(dp.roce_v2_ipv4(f)), f.eth + dp.roce_v2_ipv4(f)))
    dp.write_pcap(args.out, dp.LINKTYPE_ETHERNET, records)
    print("wrote %s: %d frames" % (os.path.relpath(args.out), len(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
