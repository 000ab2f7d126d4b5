#!/usr/bin/env python3
"""A capture of N frames, each to a different QP: `rdmadiag analyze` must read it
all, evict flows beyond its cap and say how many, and keep its peak memory
bounded: the run over N frames may not use much more memory than a run over a
quarter of them (both are past every table's cap). Peak RSS from wait4().

usage: many_qps.py RDMADIAG MAKE_MANY_QPS N
"""
import json
import os
import subprocess
import sys
import tempfile
import time


def run(cmd):
    """(exit status, peak RSS in MB, seconds, stderr) of a child."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        err.seek(0)
        return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024, time.monotonic() - start, err.read().decode()


def analyze(rdmadiag, make, n, tmp):
    pcap = os.path.join(tmp, f'qps{n}.pcap')
    rc, _, secs, err = run([make, pcap, str(n)])
    if rc != 0:
        sys.exit(f'make_many_qps failed: {err}')
    out = os.path.join(tmp, f'qps{n}.json')
    rc, rss, secs, err = run([rdmadiag, 'analyze', '-q', '--json', out, pcap])
    os.unlink(pcap)
    with open(out) as f:
        report = json.load(f)
    print(f'{n} QPs: exit {rc}, peak RSS {rss:.0f} MB, {secs:.1f} s')
    return rc, rss, report, err


def main():
    rdmadiag, make, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        rc_small, rss_small, _, _ = analyze(rdmadiag, make, n // 4, tmp)
        rc, rss, report, err = analyze(rdmadiag, make, n, tmp)
    s = report['summary']
    print('summary:', {k: s.get(k) for k in ('packets', 'queue_pairs', 'flows', 'flows_evicted')})
    if rc != 0 or rc_small != 0 or err:
        failures.append(f'exit {rc_small}/{rc}, stderr {err!r}')
    if s['packets'] != n or s['by_transport']['roce_v2'] != n:
        failures.append(f"packets {s['packets']}, RoCEv2 {s['by_transport']['roce_v2']}, expected {n}")
    if s['icrc']['ok'] != n:
        failures.append(f"ICRC ok {s['icrc']['ok']}, expected {n}")
    evicted = s.get('flows_evicted', 0)
    listed = len(report['flows'])
    if evicted <= 0 or listed + evicted != n:
        failures.append(f'flows listed {listed} + evicted {evicted} != {n}')
    if rss > rss_small * 1.25 + 32:
        failures.append(f'peak RSS grows with the capture: {rss_small:.0f} MB for {n // 4}, {rss:.0f} MB for {n}')
    for f in failures:
        print('FAIL', f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
