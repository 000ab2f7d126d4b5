#!/usr/bin/env python3
"""`tcpdump -i any` on a host whose RDMA traffic passes two interfaces.

A packet that passes a VLAN device and its parent (or a bond and its port) is
captured once at each; LINUX_SLL2 records name the interface (sll.ifindex in
tshark 4.0). rdmadiag analysed them as one stream: every packet seen twice, half
of them called duplicates (lab_rxe_write_lat_loss: 292 psn_duplicate where each
interface alone has none).

The file is built from a real lab capture as `-i any` writes it: each Ethernet
frame becomes an SLL2 record (the link header replaced by the 20-byte cooked
one) at ifindex 3, then again 4 us later at ifindex 7 (two RDMA frames not seen
there). Checked: capture_points lists ifindex 3 and 7; per ifindex the flows,
iWARP flows and anomalies tagged with it are those of that interface's records
alone (their own file); the BTH packets per ifindex are tshark's count of frames
with a BTH per sll.ifindex; no duplicate or resend that the interfaces alone do
not have; -j 2 (the split read of a classic pcap) gives -j 1's report
(`nvme` per interface: nvme_points_check.py).
"""
import collections
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
SOURCES = [("lab_rxe_write_lat_loss.pcap", "infiniband.bth"), ("lab_siw_write_bw_loss.pcap", "tcp.len > 0")]
IFINDEX_A, IFINDEX_B = 3, 7
LINKTYPE_LINUX_SLL2 = 276
failures = []


def check(name, ok, detail=""):
    print("%-5s%s%s" % ("ok" if ok else "FAIL", name, ": " + detail if detail else ""))
    failures.extend([] if ok else [name])


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, check=True).stdout


def read_pcap(path):
    """(ts_sec, ts_usec, bytes) of a classic microsecond pcap of Ethernet frames."""
    with open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack_from("<I", data, 0)
    assert magic == 0xA1B2C3D4, "little-endian microsecond pcap expected"
    out, off = [], 24
    while off + 16 <= len(data):
        sec, usec, incl, _orig = struct.unpack_from("<IIII", data, off)
        out.append((sec, usec, data[off + 16:off + 16 + incl]))
        off += 16 + incl
    return out


def sll2(frame, ifindex):
    """The cooked record `-i any` writes for an Ethernet frame (no VLAN tag)."""
    ethertype, = struct.unpack_from(">H", frame, 12)
    packet_type = 4  # sent by this host
    hdr = struct.pack(">HHIHBB8s", ethertype, 0, ifindex, 1, packet_type, 6, frame[6:12] + b"\0\0")
    return hdr + frame[14:]


def write_pcap(path, records):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, LINKTYPE_LINUX_SLL2))
        for sec, usec, data in records:
            f.write(struct.pack("<IIII", sec, usec, len(data), len(data)) + data)


def later(sec, usec, us):
    usec += us
    return sec + usec // 1000000, usec % 1000000


def build(src, flt, tmp):
    """Files of ifindex A alone, B alone, and both interleaved in time order."""
    frames = read_pcap(src)
    rdma = [int(x) - 1 for x in run("tshark", "-r", src, "-Y", flt, "-T", "fields", "-e", "frame.number").split()]
    lost = {rdma[len(rdma) * 2 // 5], rdma[len(rdma) * 3 // 5]}
    a = [(s, u, sll2(d, IFINDEX_A)) for s, u, d in frames]
    b = [later(s, u, 4) + (sll2(d, IFINDEX_B),) for i, (s, u, d) in enumerate(frames) if i not in lost]
    both = sorted(a + b, key=lambda r: (r[0], r[1]))  # stable: A's copy first at equal times
    paths = [os.path.join(tmp, n) for n in ("a.pcap", "b.pcap", "both.pcap")]
    for p, recs in zip(paths, (a, b, both)):
        write_pcap(p, recs)
    return paths


def report(path, *extra):
    return json.loads(run(rdmadiag, "analyze", "-q", "--json", "-", *extra, path))


def view(rep, point):
    """Flows, iWARP flows and anomalies tagged with `point` (all if None), without frame numbers."""
    def sel(items):
        return [x for x in items if point is None or x.get("capture_point") == point]
    flows = sorted((f["src"], f["dst"], f["dest_qp"], f["packets"], f["pairing"], json.dumps(f["psn"], sort_keys=True),
                    json.dumps(f["naks"], sort_keys=True)) for f in sel(rep["flows"]))
    iwarp = sorted((f["src"], f["dst"], f["fpdus"], f["payload_bytes"], json.dumps(f["tcp"], sort_keys=True))
                   for f in sel(rep["iwarp"].get("flows", [])))
    anomalies = sorted((a["kind"], a.get("psn"), a.get("count"), a.get("cause")) for a in sel(rep["anomalies"]))
    return flows, iwarp, anomalies


def per_ifindex(path, flt):
    ids = run("tshark", "-r", path, "-Y", flt, "-T", "fields", "-e", "sll.ifindex").split()
    return collections.Counter(int(i) for i in ids)


def check_source(name, flt, tmp):
    a, b, both = build(os.path.join(pcaps, name), flt, tmp)
    tshark_counts = per_ifindex(both, flt)
    check(name + ": tshark sees both interfaces", sorted(tshark_counts) == [IFINDEX_A, IFINDEX_B], str(dict(tshark_counts)))
    merged = report(both)
    check(name + ": capture_points are the ifindexes",
          [p["interface"] for p in merged.get("capture_points", [])] == [IFINDEX_A, IFINDEX_B], str(merged.get("capture_points")))
    for point, alone_path in ((IFINDEX_A, a), (IFINDEX_B, b)):
        alone = report(alone_path)
        got, want = view(merged, point), view(alone, None)
        for i, what in enumerate(("flows", "iWARP flows", "anomalies")):
            check("%s ifindex %d: %s as alone" % (name, point, what), got[i] == want[i], "%d vs %d" % (len(got[i]), len(want[i])))
        if flt == "infiniband.bth":
            n = sum(f["packets"] for f in merged["flows"] if f.get("capture_point") == point)
            check("%s ifindex %d: BTH packets = tshark's" % (name, point), n == tshark_counts[point],
                  "%d vs %d" % (n, tshark_counts[point]))
    dups = ("psn_duplicate", "retransmission")
    dup_merged = sum(1 for x in merged["anomalies"] if x["kind"] in dups)
    dup_alone = sum(1 for p in (a, b) for x in report(p)["anomalies"] if x["kind"] in dups)
    check(name + ": no duplicate/resend the interfaces alone do not have", dup_merged == dup_alone,
          "%d vs %d" % (dup_merged, dup_alone))
    check(name + ": -j 2 = -j 1", run(rdmadiag, "analyze", "-q", "--json", "-", "-j", "1", both)
          == run(rdmadiag, "analyze", "-q", "--json", "-", "-j", "2", both))


def main():
    if not shutil.which("tshark"):
        print("tshark not installed")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        for name, flt in SOURCES:
            check_source(name, flt, tmp)
    print("sll2_points:", "FAIL " + ", ".join(failures) if failures else "ok")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":  # nvme_points_check.py imports build()
    main()
