#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into OUTDIR/<target>/, from the
captures in tests/pcaps/ (one seed per frame, short frame sequences, TCP
segments of the siw captures) and from byte fixtures built here (pcapng and
big-endian variants of a capture, perftest out-of-band messages). The layouts
are those documented at the top of each *_fuzzer.cpp.

usage: make_seeds.py PCAP_DIR OUTDIR
"""
import hashlib
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'capture'))
import pcaptool  # noqa: E402  (the independent pcap reader of the capture tests)

# Index of each link type in kLinkTypes (tests/fuzz/fuzz_input.h).
LINKTYPE_INDEX = {1: 0, 12: 1, 14: 2, 101: 3, 113: 4, 197: 5, 228: 6, 229: 7, 247: 8, 276: 9}

MAX_FRAMES_PER_FILE = 48     # single-frame seeds taken from each capture
SEQUENCE_FRAMES = 40         # frames in a sequence seed
FILE_SEED_RECORDS = 12       # records kept in a whole-file seed


def read_pcap(path):
    """(file header bytes, byte order, linktype, [(record header bytes, ts_sec, ts_frac, caplen, wirelen, data)])."""
    with open(path, 'rb') as f:
        blob = f.read()
    linktype, packets = pcaptool.read_pcap(blob)
    e = '<' if blob[:4] in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1') else '>'
    frac_per_sec = 10**9 if blob[:4] in (b'\x4d\x3c\xb2\xa1', b'\xa1\xb2\x3c\x4d') else 10**6
    records = []
    for ts, wirelen, data in packets:
        sec, frac = ts // 10**9, ts % 10**9 * frac_per_sec // 10**9
        records.append((struct.pack(e + 'IIII', sec, frac, len(data), wirelen), sec, frac, len(data), wirelen, data))
    return blob[:24], e, linktype, records


class SeedWriter:
    def __init__(self, outdir):
        self.outdir = outdir
        self.counts = {}

    def write(self, target, data):
        d = os.path.join(self.outdir, target)
        os.makedirs(d, exist_ok=True)
        name = hashlib.sha1(data).hexdigest()
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)
        self.counts[target] = self.counts.get(target, 0) + 1


def frame_seeds(w, linktype, records):
    sel = LINKTYPE_INDEX[linktype]
    for _, _, _, caplen, wirelen, data in records[:MAX_FRAMES_PER_FILE]:
        w.write('decode_frame', bytes([sel, min(255, wirelen - caplen), 0]) + data)


def sequence_seeds(w, linktype, records):
    sel = LINKTYPE_INDEX[linktype]
    for start in range(0, min(len(records), 4 * SEQUENCE_FRAMES), SEQUENCE_FRAMES):
        out = bytearray([sel])
        for _, _, _, caplen, wirelen, data in records[start:start + SEQUENCE_FRAMES]:
            data = data[:0x7fff]
            out += struct.pack('>HB', len(data) | (0x8000 if wirelen > caplen else 0), 10) + data
        w.write('analyzer', bytes(out))
        # The plugin glue target: the same frames after two preference bytes
        # (heuristic on; PMTU from the trace, and 1024).
        w.write('dissector_glue', bytes([sel, 1, 0]) + bytes(out[1:]))
        w.write('dissector_glue', bytes([sel, 1, 3]) + bytes(out[1:]))


def tcp_segments(linktype, records):
    """(direction, flags, seq, ack, payload, cut) of each IPv4/TCP frame of an Ethernet capture."""
    if linktype != 1:
        return
    first_src = None
    for _, _, _, caplen, wirelen, data in records:
        if len(data) < 54 or data[12:14] != b'\x08\x00' or data[23] != 6:
            continue
        ihl = (data[14] & 15) * 4
        total = struct.unpack('>H', data[16:18])[0]
        tcp = 14 + ihl
        src = (data[26:30], data[tcp:tcp + 2])
        if first_src is None:
            first_src = src
        seq, ack = struct.unpack('>II', data[tcp + 4:tcp + 12])
        doff = (data[tcp + 12] >> 4) * 4
        flags = data[tcp + 13]
        payload = data[tcp + doff:14 + total]
        yield (0 if src == first_src else 1, flags, seq, ack, payload, wirelen > caplen)


def iwarp_seeds(w, linktype, records):
    segs = list(tcp_segments(linktype, records))
    if not segs:
        return
    isn = [None, None]
    for d, flags, seq, ack, _, _ in segs:
        if isn[d] is None:
            isn[d] = seq
    isn = [v if v is not None else 0 for v in isn]
    for start in range(0, min(len(segs), 120), 40):
        out = bytearray(struct.pack('>II', isn[0], isn[1]))
        for d, flags, seq, ack, payload, cut in segs[start:start + 40]:
            control = d | (2 if flags & 2 else 0) | (4 if flags & 1 else 0) | (8 if flags & 4 else 0) \
                | (16 if flags & 16 else 0) | (32 if cut else 0)
            out += struct.pack('>BIIH', control, (seq - isn[d]) & 0xffffffff,
                               (ack - isn[d ^ 1]) & 0xffffffff, len(payload)) + payload
        w.write('iwarp', bytes(out))


def pcapng(linktype, records, big_endian=False, extra_blocks=(), second=None, between=None):
    """The records as a pcapng file (SHB, IDB, EPBs), optionally with other blocks after the IDB;
    with `second` (link type, if_tsresol), a second interface that takes every other record;
    with `between` (a block), that block after every third record and a comment on every fifth
    (what capture/file_reader.h reads in place: blocks passed over, packet options)."""
    e = '>' if big_endian else '<'

    def block(btype, body):
        body += b'\0' * (-len(body) % 4)
        n = 12 + len(body)
        return struct.pack(e + 'II', btype, n) + body + struct.pack(e + 'I', n)

    out = block(0x0A0D0D0A, struct.pack(e + 'IHHq', 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack(e + 'HHI', linktype, 0, 65535))
    if second:
        out += block(1, struct.pack(e + 'HHIHHB3xHH', second[0], 0, 65535, 9, 1, second[1], 0, 0))
    for b in extra_blocks:
        out += block(*b)
    for i, (_, ts_sec, ts_frac, caplen, wirelen, data) in enumerate(records):
        ts = ts_sec * 1000000 + ts_frac
        iface = i % 2 if second else 0
        comment = b''
        if between and i % 5 == 4:
            comment = struct.pack(e + 'HH', 1, 5) + b'note\0\0\0\0' + struct.pack(e + 'HH', 0, 0)
        out += block(6, struct.pack(e + 'IIIII', iface, ts >> 32, ts & 0xffffffff, caplen, wirelen) + data +
                     b'\0' * (-len(data) % 4) + comment)
        if between and i % 3 == 2:
            out += block(*between)
    return out


def file_seeds(w, header, e, linktype, records):
    recs = records[:FILE_SEED_RECORDS]
    w.write('file_reader', header + b''.join(r[0] + r[5] for r in recs))
    # The same records big-endian, and as pcapng (little, big, with an unknown block).
    be = struct.pack('>IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, linktype)
    be += b''.join(struct.pack('>IIII', *r[1:5]) + r[5] for r in recs)
    w.write('file_reader', be)
    w.write('file_reader', pcapng(linktype, recs))
    w.write('file_reader', pcapng(linktype, recs, big_endian=True))
    w.write('file_reader', pcapng(linktype, recs, extra_blocks=[(0x0BADF00D, b'hostile'), (5, b'\0' * 16)]))
    # Read in place: blocks passed over between the packets, packet options.
    w.write('file_reader', pcapng(linktype, recs, between=(5, b'\0' * 16)))
    w.write('file_reader', pcapng(linktype, recs, big_endian=True, between=(0xBAD, b'\0\0\x7e\xd9abcd')))
    # Interfaces of two link types (libpcap refuses; PcapngReader reads), nanoseconds on the second.
    w.write('file_reader', pcapng(linktype, recs, second=(113, 9)))
    w.write('file_reader', pcapng(linktype, recs[:4]) + pcapng(linktype, recs[4:], big_endian=True, second=(1, 0x8a)))


def oob_seeds(w):
    key_with_gid = ('%04x:%04x:%06x:%06x:%08x:%016x' % (0, 16, 0x11, 0x7a1b2c, 0x1234, 0x7f0000001000)
                    + ''.join(':%02x' % b for b in bytes(10) + b'\xff\xff\x0a\x4d\x00\x01')
                    + ':%08x:' % 0).encode() + b'\0'
    key_without_gid = ('%04x:%04x:%06x:%06x:%08x:%016x:%08x' % (3, 16, 0x11, 0x7a1b2c, 0x1234, 0x7f0000001000, 0)).encode() + b'\0'
    assert len(key_with_gid) == 108 and len(key_without_gid) == 59
    seeds = [
        (0, b'6.06\0rdmadiag/1\0'), (0, b'5.70\0' + b'\0' * 11), (0, b'6.28' + b'\0' * 12),
        (1, struct.pack('>I', 4096)), (2, b'3\0'), (2, b'5\0'),
        (3, key_with_gid), (4, key_without_gid),
        (5, struct.pack('>QQddd', 65536, 5000, 1234.5, 1200.25, 0.018)),
        (6, b'size=2;iters=1000;tx_depth=1;'.ljust(256, b'\0')),
        (7, struct.pack('>7i4xQQ8i', 0, 0, 2, 0, 1, 0, 1, 2, 1000, 0, 1, 5, 0, 0, 0, 0, 0)
         + b'\0' * 232 + b'\0' * 8),
        (8, b'done\0'),
    ]
    for sel, msg in seeds:
        w.write('oob', bytes([sel]) + msg)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    pcap_dir, outdir = sys.argv[1:]
    w = SeedWriter(outdir)
    paths = []
    for root, _, files in os.walk(pcap_dir):
        paths += [os.path.join(root, f) for f in files if f.endswith('.pcap')]
    for path in sorted(paths):
        header, e, linktype, records = read_pcap(path)
        if linktype not in LINKTYPE_INDEX:
            continue
        frame_seeds(w, linktype, records)
        sequence_seeds(w, linktype, records)
        if os.path.basename(path).startswith(('siw', 'lab_siw')):
            iwarp_seeds(w, linktype, records)
        file_seeds(w, header, e, linktype, records)
    oob_seeds(w)
    print('seeds:', ', '.join(f'{t} {n}' for t, n in sorted(w.counts.items())))


if __name__ == '__main__':
    main()
