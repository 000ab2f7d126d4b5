#!/usr/bin/env python3
"""Writes the fuzz_iwarp regression inputs that once made iWARP framing
quadratic (docs/robustness.md). Input format: tests/fuzz/iwarp_fuzzer.cpp.
usage: tests/fuzz/make_iwarp_regressions.py [OUT_DIR]  (default tests/fuzz/regressions/iwarp)"""
import os
import struct
import sys

MARKER_STRIDE = 512  # RFC 5044 section 4.3


def seg(direction, seq, ack, payload, syn=False, snap=False):
    """One harness segment; `snap` adds 1448 uncaptured bytes after the payload."""
    control = direction | (2 if syn else 0) | (0 if syn and direction == 0 else 16) | (32 if snap else 0)
    return bytes([control]) + struct.pack('>IIH', seq, ack, len(payload)) + payload


def mpa_frame(key, flags):
    return key + bytes([flags, 1]) + struct.pack('>H', 0)  # revision 1, no private data


def marked_fpdu(base_seq, ulpdu_len):
    """An FPDU (tagged header, zero CRC) starting at base_seq with its markers."""
    pad = (4 - ((2 + ulpdu_len) & 3)) & 3
    body = struct.pack('>H', ulpdu_len) + bytes([0x81, 0x40]) + bytes(ulpdu_len - 2) + bytes(pad) + bytes(4)
    out, s, i = bytearray(), base_seq, 0
    while i < len(body):
        if (s - base_seq) % MARKER_STRIDE == 0:
            out += struct.pack('>HH', 0, (s - base_seq) & 0xFFFF)
            s += 4
            continue
        out.append(body[i])
        i += 1
        s += 1
    return bytes(out)


def marked_fpdu_arriving_byte_by_byte():
    """Markers and CRC negotiated; a first FPDU (markers right, CRC wrong) settles
    the stride at 512, then a 64 KB FPDU arrives 1448 bytes then 1 byte at a time."""
    data = struct.pack('>II', 1000, 5000)
    req, rep = mpa_frame(b'MPA ID Req Frame', 0xC0), mpa_frame(b'MPA ID Rep Frame', 0xC0)
    data += seg(0, 0, 0, b'', syn=True) + seg(1, 0, 1, b'', syn=True)
    data += seg(0, 1, 1, req) + seg(1, 1, 1 + len(req), rep)
    base = 1 + len(req)
    first = marked_fpdu(base, 1100)
    s = base + len(first)
    header = struct.pack('>HH', 0, 0) if (s - base) % MARKER_STRIDE == 0 else b''
    header += struct.pack('>H', 0xFFF0) + bytes([0x81, 0x40])
    data += seg(0, base, 1 + len(rep), first + header)
    s += len(header)
    for _ in range(38):
        data += seg(0, s, 1 + len(rep), b'', snap=True)
        s += 1448
    while len(data) + 10 <= 65536 and len(data) // 10 < 4090:
        data += seg(0, s, 1 + len(rep), b'\x00')
        s += 1
    return data


def hunt_over_plausible_headers():
    """Mid-stream (no SYN), so framing hunts: every 4th octet starts a plausible
    64 KB tagged FPDU, and uncaptured bytes complete them."""
    data = struct.pack('>II', 1000, 5000)
    pattern = struct.pack('>H', 0xFFF0) + bytes([0x81, 0x40])
    s = 0
    while len(data) + 9 + 4095 <= 60000:
        data += seg(0, s, 0, pattern * 1023)
        s += 4092
    for _ in range(40):
        data += seg(0, s, 0, b'', snap=True)
        s += 1448
    return data


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'regressions', 'iwarp')
    os.makedirs(out, exist_ok=True)
    for name, make in (('marked-fpdu-arriving-byte-by-byte', marked_fpdu_arriving_byte_by_byte),
                       ('hunt-over-plausible-headers', hunt_over_plausible_headers)):
        with open(os.path.join(out, name), 'wb') as f:
            f.write(make())


if __name__ == '__main__':
    main()
