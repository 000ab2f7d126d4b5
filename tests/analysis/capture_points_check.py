#!/usr/bin/env python3
"""Two capture points merged into one pcapng file (mergecap): each point's
packets are analysed as that point saw them.

Each real lab capture is point A; point B is the same traffic as a receiver's
copy would show it (editcap -t: 4 us later) with two frames lost between the
points (editcap deletes them). `mergecap -I none` writes both into one file,
each as its own interface (tshark's frame.interface_id). rdmadiag read such a
file through libpcap, which never says a record's interface: every packet was
seen twice and the sequence analysis called half of them duplicates
(lab_rxe_write_lat_loss: 292 psn_duplicate anomalies where each point alone
has none).

Checked, per point p (interface index): the flows tagged capture_point p, their
packet counts, PSN counters, NAK counts and pairing, and the anomalies (kind,
PSN, count) tagged p are those of analysing point p's capture alone (whose
verdicts the other tests check against tshark and the lab's ground truth); the
RDMA packets per point are tshark's count of frames with a BTH (or a TCP
payload, iWARP) per frame.interface_id; the text report names the interface
of every flow and problem line (two flows of the same QP are told apart); -j 2 prints the same report as -j 1;
`convert` to pcapng keeps both interfaces and to pcap refuses to merge them;
a PFC capture seen at two points has each point's pause senders (tshark's
MAC Control frames per interface and source) and no pause of one point's link
holds back packets seen at the other.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
# (capture, tshark filter of its RDMA packets)
SOURCES = [("lab_rxe_write_lat_loss.pcap", "infiniband.bth"),
           ("lab_rxe_send_lat_rdmacm_near_psn.pcap", "infiniband.bth"),
           ("lab_siw_write_bw_loss.pcap", "tcp.len > 0")]
failures = []


def check(name, ok, detail=""):
    """One verdict line; a failed one is kept for the exit status."""
    line = "%-5s%s" % ("ok" if ok else "FAIL", name)
    print(line + (": " + detail if detail else ""))
    failures.extend([] if ok else [name])


def run(*args):
    """A tool's standard output (it must succeed)."""
    return subprocess.run(list(args), capture_output=True, text=True, check=True).stdout


def report(path, *extra):
    return json.loads(run(rdmadiag, "analyze", "-q", "--json", "-", *extra, path))


def flow_sig(f):
    return (f["src"], f["dst"], f["dest_qp"], f["packets"], f["pairing"], json.dumps(f["psn"], sort_keys=True),
            json.dumps(f["naks"], sort_keys=True))


def iwarp_sig(f):
    return (f["src"], f["dst"], f["fpdus"], f["payload_bytes"], json.dumps(f["tcp"], sort_keys=True))


def anomaly_sig(a):
    return (a["kind"], a.get("psn"), a.get("count"), a.get("cause"))


def point_view(rep, point):
    """What the merged report says of one point: flows, iWARP flows, anomalies."""
    if point is None:
        return (sorted(flow_sig(f) for f in rep["flows"]), sorted(iwarp_sig(f) for f in rep["iwarp"].get("flows", [])),
                sorted(anomaly_sig(a) for a in rep["anomalies"]))
    return (sorted(flow_sig(f) for f in rep["flows"] if f.get("capture_point") == point),
            sorted(iwarp_sig(f) for f in rep["iwarp"].get("flows", []) if f.get("capture_point") == point),
            sorted(anomaly_sig(a) for a in rep["anomalies"] if a.get("capture_point") == point))


def rdma_frames(path, flt):
    return [int(x) for x in run("tshark", "-r", path, "-Y", flt, "-T", "fields", "-e", "frame.number").split()]


def per_interface(path, flt):
    ids = run("tshark", "-r", path, "-Y", flt, "-T", "fields", "-e", "frame.interface_id").split()
    return collections.Counter(int(i) for i in ids)


