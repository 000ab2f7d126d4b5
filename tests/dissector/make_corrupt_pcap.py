#!/usr/bin/env python3
"""Makes tests/pcaps/rxe_write_bw_loss_corrupt_icrc.pcap: rxe_write_bw_loss.pcap
with one bit flipped in the payload of one RoCEv2 frame, so that frame (and only
it) has a bad ICRC. Deterministic; standard library only.

Frame 105 is an RC RDMA WRITE MIDDLE (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12
bytes of headers, then 1024 bytes of payload); the bit flipped is bit 0 of
payload byte 100, i.e. frame byte 154. The ICRC covers it; nothing else does
(no IPv4/UDP checksum covers RoCE payload: rxe sends UDP checksum 0)."""
import pathlib
import struct
import sys

FRAME = 105
FRAME_OFFSET = 14 + 20 + 8 + 12 + 100
BIT = 0x01

root = pathlib.Path(__file__).resolve().parents[2]
src = root / "tests/pcaps/rxe_write_bw_loss.pcap"
dst = root / "tests/pcaps/rxe_write_bw_loss_corrupt_icrc.pcap"
data = bytearray(src.read_bytes())
if struct.unpack_from("<I", data, 0)[0] != 0xA1B2C3D4:
    sys.exit("expected a little-endian microsecond pcap")
pos, frame = 24, 0
while pos + 16 <= len(data):
    incl = struct.unpack_from("<I", data, pos + 8)[0]
    frame += 1
    if frame == FRAME:
        if incl <= FRAME_OFFSET or data[pos + 16 + 12:pos + 16 + 14] != b"\x08\x00":
            sys.exit(f"frame {FRAME} is not the IPv4 RoCE frame expected")
        data[pos + 16 + FRAME_OFFSET] ^= BIT
        dst.write_bytes(data)
        print(f"wrote {dst} (frame {FRAME}, byte {FRAME_OFFSET}, bit 0x{BIT:02x} flipped)")
        sys.exit(0)
    pos += 16 + incl
sys.exit(f"{src} has fewer than {FRAME} frames")
