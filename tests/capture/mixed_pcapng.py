#!/usr/bin/env python3
"""pcapng files whose interfaces have different link types (valid pcapng;
libpcap 1.10 refuses them): analyze, -j 2, nvme, convert and capture --pcapng
read every record with its own interface's link type. Oracles: capinfos and
tshark (Wireshark's own pcapng reader), never rdmadiag.

usage: mixed_pcapng.py RDMADIAG PCAP_DIR
"""
import collections
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcaptool  # noqa: E402

failures = []


def check(name, cond, detail=''):
    print(('ok   ' if cond else 'FAIL ') + name + ('' if cond else f': {detail}'))
    if not cond:
        failures.append(name)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


def tshark_fields(path, fields, display_filter=None):
    args = ['tshark', '-r', path, '-T', 'fields'] + [a for f in fields for a in ('-e', f)]
    if display_filter:
        args += ['-Y', display_filter]
    p = run(args)
    assert p.returncode == 0, p.stderr
    return [line.split('\t') for line in p.stdout.splitlines()]


def capinfos_count(path):
    p = run(['capinfos', '-M', '-c', '-T', path])
    return int(p.stdout.splitlines()[-1].split('\t')[1])


def analyze(rdmadiag, path, *extra):
    p = run([rdmadiag, 'analyze', '-q', '--json', '-', *extra, path])
    return p.returncode, p.stderr, json.loads(p.stdout) if p.stdout else None


def tshark_qp_counts(path):
    rows = tshark_fields(path, ['frame.interface_id', 'ip.src', 'ip.dst', 'infiniband.bth.destqp'], 'infiniband.bth')
    return collections.Counter((int(i), s, d, int(q, 16)) for i, s, d, q in rows)


def check_analyze(rdmadiag, name, path, *extra):
    """Every record read, exit 0, per-QP packet counts equal tshark's."""
    rc, err, report = analyze(rdmadiag, path, *extra)
    check(f'{name}: exit 0', rc == 0, f'{rc} {err!r}')
    if not report:
        return
    n = capinfos_count(path)
    check(f'{name}: records == capinfos ({n})', report['inputs'][0]['records'] == n == report['summary']['packets'],
          f"{report['inputs'][0]['records']} / {report['summary']['packets']}")
    # Each interface is a capture point of its own (docs/analysis.md): its flows are its own.
    ours = collections.Counter()
    for f in report['flows']:
        ours[(f.get('capture_point', 0), f['src'], f['dst'], f['dest_qp'])] += f['packets']
    theirs = tshark_qp_counts(path)
    check(f'{name}: per-QP packets == tshark ({dict(theirs)})', ours == theirs, f'{dict(ours)}')


def block(btype, body):
    body += b'\0' * (-len(body) % 4)
    return struct.pack('<II', btype, 12 + len(body)) + body + struct.pack('<I', 12 + len(body))


def idb(linktype, name, tsresol=None, tsoffset=None):
    opts = struct.pack('<HH', 2, len(name)) + name + b'\0' * (-len(name) % 4)
    if tsresol is not None:
        opts += struct.pack('<HHB3x', 9, 1, tsresol)
    if tsoffset is not None:
        opts += struct.pack('<HHq', 14, 8, tsoffset)
    return block(1, struct.pack('<HHI', linktype, 0, 65535) + opts + struct.pack('<HH', 0, 0))


def epb(iface, ts, data, wirelen):
    return block(6, struct.pack('<IIIII', iface, ts >> 32, ts & 0xffffffff, len(data), wirelen) + data)


