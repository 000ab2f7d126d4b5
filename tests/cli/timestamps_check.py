#!/usr/bin/env python3
"""Time stamps at the edges, checked against tshark and capinfos' rules.

A classic pcap's seconds are an unsigned 32-bit field (tshark reads them so;
libpcap sign-extends them): records from 2038-01-19 on were read as 1901, and
`convert` wrote them to pcapng as the year 2488. A clock that steps back gave
a negative capture duration and negative latencies. The captures are made
here from a bundled one by rewriting its record headers (plain struct).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
SOURCE = os.path.join(pcaps, "rxe_send_lat.pcap")
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""))
    if not ok:
        failures.append(name)


def records(path):
    data = open(path, "rb").read()
    assert struct.unpack_from("<I", data, 0)[0] == 0xA1B2C3D4, "little-endian microsecond pcap expected"
    head, off, out = data[:24], 24, []
    while off + 16 <= len(data):
        sec, usec, caplen, wirelen = struct.unpack_from("<IIII", data, off)
        out.append([sec, usec, caplen, wirelen, data[off + 16:off + 16 + caplen]])
        off += 16 + caplen
    return head, out


def write(path, head, recs, nanoseconds=False):
    with open(path, "wb") as f:
        f.write(struct.pack("<I", 0xA1B23C4D) + head[4:] if nanoseconds else head)
        for sec, usec, caplen, wirelen, body in recs:
            f.write(struct.pack("<IIII", sec, usec, caplen, wirelen) + body)


def tshark_times(path):
    out = subprocess.run(["tshark", "-r", path, "-T", "fields", "-e", "frame.time_epoch"],
                         check=True, capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines()]


def report(path, *extra):
    run = subprocess.run([rdmadiag, "analyze", "-q", "--json", "-", *extra, path], capture_output=True, text=True)
    return run.returncode, json.loads(run.stdout) if run.stdout else None


def latencies(rep):
    for flow in rep.get("flows", []):
        for op, stats in (flow.get("latency_us") or {}).items():
            for key in ("min", "p50", "p99", "max", "mean"):
                if key in stats:
                    yield flow.get("flow"), op, key, stats[key]


with tempfile.TemporaryDirectory() as tmp:
    head, recs = records(SOURCE)
    recs = recs[:40]
    # 2039: seconds above 2^31, the original spacing kept.
    shift = 2_197_815_296 - recs[0][0]
    late = [[r[0] + shift] + r[1:] for r in recs]
    y2039 = os.path.join(tmp, "y2039.pcap")
    write(y2039, head, late)
    want = tshark_times(y2039)
    check("tshark_reads_2039", want[0].startswith("2197815296."), want[0])
    for fmt in ("pcapng", "pcap"):
        out = os.path.join(tmp, "conv." + fmt)
        subprocess.run([rdmadiag, "convert", "--force", "--to", fmt, y2039, out], check=True, capture_output=True)
        got = tshark_times(out)
        check("convert_2039_to_" + fmt, got == want, "first %s, want %s" % (got[0] if got else None, want[0]))
    rc, rep = report(y2039)
    spread = float(want[-1]) - float(want[0])
    check("analyze_2039_duration", rc == 0 and abs(rep["summary"]["duration_s"] - spread) < 1e-5,
          "%s against tshark's %.6f" % (rep and rep["summary"]["duration_s"], spread))
    lines = subprocess.run([rdmadiag, "analyze", "--packets", y2039], capture_output=True, text=True).stdout.splitlines()
    rel = [float(line.split()[1]) for line in lines[:len(want)]]  # the packet lines come first
    check("packets_2039_relative_times", len(rel) == len(want) and abs(rel[-1] - spread) < 1e-5,
          "last %s, want %.6f" % (rel[-1] if rel else None, spread))
    # Every other record 5 s back (two interfaces' clocks apart, merged):
    # capinfos' duration is the latest minus the earliest, and no latency is negative.
    back = [list(r) for r in recs]
    for r in back[1::2]:
        r[0] -= 5
    stepped = os.path.join(tmp, "stepped.pcap")
    write(stepped, head, back)
    times = [float(t) for t in tshark_times(stepped)]
    rc, rep = report(stepped)
    dur = rep["summary"]["duration_s"]
    check("stepped_duration_as_capinfos", rc == 0 and abs(dur - (max(times) - min(times))) < 1e-5,
          "%.6f, want %.6f" % (dur, max(times) - min(times)))
    negative = [x for x in latencies(rep) if x[3] < 0]
    check("stepped_no_negative_latency", not negative, str(negative[:3]))

    # Nanosecond records 1.5 us apart (2023): every latency is a whole number of
    # 1.5 us steps, which a double of epoch seconds (0.24 us apart) cannot say:
    # it gave 1.43 and 1.67 us.
    ns = [[1_700_000_000, 100 + 1500 * i] + r[2:] for i, r in enumerate(recs)]
    fine = os.path.join(tmp, "ns.pcap")
    write(fine, head, ns, nanoseconds=True)
    check("tshark_reads_ns_steps", tshark_times(fine)[1] == "1700000000.000001600", tshark_times(fine)[1])
    rc, rep = report(fine)
    values = [x for x in latencies(rep) if x[2] in ("min", "max", "p50")]
    off = [x for x in values if abs(x[3] / 1.5 - round(x[3] / 1.5)) > 1e-6]
    check("latency_exact_to_the_ns", rc == 0 and values and not off, "%d values, off: %s" % (len(values), off[:3]))

    # iWARP READ latencies too (through the TCP reassembly): on a microsecond
    # capture every one is a whole number of microseconds (tshark's stamps).
    siw = os.path.join(pcaps, "lab_siw_read_lat.pcap")
    run = subprocess.run([rdmadiag, "analyze", "-q", "--packets", "--json", "-", siw], capture_output=True, text=True)
    units = [u for pkt in json.loads(run.stdout)["packets"] for u in pkt.get("iwarp", [])]
    lat = [u["latency_us"] for u in units if "latency_us" in u]
    off = [x for x in lat if abs(x - round(x)) > 1e-6]
    check("iwarp_latency_exact", len(lat) >= 50 and not off, "%d latencies, off: %s" % (len(lat), off[:3]))

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