def merge_points(src, flt, tmp):
    a, b = os.path.join(tmp, "a.pcapng"), os.path.join(tmp, "b.pcapng")
    run("editcap", "-F", "pcapng", src, a)
    frames = rdma_frames(src, flt)
    lost = [str(frames[len(frames) * 2 // 5]), str(frames[len(frames) * 3 // 5])]
    cut = os.path.join(tmp, "cut.pcap")
    run("editcap", src, cut, *lost)
    run("editcap", "-F", "pcapng", "-t", "0.000004", cut, b)
    both = os.path.join(tmp, "both.pcapng")
    run("mergecap", "-I", "none", "-w", both, a, b)
    return a, b, both


def check_source(name, flt, tmp):
    a, b, both = merge_points(os.path.join(pcaps, name), flt, tmp)
    tshark_counts = per_interface(both, flt)
    check(name + ": tshark sees two interfaces", sorted(tshark_counts) == [0, 1], str(dict(tshark_counts)))
    merged = report(both)
    check(name + ": capture_points listed", [p["interface"] for p in merged.get("capture_points", [])] == [0, 1])
    for point, alone_path in ((0, a), (1, b)):
        alone = report(alone_path)
        got, want = point_view(merged, point), point_view(alone, None)
        check("%s point %d: flows as alone" % (name, point), got[0] == want[0],
              "%d flows, alone %d" % (len(got[0]), len(want[0])))
        check("%s point %d: iWARP flows as alone" % (name, point), got[1] == want[1],
              "%d flows, alone %d" % (len(got[1]), len(want[1])))
        check("%s point %d: anomalies as alone" % (name, point), got[2] == want[2],
              "%s vs alone %s" % (collections.Counter(x[0] for x in got[2]), collections.Counter(x[0] for x in want[2])))
        if flt == "infiniband.bth":
            packets = sum(f["packets"] for f in merged["flows"] if f.get("capture_point") == point)
            check("%s point %d: BTH packets = tshark's" % (name, point), packets == tshark_counts[point],
                  "%d vs %d" % (packets, tshark_counts[point]))
        else:
            segments = sum(f["tcp"]["segments"] for f in merged["iwarp"]["flows"] if f.get("capture_point") == point)
            check("%s point %d: TCP segments with data <= tshark's" % (name, point),
                  0 < segments <= tshark_counts[point], "%d vs %d" % (segments, tshark_counts[point]))
    dup_merged = sum(1 for a in merged["anomalies"] if a["kind"] in ("psn_duplicate", "retransmission"))
    dup_alone = sum(1 for p in (a, b) for x in report(p)["anomalies"] if x["kind"] in ("psn_duplicate", "retransmission"))
    check(name + ": no duplicate/resend the points alone do not have", dup_merged == dup_alone,
          "%d vs %d" % (dup_merged, dup_alone))
    text = run(rdmadiag, "analyze", both)
    labelled = [l for l in text.splitlines() if "10.77.0." in l and "->" in l]
    check(name + ": text names each flow's and problem's interface",
          labelled and all("[interface 0]" in l or "[interface 1]" in l for l in labelled), labelled[0] if labelled else "")
    check(name + ": no interface named for a one-point file", "[interface" not in run(rdmadiag, "analyze", a))
    j1 = run(rdmadiag, "analyze", "-q", "--json", "-", "-j", "1", both)
    j2 = run(rdmadiag, "analyze", "-q", "--json", "-", "-j", "2", both)
    check(name + ": -j 2 = -j 1", j1 == j2)
    return both


def sender_sig(s):
    """A pause sender without frame numbers (the merged file numbers its frames anew)."""
    prios = [{k: v for k, v in p.items() if not k.endswith("_frame")} for p in s["priorities"]]
    return (s["mac"], s["pause_frames"], s["pfc_frames"], json.dumps(prios, sort_keys=True))


def check_pause(tmp):
    """A PFC capture seen at two points: each point's pause senders are its own."""
    name = "pfc/pfc_storm.pcap"
    a, b, both = os.path.join(tmp, "pa.pcapng"), os.path.join(tmp, "pb.pcapng"), os.path.join(tmp, "pboth.pcapng")
    run("editcap", "-F", "pcapng", os.path.join(pcaps, name), a)
    run("editcap", "-F", "pcapng", "-t", "0.000004", os.path.join(pcaps, name), b)
    run("mergecap", "-I", "none", "-w", both, a, b)
    rows = run("tshark", "-r", both, "-Y", "eth.type == 0x8808", "-T", "fields", "-e", "frame.interface_id",
               "-e", "eth.src").split("\n")
    theirs = collections.Counter(tuple(r.split("\t")) for r in rows if r)
    merged = report(both, "--link-speed", "100")["pfc"]
    ours = collections.Counter()
    for s in merged["senders"]:
        ours[(str(s.get("capture_point")), s["mac"])] += s["pause_frames"] + s["pfc_frames"]
    check(name + ": pause frames per point and sender = tshark's", ours == theirs, "%s vs %s" % (dict(ours), dict(theirs)))
    for point, alone_path in ((0, a), (1, b)):
        alone = report(alone_path, "--link-speed", "100")["pfc"]
        got = sorted(sender_sig(s) for s in merged["senders"] if s.get("capture_point") == point)
        check("%s point %d: senders as alone" % (name, point), got == sorted(sender_sig(s) for s in alone["senders"]))
    by_prio = merged["roce"]["by_priority"]
    alone = report(a, "--link-speed", "100")["pfc"]["roce"]["by_priority"]
    check(name + ": RoCE sent while paused = the two points' sum",
          [(x["sent_while_paused"], x["qps_while_paused"]) for x in by_prio] ==
          [(2 * x["sent_while_paused"], 2 * x["qps_while_paused"]) for x in alone])


def check_convert(both, tmp):
    out = os.path.join(tmp, "kept.pcapng")
    run(rdmadiag, "convert", both, out)
    check("convert to pcapng keeps both interfaces", sorted(per_interface(out, "frame")) == [0, 1])
    flat = os.path.join(tmp, "flat.pcap")
    r = subprocess.run([rdmadiag, "convert", both, flat], capture_output=True, text=True)
    check("convert to pcap refuses to merge the points", r.returncode == 1 and "capture point" in r.stderr
          and not os.path.exists(flat), r.stderr.strip())


def main():
    for tool in ("tshark", "editcap", "mergecap"):
        if not shutil.which(tool):
            print("SKIP: %s not installed" % tool)
            return 77
    with tempfile.TemporaryDirectory() as tmp:
        merged = []
        for name, flt in SOURCES:
            sub = os.path.join(tmp, name)
            os.mkdir(sub)
            merged.append(check_source(name, flt, sub))
        check_convert(merged[0], tmp)
        check_pause(tmp)
        # nvme separates the points (nvme_points_check.py checks its numbers).
        r = subprocess.run([rdmadiag, "nvme", merged[0]], capture_output=True, text=True)
        check("nvme reads the two points", r.returncode == 0 and not r.stderr, r.stderr.strip())
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
