#!/usr/bin/env python3
"""Derive captures in other encapsulations from the real RoCEv2/IPv4 captures.

Usage:  derive_pcaps.py [--src tests/pcaps] [--out tests/pcaps/derived] [--check]

Takes real Soft-RoCE (rdma_rxe) frames from rxe_write_lat.pcap, rxe_read_lat.pcap
and rxe_send_lat_rdmacm.pcap (the first FIRST and the last LAST RoCEv2 frames of
each, so connection set-up, steady state and teardown are all present), keeps
their transport bytes unchanged -- BTH, extended headers, payload and pad, i.e.
everything between the UDP header and the old ICRC -- and re-encapsulates them.
Every new ICRC and VCRC is computed here, independently of rdmadiag, from the
rules in ../shared/README.md:

  ICRC = zlib.crc32 over a masked copy of the packet, stored little-endian;
    RoCEv2/IPv4: 8 x 0xFF, IPv4 hdr with TOS, TTL, checksum = ones, UDP with
                 checksum = ones, BTH with byte 4 = 0xFF, the rest
    RoCEv2/IPv6: 8 x 0xFF, IPv6 hdr with traffic class, flow label, hop limit
                 = ones, UDP checksum = ones, BTH byte 4 = 0xFF, the rest
    RoCEv1:      8 x 0xFF, GRH masked as IPv6, BTH byte 4 = 0xFF, the rest
    IB, LNH=2:   LRH with VL nibble = 0xF, BTH byte 4 = 0xFF, the rest
    IB, LNH=3:   8 x 0xFF instead of the LRH, GRH masked, BTH byte 4 = 0xFF, ...
  VCRC = CRC-16 poly 0x100B, reflected, init 0xFFFF, xorout 0xFFFF over LRH..ICRC,
         stored little-endian.

The IPv4 rule is self-tested: the script recomputes the ICRC of every source
frame it takes and stops if one differs from the wire.  Output files are
classic pcap (microsecond timestamps copied from the source frames).
Standard library only.
"""

import argparse
import os
import struct
import sys
import zlib

SOURCES = ["rxe_write_lat.pcap", "rxe_read_lat.pcap", "rxe_send_lat_rdmacm.pcap"]
FIRST = 50
LAST = 10
ROCE_PORT = 4791
ALT_PORT = 4792

SERVER_IP = bytes([10, 77, 0, 1])

LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL = 113
LINKTYPE_ERF = 197
LINKTYPE_INFINIBAND = 247
LINKTYPE_LINUX_SLL2 = 276

ERF_TYPE_ETH = 2
ERF_TYPE_INFINIBAND = 21
ERF_SNAP = 60  # bytes of packet an ERF record keeps in the *_snap60 files


# ----------------------------------------------------------------- pcap I/O

def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:4]
    if magic == b"\xd4\xc3\xb2\xa1":
        e = "<"
    elif magic == b"\xa1\xb2\xc3\xd4":
        e = ">"
    else:
        raise SystemExit("%s: not a microsecond classic pcap" % path)
    _, _, _, _, snaplen, linktype = struct.unpack(e + "HHiIII", data[4:24])
    recs = []
    off = 24
    while off + 16 <= len(data):
        sec, usec, caplen, wirelen = struct.unpack(e + "IIII", data[off:off + 16])
        off += 16
        recs.append((sec, usec, wirelen, data[off:off + caplen]))
        off += caplen
    return linktype, snaplen, recs


