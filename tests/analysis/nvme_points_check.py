#!/usr/bin/env python3
"""`rdmadiag nvme` on a file that holds two capture points.

The NVMe analysis keyed its queues by addresses and QPs only, so a capsule seen
at both points counted as resent by RDMA: lab_rxe_nvme (real kernel nvme-rdma
over Soft-RoCE) merged with its copy 4 us later gave 131 command and 132
response capsules "resent" where the capture alone has 0 and 1.

Point A is the real capture, point B its copy 4 us later with two frames lost
between the points (editcap), merged with `mergecap -I none` (each its own
pcapng interface), and the same as `tcpdump -i any` writes it (LINUX_SLL2
records at ifindex 3 and 7). Checked: per point, the queues tagged with it
equal those of that point's capture alone (frame numbers aside: the merged file
numbers frames anew), and every count of the totals is the sum of the two
points' alone (the oracle for the alone captures' own numbers is
tests/nvme, against tshark and the kernel's nvme-cli).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sll2_points_check as sll2  # noqa: E402  (the -i any rewriting)

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
SRC = os.path.join(pcaps, "lab_rxe_nvme.pcap")
check, run, failures = sll2.check, sll2.run, sll2.failures


def nvme(path):
    return json.loads(run(rdmadiag, "nvme", "--json", "-", path))


def queue_sig(q):
    return json.dumps({k: v for k, v in q.items() if not k.endswith("frame") and k != "capture_point"}, sort_keys=True)


def counts(totals):
    return {k: v for k, v in totals.items() if isinstance(v, int) and not isinstance(v, bool)}


def check_points(label, a, b, both, points):
    merged, alone = nvme(both), [nvme(a), nvme(b)]
    for point, rep in zip(points, alone):
        got = sorted(queue_sig(q) for q in merged["queues"] if q.get("capture_point") == point)
        want = sorted(queue_sig(q) for q in rep["queues"])
        check("%s point %d: queues as alone" % (label, point), got == want, "%d vs %d queues" % (len(got), len(want)))
    summed = {k: counts(alone[0]["totals"])[k] + counts(alone[1]["totals"]).get(k, 0) for k in counts(alone[0]["totals"])}
    got = counts(merged["totals"])
    diff = {k: (got.get(k), v) for k, v in summed.items() if got.get(k) != v}
    check(label + ": totals are the two points' alone", not diff, str(diff))


if not shutil.which("tshark"):
    print("tshark not installed")
    sys.exit(77)
with tempfile.TemporaryDirectory() as tmp:
    a, b, both = (os.path.join(tmp, n) for n in ("a.pcapng", "b.pcapng", "both.pcapng"))
    frames = run("tshark", "-r", SRC, "-Y", "infiniband.bth", "-T", "fields", "-e", "frame.number").split()
    lost = [frames[len(frames) * 2 // 5], frames[len(frames) * 3 // 5]]
    run("editcap", "-F", "pcapng", SRC, a)
    cut = os.path.join(tmp, "cut.pcap")
    run("editcap", SRC, cut, *lost)
    run("editcap", "-F", "pcapng", "-t", "0.000004", cut, b)
    run("mergecap", "-I", "none", "-w", both, a, b)
    check_points("pcapng interfaces", a, b, both, (0, 1))
    sa, sb, sboth = sll2.build(SRC, "infiniband.bth", tmp)
    check_points("tcpdump -i any", sa, sb, sboth, (sll2.IFINDEX_A, sll2.IFINDEX_B))
print("nvme_points:", "FAIL " + ", ".join(failures) if failures else "ok")
sys.exit(1 if failures else 0)
