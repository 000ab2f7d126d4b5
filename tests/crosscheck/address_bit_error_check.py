#!/usr/bin/env python3
"""Corruption is not loss: a RoCEv2 request whose IPv4 address took the bit error,
with other connections' packets between it and its own connection's next one.

usage: address_bit_error_check.py RDMADIAG PCAP

tests/pcaps/rxe_write_bw_q16_corrupt_ip_src.pcap is cut (editcap -r 68101-68800)
from a lab run made in session 44: kernel Soft-RoCE, ib_write_bw -q 16 -s 4096
-n 300, netem corrupt 5 % on the client's egress. One WRITE MIDDLE reached the
wire with IPv4 source 10.69.0.2 (10.77.0.2 with one bit flipped); the next frame
is another QP's, and the damaged packet's own QP skips its PSN a frame later.
rdmadiag used to call that PSN "lost before the capture point".

Checks, each against something rdmadiag did not compute:
* the damaged packets: IPv4/UDP 4791 frames with an address one bit off an
  address of the capture's intact RoCE frames, whose ICRC (computed here with
  zlib, derive_pcaps.py) holds only with that bit put back, and whose IPv4
  header checksum is bad as captured and good put back;
* rdmadiag reports each of them as `icrc_bad`;
* no `psn_gap` names a PSN that tshark shows on the wire before the gap's frame
  on the same QP, between the gap's hosts or hosts one address bit from them.
"""
import ipaddress
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from derive_pcaps import csum16, icrc_roce_v2, read_pcap, roce_ipv4_bit_restored  # noqa: E402

ROCE_PORT = 4791
PSN_MOD = 1 << 24


def fail(message):
    sys.exit(f"address_bit_error_check: {message}")


def roce_frames(pcap):
    """(frame, IPv4 header, UDP header, IB bytes with ICRC) of the Ethernet/IPv4/UDP 4791 frames."""
    _, _, recs = read_pcap(pcap)
    for n, (_s, _u, _w, pkt) in enumerate(recs, 1):
        if len(pkt) < 34 or pkt[12:14] != b"\x08\x00" or pkt[23] != 17:
            continue
        ihl = (pkt[14] & 0x0F) * 4
        total = struct.unpack("!H", pkt[16:18])[0]
        ip, l4 = pkt[14:14 + ihl], pkt[14 + ihl:14 + total]
        if len(l4) >= 8 + 12 + 4 and struct.unpack("!H", l4[2:4])[0] == ROCE_PORT:
            yield n, ip, l4[:8], l4[8:]


def icrc_holds(ip, udp, ib):
    return icrc_roce_v2(ip, udp, ib[:-4], False) == ib[-4:]


def one_bit_apart(a, b):
    return bin(int(ipaddress.ip_address(a)) ^ int(ipaddress.ip_address(b))).count("1") == 1


def damaged_address_frames(pcap):
    """{frame: (captured src, captured dst)} for frames whose ICRC and IPv4 header checksum hold
    only with one address bit put back to an address of the intact frames."""
    frames = list(roce_frames(pcap))
    hosts = {bytes(ip[o:o + 4]) for _, ip, udp, ib in frames if icrc_holds(ip, udp, ib) for o in (12, 16)}
    recs = read_pcap(pcap)[2]
    found = {}
    for n, ip, udp, ib in frames:
        if icrc_holds(ip, udp, ib):
            continue
        restored = roce_ipv4_bit_restored(recs[n - 1][3], range(96, 160))  # the addresses' bits
        if restored is None or restored[1][12:16] not in hosts or restored[1][16:20] not in hosts:
            continue
        if csum16(bytes(ip)) == 0:
            fail(f"frame {n}: its IPv4 header checksum does not tell the same address bit")
        found[n] = (str(ipaddress.ip_address(ip[12:16])), str(ipaddress.ip_address(ip[16:20])))
    return found


def wire_psns(pcap):
    """[(frame, src, dst, qp, psn)] of every BTH tshark decodes."""
    cmd = ["tshark", "-r", pcap, "-n", "-o", "infiniband.identify_payload:FALSE", "-T", "fields",
           "-E", "separator=\t"]
    for f in ("frame.number", "ip.src", "ip.dst", "infiniband.bth.destqp", "infiniband.bth.psn"):
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return [(int(n), s, d, int(qp, 16), int(psn)) for n, s, d, qp, psn in rows if psn]


def same_or_one_bit(a, b):
    return a == b or one_bit_apart(a, b)


def main():
    rdmadiag, pcap = sys.argv[1], sys.argv[2]
    damaged = damaged_address_frames(pcap)
    if not damaged:
        fail(f"{pcap}: no RoCEv2 frame with a one-bit-off address: the capture is not the regression")
    report = json.loads(subprocess.run([rdmadiag, "analyze", pcap, "--json", "-"], capture_output=True,
                                       text=True, check=True).stdout)
    bad = {a["frame"] for a in report["anomalies"] if a["kind"] == "icrc_bad"}
    for n, (src, dst) in sorted(damaged.items()):
        print(f"frame {n}: {src} -> {dst}, ICRC and IPv4 checksum hold with one address bit put back; "
              f"rdmadiag icrc_bad: {n in bad}")
        if n not in bad:
            fail(f"frame {n}: rdmadiag does not report its bad ICRC")
    flows, psns = report["flows"], wire_psns(pcap)
    gaps = [a for a in report["anomalies"] if a["kind"] == "psn_gap"]
    for g in gaps:
        f = flows[g["flow"]]
        named = {(g["expected_psn"] + k) % PSN_MOD for k in range(g["count"])}
        seen = [w for w in psns if w[0] < g["frame"] and w[3] == g["dest_qp"] and w[4] in named
                and same_or_one_bit(w[1], f["src"]) and same_or_one_bit(w[2], f["dst"])]
        if seen:
            fail(f"psn_gap at frame {g['frame']} calls PSNs lost that tshark shows on the wire at frames "
                 f"{[w[0] for w in seen]}: {g['text']}")
    print(f"address_bit_error_check: {len(damaged)} damaged-address packet(s) reported as corrupt, "
          f"{len(gaps)} psn_gap(s), none naming a PSN on the wire")


if __name__ == "__main__":
    main()
