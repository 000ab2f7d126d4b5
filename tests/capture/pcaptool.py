#!/usr/bin/env python3
"""Independent pcap/pcapng reader for the capture tests (standard library only,
written from the file-format descriptions, shares no code with rdmadiag).

  pcaptool.py count FILE...          packets in each file; fails on a damaged/partial file
  pcaptool.py same A B [--prefix]    packet bytes of A equal B's (or A's are B's first packets)
  pcaptool.py rotation FILE BYTES    number of files a -C BYTES rotation of FILE's packets makes
  pcaptool.py linktype FILE          the link type of a pcap file
  pcaptool.py erfdata A B            packets of A (link type 247) equal the payloads of B's ERF records
"""
import struct
import sys


class Damaged(Exception):
    pass


def read_pcap(data):
    if len(data) < 24:
        raise Damaged("file header cut short")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise Damaged("not a pcap file")
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    linktype = struct.unpack(e + "I", data[20:24])[0]
    off, out = 24, []
    while off < len(data):
        if off + 16 > len(data):
            raise Damaged("record header cut short at offset %d" % off)
        sec, frac, incl, orig = struct.unpack(e + "IIII", data[off:off + 16])
        if off + 16 + incl > len(data):
            raise Damaged("record data cut short at offset %d" % off)
        ts = sec * 10**9 + (frac if nano else frac * 1000)
        out.append((ts, orig, data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return linktype, out


def read_pcapng(data):
    off, out, e, ifaces = 0, [], "<", []
    while off < len(data):
        if off + 12 > len(data):
            raise Damaged("block header cut short at offset %d" % off)
        btype = struct.unpack(e + "I", data[off:off + 4])[0]
        if btype == 0x0A0D0D0A:
            bom = data[off + 8:off + 12]
            e = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
        blen = struct.unpack(e + "I", data[off + 4:off + 8])[0]
        if blen < 12 or blen % 4 or off + blen > len(data):
            raise Damaged("block cut short at offset %d" % off)
        if struct.unpack(e + "I", data[off + blen - 4:off + blen])[0] != blen:
            raise Damaged("trailing block length mismatch at offset %d" % off)
        body = data[off + 8:off + blen - 4]
        if btype == 1:
            ifaces.append(struct.unpack(e + "H", body[:2])[0])
        elif btype == 6:
            iface, hi, lo, incl, orig = struct.unpack(e + "IIIII", body[:20])
            out.append(((hi << 32) | lo, orig, body[20:20 + incl]))
        off += blen
    return (ifaces[0] if ifaces else None), out


def read_any(path):
    data = open(path, "rb").read()
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        return read_pcapng(data)
    return read_pcap(data)


def main(argv):
    cmd = argv[1]
    if cmd == "count":
        for p in argv[2:]:
            print(len(read_any(p)[1]))
        return 0
    if cmd == "linktype":
        print(read_any(argv[2])[0])
        return 0
    if cmd == "same":
        a = [r[2] for r in read_any(argv[2])[1]]
        b = [r[2] for r in read_any(argv[3])[1]]
        if "--prefix" in argv:
            b = b[:len(a)]
        if a != b:
            n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            print("differ: %d vs %d packets, first difference at packet %d" % (len(a), len(b), n + 1))
            return 1
        print("same %d packets" % len(a))
        return 0
    if cmd == "rotation":
        # rdmadiag's rule: a new file starts before a record would push the current
        # one past the limit, unless the current one holds no packet yet.
        limit = int(argv[3])
        size, files, in_file = 24, 1, 0
        for _, _, d in read_any(argv[2])[1]:
            rec = 16 + len(d)
            if in_file and size + rec > limit:
                files, size, in_file = files + 1, 24, 0
            size += rec
            in_file += 1
        print(files)
        return 0
    if cmd == "erfdata":
        a = read_any(argv[2])[1]
        b = read_any(argv[3])[1]
        if len(a) != len(b):
            print("differ: %d vs %d packets" % (len(a), len(b)))
            return 1
        for i, (ra, rb) in enumerate(zip(a, b)):
            erf = rb[2]
            hdr_len = 16
            ext = erf[8] & 0x80
            while ext:
                ext = erf[hdr_len] & 0x80
                hdr_len += 8
            if erf[8] & 0x7F != 21 or erf[hdr_len:] != ra[2]:
                print("differ at packet %d" % (i + 1))
                return 1
        print("same %d packets" % len(a))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Damaged as exc:
        print("damaged: %s" % exc)
        sys.exit(1)
