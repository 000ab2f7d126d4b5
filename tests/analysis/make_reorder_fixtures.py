#!/usr/bin/env python3
"""Make tests/pcaps/reorder/rxe_reorder_{four,five}_parts.pcap: heavy reordering, nothing lost.

One real RDMA WRITE Only frame of tests/pcaps/lab_rxe_reorder.pcap is sent
again with PSNs 1000.. (ACK request off) in a scrambled order; its IPv4 ID is
1100 + the PSN's offset, i.e. the sending order, so each late packet shows it
was sent before the packet that revealed the gap. Every IPv4 header checksum
and ICRC is recomputed by tests/crosscheck/derive_pcaps.py's independent code.
The orders split one gap so often that a late PSN lands inside a gap whose
record of parts is full (a regression: that PSN stayed "lost", and the report
named a PSN the capture holds: `lost PSN 1010 (1 missing)`).

Expected (from the construction, not from rdmadiag): every PSN is in the
capture once, so no psn_gap, only psn_out_of_order for the late ones.
Usage: make_reorder_fixtures.py [--src ...] [--out-dir tests/pcaps/reorder]
"""
import argparse
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "crosscheck"))
import derive_pcaps as dp  # noqa: E402  (the repository's independent ICRC/checksum code)

WRITE_ONLY = 0x0A
ORDERS = {  # PSN offsets in the order they are on the wire
    "rxe_reorder_four_parts.pcap": [0, 10, 2, 4, 6, 8, 1, 3, 5, 7, 9, 11],
    "rxe_reorder_five_parts.pcap": [0, 20, 2, 4, 6, 10, 1, 14, 3, 5, 7, 8, 9, 11, 12, 13, 15, 16, 17, 18, 19, 21],
}


def copy_with(f, psn, ip_id):
    ib = bytearray(f.ib)
    ib[8] = 0                                # AckReq off, reserved bits 0
    ib[9:12] = psn.to_bytes(3, "big")
    ip = bytearray(f.ipv4)
    ip[4:6] = struct.pack("!H", ip_id)
    return dp.Frame(f.sec, f.usec, f.eth, dp.ipv4_header_checksum(bytes(ip)), f.udp, bytes(ib))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(HERE, "..", "pcaps", "lab_rxe_reorder.pcap"))
    ap.add_argument("--out-dir", default=os.path.join(HERE, "..", "pcaps", "reorder"))
    args = ap.parse_args()
    template = next((f for f in dp.roce_frames(args.src) if f.ib[0] == WRITE_ONLY), None)
    if template is None:
        raise SystemExit("no RDMA WRITE Only frame in %s" % args.src)
    for name, order in ORDERS.items():
        records = []
        for i, offset in enumerate(order):
            f = copy_with(template, 1000 + offset, 1100 + offset)
            body = f.eth + dp.roce_v2_ipv4(f)
            records.append((1_700_000_000, 1000 * i, len(body), body))
        out = os.path.join(args.out_dir, name)
        dp.write_pcap(out, dp.LINKTYPE_ETHERNET, records)
        print("wrote %s: %d frames" % (os.path.relpath(out), len(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
