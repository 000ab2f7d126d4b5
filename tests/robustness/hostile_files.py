#!/usr/bin/env python3
"""`rdmadiag analyze` on inputs that are not captures, damaged captures and
captures that lie: each case checks the exit status (0 all read, 1 unreadable
or not a capture, 2 bad command line, 3 damaged or cut short, read up to the
damage), the one-line message naming the file, and how many records were read.
Expected record counts come from the test's own reading of the pcap record
headers, not from rdmadiag.

usage: hostile_files.py RDMADIAG PCAP_DIR
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fuzz'))
import make_seeds  # noqa: E402  (pcap reading and pcapng writing helpers)

failures = []


def check(name, cond, detail=''):
    if not cond:
        failures.append(f'{name}: {detail}')
        print(f'FAIL {name}: {detail}')
    else:
        print(f'ok   {name}')


def analyze(rdmadiag, args, tmp):
    out_json = os.path.join(tmp, 'report.json')
    if os.path.exists(out_json):
        os.unlink(out_json)
    p = subprocess.run([rdmadiag, 'analyze', '-q', '--json', out_json] + args,
                       capture_output=True, text=True, timeout=60)
    report = None
    if os.path.exists(out_json) and os.path.getsize(out_json):
        with open(out_json) as f:
            report = json.load(f)
    return p.returncode, p.stderr, report


def expect(rdmadiag, tmp, name, path, status, message=None, records=None):
    rc, err, report = analyze(rdmadiag, [path], tmp)
    lines = err.splitlines()
    check(f'{name}: exit status', rc == status, f'got {rc}, expected {status}; stderr: {err!r}')
    if message is None:
        check(f'{name}: silent', err == '', f'stderr: {err!r}')
    else:
        expected_line = f'rdmadiag analyze: {path}: {message}'
        check(f'{name}: one line naming the file', lines == [expected_line],
              f'stderr {lines!r}, expected [{expected_line!r}]')
    if records is not None:
        got = report and report['inputs'][0].get('records')
        check(f'{name}: records read', got == records, f'got {got}, expected {records}')
    return report


def main():
    rdmadiag, pcap_dir = sys.argv[1:3]
    source = os.path.join(pcap_dir, 'rxe_write_lat.pcap')
    header, e, linktype, records = make_seeds.read_pcap(source)
    whole = open(source, 'rb').read()
    with tempfile.TemporaryDirectory() as tmp:
        def path(name, data=None):
            p = os.path.join(tmp, name)
            if data is not None:
                with open(p, 'wb') as f:
                    f.write(data)
            return p

        expect(rdmadiag, tmp, 'zero-length file', path('empty.pcap', b''), 1, 'empty file, not a capture file')
        expect(rdmadiag, tmp, 'gzip file', path('capture.pcap.gz', gzip.compress(whole)), 1,
               'not a pcap or pcapng capture file (unknown file format)')
        text = path('notes.txt', b'QP 0x11 lost PSN 12\n' * 20)
        expect(rdmadiag, tmp, 'text file', text, 1, 'not a pcap or pcapng capture file (unknown file format)')
        os.mkdir(path('dir.pcap'))
        expect(rdmadiag, tmp, 'directory', path('dir.pcap'), 1, 'is a directory, not a capture file')
        expect(rdmadiag, tmp, 'missing file', path('missing.pcap'), 1, 'No such file or directory')
        # libpcap has read the 4-byte magic before it reads the rest of the header.
        expect(rdmadiag, tmp, 'file header cut', path('cut_header.pcap', whole[:10]), 1,
               'not a capture file, or its header is cut short '
               '(truncated dump file; tried to read 24 file header bytes, only got 6)')

        # Cut in the middle of record 11's data: 10 records read, then exit 3.
        off = 24 + sum(16 + len(r[5]) for r in records[:10])
        cut = whole[:off + 16 + 20]
        expect(rdmadiag, tmp, 'cut inside a record', path('cut_record.pcap', cut), 3,
               f'damaged capture, stopped after record 10: truncated dump file; tried to read '
               f'{records[10][3]} captured bytes, only got 20', records=10)
        # Cut inside record 11's header.
        expect(rdmadiag, tmp, 'cut inside a record header', path('cut_rechdr.pcap', whole[:off + 7]), 3,
               'damaged capture, stopped after record 10: truncated dump file; tried to read '
               '16 header bytes, only got 7', records=10)
        # A record header whose capture length is 4 GB.
        lie = header + b''.join(r[0] + r[5] for r in records[:3]) + struct.pack('<IIII', 1, 2, 0xffffffff, 0xffffffff)
        expect(rdmadiag, tmp, 'record length 4 GB', path('huge_caplen.pcap', lie + bytes(100)), 3,
               'damaged capture, stopped after record 3: invalid packet capture length 4294967295, '
               'bigger than snaplen of 65535', records=3)

        recs = records[:20]
        expect(rdmadiag, tmp, 'pcapng with unknown block types',
               path('unknown_blocks.pcapng', make_seeds.pcapng(linktype, recs, extra_blocks=[
                   (0x0BADF00D, b'hostile'), (0x80000001, b'x' * 30), (5, bytes(16))])), 0, None, records=20)
        expect(rdmadiag, tmp, 'pcapng big-endian', path('big_endian.pcapng',
               make_seeds.pcapng(linktype, recs, big_endian=True)), 0, None, records=20)
        huge = make_seeds.pcapng(linktype, recs[:5]) + struct.pack('<II', 6, 0x7ffffff0) + bytes(64)
        expect(rdmadiag, tmp, 'pcapng huge block length', path('huge_block.pcapng', huge), 3,
               'damaged capture, stopped after record 5: pcapng block size 2147483632 > maximum 16777216',
               records=5)
        # A second section in the other byte order is valid pcapng, but libpcap (1.10) cannot
        # follow it: the first section is read and the rest reported as damage.
        two = make_seeds.pcapng(linktype, recs[:5]) + make_seeds.pcapng(linktype, recs[5:10], big_endian=True)
        expect(rdmadiag, tmp, 'pcapng second section other byte order', path('two_orders.pcapng', two), 3,
               'damaged capture, stopped after record 5: pcapng block size 469762048 > maximum 16777216',
               records=5)

        # Snap length 64: every frame read, cut frames counted, no ICRC judged on missing bytes.
        snap = os.path.join(pcap_dir, 'derived', 'rxe_write_lat_snap64.pcap')
        _, _, _, snap_recs = make_seeds.read_pcap(snap)
        cut_frames = sum(1 for r in snap_recs if r[4] > r[3])
        rc, err, report = analyze(rdmadiag, [snap], tmp)
        check('snap length 64: exit 0, silent', rc == 0 and err == '', f'{rc} {err!r}')
        s = report['summary']
        check('snap length 64: all records', report['inputs'][0]['records'] == len(snap_recs))
        roce_cut = sum(1 for r in snap_recs if r[4] > r[3] and r[5][36:38] == b'\x12\xb7')
        # Every frame the snap length cut inside its IP packet counts as truncated, whatever
        # rides on IP (RoCE, TCP, ICMP): here that is every cut frame.
        check('snap length 64: truncated count', s['truncated_packets'] == cut_frames,
              f"{s['truncated_packets']} != {cut_frames}")
        check('snap length 64: cut RoCE frames are unverifiable, none bad',
              s['icrc']['bad'] == 0 and s['icrc']['unverifiable'] == roce_cut,
              f"icrc {s['icrc']}, RoCE frames cut {roce_cut}")

        # Several inputs: the worst status wins, every good input is still read.
        rc, err, report = analyze(rdmadiag, [source, path('cut_record.pcap'), path('empty.pcap')], tmp)
        check('mixed inputs: worst status (3)', rc == 3, f'{rc}')
        check('mixed inputs: one line per bad input', len(err.splitlines()) == 2, f'{err!r}')

        # Bad command lines.
        for args in (['--no-such-option', source], [], ['--roce-port', 'x', source]):
            p = subprocess.run([rdmadiag, 'analyze'] + args, capture_output=True, text=True, timeout=30)
            check(f'bad command line {args}: exit 2', p.returncode == 2, f'{p.returncode} {p.stderr!r}')
    if failures:
        print(f'{len(failures)} failed')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
