#!/usr/bin/env python3
"""Writes a classic pcap file's records as a pcapng file (pcapng draft, sections 4.1-4.3),
written here from the format's text, not by the program under test or by libpcap.

usage: to_pcapng.py IN.pcap OUT.pcapng [--blocks] [--comments] [--big-endian]
  --blocks      a name resolution, a custom and an interface statistics block between
                packets now and then, and an interface statistics block at the end (as
                dumpcap writes it): blocks a reader passes over
  --comments    an opt_comment on every 7th packet block (options after the data)
  --big-endian  the whole file in big-endian byte order
  --sll-half    from the middle record on, the packets belong to a second interface,
                described there, of link type LINUX_SLL (113): each Ethernet header
                becomes a cooked header with the same protocol (a reader must take each
                record's link type from its interface)
The interface's if_tsresol is 9 for a nanosecond pcap file, absent (microseconds) otherwise.
"""
import struct
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, dst, flags = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    e = ">" if "--big-endian" in flags else "<"
    d = open(src, "rb").read()
    magic = struct.unpack("<I", d[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        pe = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        pe = ">"
        magic = struct.unpack(">I", d[:4])[0]
    else:
        sys.exit(f"{src}: not a classic pcap file")
    nsec = magic == 0xA1B23C4D
    snaplen, linktype = struct.unpack(pe + "II", d[16:24])

    def block(btype, body):
        length = 12 + len(body)
        return struct.pack(e + "II", btype, length) + body + struct.pack(e + "I", length)

    def option(code, value):
        return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)

    end = option(0, b"")
    out = [block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1)),
           block(1, struct.pack(e + "HHI", linktype, 0, snaplen) +
                 (option(9, b"\x09") + end if nsec else b""))]
    records, i = [], 24
    while i + 16 <= len(d):
        sec, frac, cap, wire = struct.unpack(pe + "IIII", d[i:i + 16])
        records.append((sec, frac, cap, wire, d[i + 16:i + 16 + cap]))
        i += 16 + cap
    half = len(records) // 2 if "--sll-half" in flags else None
    if half is not None and linktype != 1:
        sys.exit("--sll-half: Ethernet captures only")
    n = 0
    for sec, frac, cap, wire, data in records:
        iface = 0
        if half is not None and n >= half:
            if n == half:
                out.append(block(1, struct.pack(e + "HHI", 113, 0, snaplen)))
            # LINUX_SLL: packet type, ARPHRD_ETHER, address length, address (8 bytes), protocol
            data = struct.pack(">HHH", 0, 1, 6) + data[6:12] + bytes(2) + data[12:]
            cap, wire, iface = len(data), wire + 2, 1
        n += 1
        ts = sec * (10**9 if nsec else 10**6) + frac
        opts = option(1, b"a comment") + end if "--comments" in flags and n % 7 == 0 else b""
        out.append(block(6, struct.pack(e + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, cap, wire) + data +
                         bytes(-cap % 4) + opts))
        if "--blocks" in flags:
            if n % 50 == 0:
                out.append(block(4, struct.pack(e + "HH", 0, 0)))  # name resolution: nothing but its end
            if n % 70 == 0:
                out.append(block(0xBAD, struct.pack(e + "I", 32473) + b"abcd"))  # custom, copyable
            if n % 90 == 0:
                out.append(block(5, struct.pack(e + "III", 0, ts >> 32, ts & 0xFFFFFFFF) + end))
    if "--blocks" in flags:
        out.append(block(5, struct.pack(e + "III", 0, 0, 0) + end))
    open(dst, "wb").write(b"".join(out))


if __name__ == "__main__":
    main()
