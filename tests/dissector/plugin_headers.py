#!/usr/bin/env python3
"""The plugin decodes the headers Wireshark 4.0 leaves raw or misparses.

Builds RoCEv2/IPv4 frames whose values are set here (standard library only;
ICRC per docs/protocols.md: zlib CRC-32 over the masked copy, little-endian) and
checks what tshark shows through the plugin against those values:
a CNP with BECN set, an XRC SEND ONLY with FECN and an XRCETH, an RD SEND ONLY
(RDETH + DETH; SE, MigReq and AckReq set), an RC SEND ONLY marked ECN CE. BTH bits
are shown only when set: `-Y rdmadiag.bth.<bit>` lists the frames built with it. Wireshark 4.0's own dissector
calls the first two "Unknown OpCode" and the third a Mellanox DC packet.
The field's own description (`tshark -G fields`) must name every
rdmadiag.bth.service value shown, spelled as shown (a filter is case-sensitive)."""
import argparse
import pathlib
import struct
import sys
import tempfile
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tshark_plugin import tshark_or_skip  # noqa: E402


def ip_checksum(h):
    s = sum(struct.unpack("!10H", h))
    s = (s & 0xFFFF) + (s >> 16)
    return ~((s & 0xFFFF) + (s >> 16)) & 0xFFFF


def roce_frame(ib, ecn=0):
    udp_len = 8 + len(ib) + 4
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, ecn, 20 + udp_len, 1, 0x4000, 64, 17, 0,
                               bytes([10, 77, 0, 2]), bytes([10, 77, 0, 1])))
    ip[10:12] = struct.pack("!H", ip_checksum(bytes(ip)))
    udp = struct.pack("!HHHH", 49441, 4791, udp_len, 0)
    masked_ip = bytearray(ip)
    masked_ip[1], masked_ip[8], masked_ip[10:12] = 0xFF, 0xFF, b"\xff\xff"
    masked_ib = bytearray(ib)
    masked_ib[4] = 0xFF
    icrc = zlib.crc32(b"\xff" * 8 + bytes(masked_ip) + udp[:6] + b"\xff\xff" + bytes(masked_ib))
    eth = bytes.fromhex("525400770001525400770002") + b"\x08\x00"
    return eth + bytes(ip) + udp + ib + struct.pack("<I", icrc)


def bth(opcode, qp, psn, fecn=0, becn=0, se=0, migreq=0, ackreq=0):
    return (struct.pack("!BBH", opcode, (se << 7) | (migreq << 6), 0xFFFF) + bytes([(fecn << 7) | (becn << 6)]) +
            qp.to_bytes(3, "big") + bytes([ackreq << 7]) + psn.to_bytes(3, "big"))


# (frame bytes, fields the plugin must show). Each frame its own QP, so the analysis sees four flows.
# BTH bits are shown only when set (docs/wireshark.md): "" is a field absent.
CASES = [
    (roce_frame(bth(0x81, 0x21, 0, becn=1) + bytes(16)),
     {"rdmadiag.bth.service": "CNP", "rdmadiag.cnp": "1", "rdmadiag.bth.becn": "1", "rdmadiag.bth.fecn": "",
      "rdmadiag.bth.se": "", "rdmadiag.bth.migreq": "", "rdmadiag.bth.ackreq": "", "rdmadiag.icrc.status": "1"}),
    (roce_frame(bth(0xA4, 0x22, 100, fecn=1) + (0x2A).to_bytes(4, "big") + bytes(64)),
     {"rdmadiag.bth.opcode_name": "XRC_SEND_ONLY", "rdmadiag.bth.service": "XRC", "rdmadiag.xrceth.srq": "0x00002a",
      "rdmadiag.bth.fecn": "1", "rdmadiag.bth.becn": "", "rdmadiag.icrc.status": "1"}),
    (roce_frame(bth(0x44, 0x23, 7, se=1, migreq=1, ackreq=1) + (0x1234).to_bytes(4, "big") +
                bytes.fromhex("1111111100000005") + bytes(32)),
     {"rdmadiag.bth.opcode_name": "RD_SEND_ONLY", "rdmadiag.bth.service": "RD",
      "rdmadiag.rdeth.ee_context": "0x001234", "rdmadiag.deth.qkey": "0x11111111", "rdmadiag.deth.src_qp": "0x000005",
      "rdmadiag.bth.se": "1", "rdmadiag.bth.migreq": "1", "rdmadiag.bth.ackreq": "1", "rdmadiag.bth.fecn": "",
      "rdmadiag.bth.becn": "", "rdmadiag.icrc.status": "1"}),
    (roce_frame(bth(0x04, 0x24, 5) + bytes(64), ecn=3),
     {"rdmadiag.bth.opcode_name": "RC_SEND_ONLY", "rdmadiag.ecn_ce": "1", "rdmadiag.icrc.status": "1"}),
]


def blurb(ts, abbrev):
    """The description tshark registers for a field (last column of `tshark -G fields`)."""
    for line in ts.run(["-G", "fields"]).stdout.splitlines():
        cols = line.split("\t")
        if len(cols) > 2 and cols[0] == "F" and cols[2] == abbrev:
            return cols[-1]
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin-root", required=True)
    args = ap.parse_args()
    ts = tshark_or_skip(args.plugin_root)
    if not ts:
        return 77
    work = pathlib.Path(tempfile.mkdtemp(prefix="rdmadiag-ws-headers-"))
    work.chmod(0o755)
    pcap = work / "headers.pcap"
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, (f, _) in enumerate(CASES):
        data += struct.pack("<IIII", 1000 + i, 0, len(f), len(f)) + f
    pcap.write_bytes(data)
    pcap.chmod(0o644)
    fields = sorted({k for _, want in CASES for k in want})
    r = ts.run(["-r", str(pcap), "-T", "fields"] + sum([["-e", f] for f in fields], []))
    if r.returncode != 0:
        print(f"FAIL: tshark exited {r.returncode}: {r.stderr.strip()}")
        return 1
    failures = 0
    for n, (line, (_, want)) in enumerate(zip(r.stdout.splitlines(), CASES), 1):
        got = dict(zip(fields, line.split("\t")))
        for k, v in want.items():
            # tshark 4.0 prints booleans as 1/0; later releases as True/False.
            shown = {"True": "1", "False": "0"}.get(got[k], got[k])
            if shown != v:
                failures += 1
                print(f"FAIL frame {n} {k}: want {v!r}, plugin shows {got[k]!r}")
    # A bare BTH bit name selects exactly the frames built with that bit set.
    for flag in ("se", "migreq", "fecn", "becn", "ackreq"):
        field = f"rdmadiag.bth.{flag}"
        want = [n for n, (_, w) in enumerate(CASES, 1) if w.get(field) == "1"]
        r = ts.run(["-r", str(pcap), "-Y", field, "-T", "fields", "-e", "frame.number"])
        shown = [int(x) for x in r.stdout.split()]
        if shown != want:
            failures += 1
            print(f"FAIL -Y {field} lists frames {shown}, set in {want}")
    words = set(blurb(ts, "rdmadiag.bth.service").replace(",", " ").split())
    for value in sorted({want["rdmadiag.bth.service"] for _, want in CASES if "rdmadiag.bth.service" in want}):
        if value not in words:
            failures += 1
            print(f"FAIL rdmadiag.bth.service shows {value!r}, its description lists {sorted(words)}")
    print(f"{len(CASES)} crafted frames, {sum(len(w) for _, w in CASES)} fields checked, {failures} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