def timestamp_file(pcap_dir, out):
    """Ethernet records on an interface in nanoseconds; Linux SLL ones on an interface
    in microseconds (the default) with if_tsoffset 1000 s, interleaved by time."""
    _, eth = pcaptool.read_pcap(open(os.path.join(pcap_dir, 'rxe_write_lat.pcap'), 'rb').read())
    _, sll = pcaptool.read_pcap(open(os.path.join(pcap_dir, 'derived', 'rxe_roce_v2_sll.pcap'), 'rb').read())
    offset = 1000
    recs = [(ts + 7, 0, ts + 7, w, d) for ts, w, d in eth[:40]]  # +7 ns: only 10^-9 keeps it
    recs += [(ts, 1, (ts - offset * 10**9) // 1000, w, d) for ts, w, d in sll[:40]]
    recs.sort(key=lambda r: r[0])
    blob = block(0x0A0D0D0A, struct.pack('<IHHq', 0x1A2B3C4D, 1, 0, -1))
    blob += idb(1, b'eth-ns', tsresol=9) + idb(113, b'sll-us', tsoffset=offset)
    blob += b''.join(epb(i, t, d, w) for _, i, t, w, d in recs)
    with open(out, 'wb') as f:
        f.write(blob)


def same_records(name, a, b):
    fields = ['frame.time_epoch', 'frame.len', 'frame.cap_len', 'frame.interface_id']
    ta, tb = tshark_fields(a, fields), tshark_fields(b, fields)
    check(f'{name}: tshark time, lengths, interface of every record identical ({len(ta)})', ta == tb and ta,
          next(((x, y) for x, y in zip(ta, tb) if x != y), (len(ta), len(tb))))


def main():
    rdmadiag, pcap_dir = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, 'a.pcap'), os.path.join(tmp, 'b.pcap')
        run(['editcap', '-F', 'pcap', '-r', os.path.join(pcap_dir, 'rxe_write_lat.pcap'), a, '1-40'])
        run(['editcap', '-F', 'pcap', '-r', os.path.join(pcap_dir, 'derived', 'rxe_roce_v2_sll.pcap'), b, '1-40'])
        mixed = os.path.join(tmp, 'mixed.pcapng')
        run(['mergecap', '-F', 'pcapng', '-w', mixed, a, b])
        check('mergecap: two link types', len({r[1] for r in tshark_fields(mixed, ['frame.interface_id',
                                                                                   'frame.encap_type'])}) == 2)
        check_analyze(rdmadiag, 'analyze mergecap file', mixed)
        check_analyze(rdmadiag, 'analyze -j 2 mergecap file', mixed, '-j', '2')
        p = run([rdmadiag, 'nvme', mixed])
        check('nvme reads it whole (exit 0)', p.returncode == 0, p.stderr)

        out = os.path.join(tmp, 'out.pcapng')
        p = run([rdmadiag, 'convert', mixed, out])
        check('convert pcapng -> pcapng: exit 0', p.returncode == 0, p.stderr)
        same_records('convert pcapng -> pcapng', mixed, out)
        single = os.path.join(tmp, 'out.pcap')
        p = run([rdmadiag, 'convert', mixed, single])
        check('convert to pcap refused (exit 1, says why, no file left)',
              p.returncode == 1 and 'a pcap file holds one link type' in p.stderr and not os.path.exists(single),
              f'{p.returncode} {p.stderr!r}')

        cap = os.path.join(tmp, 'cap.pcapng')
        p = run([rdmadiag, 'capture', '-r', a, '-r', b, '--pcapng', '-w', cap, '-q', '--no-status'])
        check('capture --pcapng of two link types: exit 0', p.returncode == 0, p.stderr)
        check_analyze(rdmadiag, 'analyze of capture --pcapng', cap)
        p = run([rdmadiag, 'capture', '-r', mixed, '-q', '--no-status'])
        check('capture -r of a mixed file: source error (exit 4), says why',
              p.returncode == 4 and 'use rdmadiag analyze' in p.stderr, f'{p.returncode} {p.stderr!r}')

        ts = os.path.join(tmp, 'tsresol.pcapng')
        timestamp_file(pcap_dir, ts)
        check_analyze(rdmadiag, 'analyze if_tsresol 9 / 6 + if_tsoffset', ts)
        out = os.path.join(tmp, 'tsresol_out.pcapng')
        p = run([rdmadiag, 'convert', ts, out])
        check('convert if_tsresol / if_tsoffset file: exit 0', p.returncode == 0, p.stderr)
        same_records('convert if_tsresol / if_tsoffset file', ts, out)

        # Standard input cannot be read again: libpcap's verdict, and how to read it whole.
        with open(mixed, 'rb') as f:
            p = subprocess.run([rdmadiag, 'analyze', '-q', '-'], stdin=f, capture_output=True, text=True, timeout=60)
        check('standard input: exit 3 naming the way out', p.returncode == 3 and 'given by name' in p.stderr,
              f'{p.returncode} {p.stderr!r}')
    print('FAILED: ' + ', '.join(failures) if failures else 'all passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