def write_pcap(path, linktype, records, snaplen=65535):
    """records: iterable of (sec, usec, wirelen, bytes)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)]
    for sec, usec, wirelen, pkt in records:
        out.append(struct.pack("<IIII", sec, usec, len(pkt), wirelen))
        out.append(pkt)
    with open(path, "wb") as f:
        f.write(b"".join(out))


# ----------------------------------------------------------------- CRCs

def icrc(masked):
    return struct.pack("<I", zlib.crc32(masked) & 0xFFFFFFFF)


def _vcrc_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0xD008 if c & 1 else c >> 1   # 0xD008 = 0x100B reflected
        table.append(c)
    return table


_VT = _vcrc_table()


def vcrc(data):
    c = 0xFFFF
    for b in data:
        c = (c >> 8) ^ _VT[(c ^ b) & 0xFF]
    return struct.pack("<H", c ^ 0xFFFF)


def vcrc_bitwise(data):
    """Plain bit-by-bit form, used to self-test the table form."""
    c = 0xFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0xD008 if c & 1 else c >> 1
    return struct.pack("<H", c ^ 0xFFFF)


def mask_bth(ib):
    return ib[:4] + b"\xff" + ib[5:]


def mask_ipv4(h):
    h = bytearray(h)
    h[1] = 0xFF                 # TOS (DSCP + ECN)
    h[8] = 0xFF                 # TTL
    h[10:12] = b"\xff\xff"      # header checksum
    return bytes(h)


def mask_ipv6(h):
    """IPv6 header or IB GRH: traffic class, flow label, hop limit -> ones."""
    h = bytearray(h)
    h[0] |= 0x0F
    h[1:4] = b"\xff\xff\xff"
    h[7] = 0xFF
    return bytes(h)


def mask_udp(u):
    return u[:6] + b"\xff\xff"


def icrc_roce_v2(l3, udp, ib, v6):
    return icrc(b"\xff" * 8 + (mask_ipv6(l3) if v6 else mask_ipv4(l3)) + mask_udp(udp) + mask_bth(ib))


def roce_ipv4_bit_restored(pkt, bits):
    """For an Ethernet/IPv4 frame `pkt`: the first bit of the IPv4 header among `bits` (0 = the
    header's first bit) whose flip makes the header a 20-byte unfragmented UDP one with a good
    RFC 1071 checksum, the UDP destination port 4791 and the RoCEv2 ICRC hold, as
    (bit, repaired IPv4 header, UDP header, IB bytes with ICRC); None when no such bit."""
    if len(pkt) < 14 + 20 + 8 + 12 + 4:
        return None
    for bit in bits:
        ip = bytearray(pkt[14:34])
        ip[bit // 8] ^= 0x80 >> (bit % 8)
        total = struct.unpack("!H", ip[2:4])[0]
        if ip[0] != 0x45 or ip[9] != 17 or struct.unpack("!H", ip[6:8])[0] & 0x3FFF or csum16(bytes(ip)) != 0:
            continue
        l4 = pkt[34:14 + total]
        if len(l4) < 8 + 12 + 4 or struct.unpack("!H", l4[2:4])[0] != 4791:
            continue
        if icrc_roce_v2(bytes(ip), l4[:8], l4[8:-4], False) == l4[-4:]:
            return bit, bytes(ip), l4[:8], l4[8:]
    return None


# ----------------------------------------------------------------- headers

def csum16(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4_header_checksum(h):
    h = bytearray(h)
    h[10:12] = b"\0\0"
    c = csum16(bytes(h))
    h[10:12] = struct.pack("!H", c)
    return bytes(h)


def udp_checksum(src, dst, udp_and_payload, v6):
    if v6:
        pseudo = src + dst + struct.pack("!I3xB", len(udp_and_payload), 17)
    else:
        pseudo = src + dst + struct.pack("!xBH", 17, len(udp_and_payload))
    c = csum16(pseudo + udp_and_payload[:6] + b"\0\0" + udp_and_payload[8:])
    return c or 0xFFFF


def v6_addr(ip4):
    """fd00:77::<last octet> -- ULA addresses standing for 10.77.0.x."""
    return bytes.fromhex("fd000077000000000000000000000000")[:15] + ip4[3:4]


def v4_mapped(ip4):
    return b"\0" * 10 + b"\xff\xff" + ip4


def ib_gid(ip4):
    """fe80::2:c903:a:1b0x -- link-local GID (subnet prefix + a port GUID)."""
    return bytes.fromhex("fe800000000000000002c903000a1b00")[:15] + ip4[3:4]


def flow_label(sport):
    return (sport * 2654435761) & 0xFFFFF


def ipv6_header(tclass, flow, paylen, nxt, hop, src, dst):
    word = (6 << 28) | (tclass << 20) | flow
    return struct.pack("!IHBB", word, paylen, nxt, hop) + src + dst


def lrh(vl, sl, lnh, dlid, slid, pktlen_words):
    return struct.pack("!BBHHH", (vl << 4) | 0, (sl << 4) | lnh, dlid, pktlen_words & 0x7FF, slid)


# ----------------------------------------------------------------- source frames

class Frame:
    def __init__(self, sec, usec, eth, ipv4, udp, ib):
        self.sec, self.usec = sec, usec
        self.eth = eth          # 14-byte Ethernet header (dst, src, type)
        self.ipv4 = ipv4        # IPv4 header as on the wire
        self.udp = udp          # 8-byte UDP header as on the wire
        self.ib = ib            # BTH .. end of pad (old ICRC removed)

    @property
    def src_ip(self):
        return self.ipv4[12:16]

    @property
    def dst_ip(self):
        return self.ipv4[16:20]

    @property
    def sport(self):
        return struct.unpack("!H", self.udp[0:2])[0]


def roce_frames(path):
    linktype, _, recs = read_pcap(path)
    assert linktype == LINKTYPE_ETHERNET, path
    frames = []
    for sec, usec, wirelen, pkt in recs:
        if len(pkt) != wirelen or len(pkt) < 14 + 20 + 8 + 12 + 4:
            continue
        if pkt[12:14] != b"\x08\x00" or pkt[14] >> 4 != 4 or pkt[23] != 17:
            continue
        ihl = (pkt[14] & 0x0F) * 4
        total = struct.unpack("!H", pkt[16:18])[0]
        ip = pkt[14:14 + ihl]
        udp = pkt[14 + ihl:14 + ihl + 8]
        if struct.unpack("!H", udp[2:4])[0] != ROCE_PORT:
            continue
        end = 14 + total
        ib = pkt[14 + ihl + 8:end - 4]
        wire_icrc = pkt[end - 4:end]
        if icrc_roce_v2(ip, udp, ib, False) != wire_icrc:
            raise SystemExit("%s: self-test failed: our ICRC of a source frame differs from the wire" % path)
        if len(ib) % 4:
            raise SystemExit("%s: transport bytes not 4-byte aligned" % path)
        frames.append(Frame(sec, usec, pkt[:14], ip, udp, ib))
    return frames


# ----------------------------------------------------------------- encapsulations

def roce_v2_ipv4(f, dport=ROCE_PORT):
    udp = bytearray(f.udp)
    udp[2:4] = struct.pack("!H", dport)
    if udp[6:8] != b"\0\0":     # keep a zero checksum zero, recompute a real one
        udp[6:8] = struct.pack("!H", udp_checksum(f.src_ip, f.dst_ip, bytes(udp) + f.ib + b"\0" * 4, False))
    udp = bytes(udp)
    return f.ipv4 + udp + f.ib + icrc_roce_v2(f.ipv4, udp, f.ib, False)


def roce_v2_ipv6_l3(f, atomic_fragment=False):
    src, dst = v6_addr(f.src_ip), v6_addr(f.dst_ip)
    tclass = f.ipv4[1]           # same DSCP/ECN as the source frame
    udp_len = 8 + len(f.ib) + 4
    ext = b""
    if atomic_fragment:
        # RFC 6946: a Fragment header with offset 0 and M = 0 (the whole packet);
        # the ICRC covers it as part of the IP header, like IPv4 options.
        ext = struct.pack("!BBHI", 17, 0, 0, 0x1000 + f.usec % 0xFFFF)
    ip6 = ipv6_header(tclass, flow_label(f.sport), len(ext) + udp_len, 44 if ext else 17, 64, src, dst) + ext
    udp = f.udp[0:4] + struct.pack("!HH", udp_len, 0)
    # the UDP checksum covers the ICRC, which masks the checksum: compute ICRC first
    crc = icrc_roce_v2(ip6, udp, f.ib, True)
    udp = udp[:6] + struct.pack("!H", udp_checksum(src, dst, udp + f.ib + crc, True))
    return ip6 + udp + f.ib + crc


def eth(f, ethertype, tags=b""):
    return f.eth[:12] + tags + struct.pack("!H", ethertype)


def vlan_tag(tpid, pcp, vid):
    return struct.pack("!HH", tpid, (pcp << 13) | vid)


def sll(f, v2):
    outgoing = f.src_ip == SERVER_IP   # recorded with tcpdump -i any on the server
    pkttype = 4 if outgoing else 0
    addr = f.eth[6:12] + b"\0\0"
    if v2:
        return struct.pack("!HHIHBB", 0x0800, 0, 2, 1, pkttype, 6) + addr
    return struct.pack("!HHH", pkttype, 1, 6) + addr + struct.pack("!H", 0x0800)


def roce_v1(f):
    sgid, dgid = v4_mapped(f.src_ip), v4_mapped(f.dst_ip)
    grh = ipv6_header(f.ipv4[1], flow_label(f.sport), len(f.ib) + 4, 0x1B, 64, sgid, dgid)
    crc = icrc(b"\xff" * 8 + mask_ipv6(grh) + mask_bth(f.ib))
    return eth(f, 0x8915) + grh + f.ib + crc


def native_ib(f, with_grh):
    slid, dlid = f.src_ip[3], f.dst_ip[3]     # LID 1 = server, LID 2 = client
    grh = b""
    if with_grh:
        grh = ipv6_header(0, flow_label(f.sport), len(f.ib) + 4, 0x1B, 64, ib_gid(f.src_ip), ib_gid(f.dst_ip))
    words = (8 + len(grh) + len(f.ib) + 4) // 4
    hdr = lrh(0, 0, 3 if with_grh else 2, dlid, slid, words)
    if with_grh:
        crc = icrc(b"\xff" * 8 + mask_ipv6(grh) + mask_bth(f.ib))
    else:
        masked_lrh = bytes([hdr[0] | 0xF0]) + hdr[1:]
        crc = icrc(masked_lrh + mask_bth(f.ib))
    pkt = hdr + grh + f.ib + crc
    return pkt + vcrc(pkt)


def erf_header(f, erf_type, rlen, wlen):
    frac = (f.usec << 32) // 1000000
    ts = (f.sec << 32) | frac
    return struct.pack("<Q", ts) + struct.pack("!BBHHH", erf_type, 0x04, rlen, 0, wlen)


def erf_record(f, pkt, keep=None):
    """ERF type 21; with `keep`, cut as a snap length does: rlen counts the bytes
    kept, wlen (the packet on the wire) stays."""
    kept = pkt[:keep]
    return erf_header(f, ERF_TYPE_INFINIBAND, 16 + len(kept), len(pkt)) + kept


def erf_eth_record(f, frame, keep=None):
    """ERF type 2: a 2-byte offset/pad field, then the frame and its FCS (CRC-32,
    little-endian on the wire), which wlen counts."""
    wire = frame + struct.pack("<I", zlib.crc32(frame) & 0xFFFFFFFF)
    kept = wire[:keep]
    return erf_header(f, ERF_TYPE_ETH, 16 + 2 + len(kept), len(wire)) + b"\0\0" + kept


# ----------------------------------------------------------------- main

def derive(src_dir, out_dir):
    frames = []
    per_source = []
    for name in SOURCES:
        fr = roce_frames(os.path.join(src_dir, name))
        # A prefix of each source, never a cut in the middle (that would be a real
        # PSN gap); all of the rdma_cm run, so its CM setup and teardown are both in.
        take = fr if "rdmacm" in name else fr[:FIRST + LAST]
        per_source.append((name, len(take), len(fr)))
        frames.append(take)
    frames.sort(key=lambda fl: (fl[0].sec, fl[0].usec))
    frames = [f for fl in frames for f in fl]

    # self-test of the VCRC table against the bitwise definition
    for f in frames[:20]:
        p = native_ib(f, False)[:-2]
        assert vcrc(p) == vcrc_bitwise(p)

    def recs(build):
        out = []
        for f in frames:
            pkt = build(f)
            out.append((f.sec, f.usec, len(pkt), pkt))
        return out

    files = {
        "rxe_roce_v2_ipv6.pcap": (LINKTYPE_ETHERNET, lambda f: eth(f, 0x86DD) + roce_v2_ipv6_l3(f)),
        "rxe_roce_v2_ipv6_atomic_fragment.pcap": (LINKTYPE_ETHERNET,
                                                  lambda f: eth(f, 0x86DD) + roce_v2_ipv6_l3(f, True)),
        "rxe_roce_v2_vlan.pcap": (LINKTYPE_ETHERNET,
                                  lambda f: eth(f, 0x0800, vlan_tag(0x8100, 3, 100)) + roce_v2_ipv4(f)),
        "rxe_roce_v2_qinq.pcap": (LINKTYPE_ETHERNET,
                                  lambda f: eth(f, 0x0800, vlan_tag(0x88A8, 0, 200) + vlan_tag(0x8100, 3, 100))
                                  + roce_v2_ipv4(f)),
        "rxe_roce_v2_sll2.pcap": (LINKTYPE_LINUX_SLL2, lambda f: sll(f, True) + roce_v2_ipv4(f)),
        "rxe_roce_v2_sll.pcap": (LINKTYPE_LINUX_SLL, lambda f: sll(f, False) + roce_v2_ipv4(f)),
        "rxe_roce_v1.pcap": (LINKTYPE_ETHERNET, roce_v1),
        "rxe_ib_lnh2.pcap": (LINKTYPE_INFINIBAND, lambda f: native_ib(f, False)),
        "rxe_ib_lnh3.pcap": (LINKTYPE_INFINIBAND, lambda f: native_ib(f, True)),
        "rxe_ib_lnh2_erf.pcap": (LINKTYPE_ERF, lambda f: erf_record(f, native_ib(f, False))),
        "rxe_ib_lnh3_erf.pcap": (LINKTYPE_ERF, lambda f: erf_record(f, native_ib(f, True))),
        "rxe_ib_lnh3_erf_snap60.pcap": (LINKTYPE_ERF, lambda f: erf_record(f, native_ib(f, True), ERF_SNAP)),
        "rxe_roce_v2_erf_eth.pcap": (LINKTYPE_ERF, lambda f: erf_eth_record(f, eth(f, 0x0800) + roce_v2_ipv4(f))),
        "rxe_roce_v2_erf_eth_snap60.pcap": (LINKTYPE_ERF,
                                            lambda f: erf_eth_record(f, eth(f, 0x0800) + roce_v2_ipv4(f), ERF_SNAP)),
        "rxe_roce_v2_udp4792.pcap": (LINKTYPE_ETHERNET,
                                     lambda f: eth(f, 0x0800) + roce_v2_ipv4(f, ALT_PORT)),
    }
    os.makedirs(out_dir, exist_ok=True)
    made = []
    for name, (lt, build) in files.items():
        path = os.path.join(out_dir, name)
        write_pcap(path, lt, recs(build))
        made.append((path, len(frames)))

    # h. snap length 64: the whole of rxe_write_lat.pcap, every record cut to 64 bytes
    _, _, src = read_pcap(os.path.join(src_dir, "rxe_write_lat.pcap"))
    path = os.path.join(out_dir, "rxe_write_lat_snap64.pcap")
    write_pcap(path, LINKTYPE_ETHERNET, [(s, u, w, p[:64]) for s, u, w, p in src], snaplen=64)
    made.append((path, len(src)))
    return made, per_source


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=os.path.join(here, "..", "pcaps"))
    ap.add_argument("--out", default=os.path.join(here, "..", "pcaps", "derived"))
    args = ap.parse_args()
    made, per_source = derive(args.src, args.out)
    for name, taken, total in per_source:
        print("source %s: first %d of %d RoCEv2 frames; source ICRCs re-verified" % (name, taken, total))
    for path, n in made:
        print("wrote %s: %d frames, %d bytes" % (os.path.relpath(path), n, os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
