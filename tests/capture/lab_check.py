#!/usr/bin/env python3
"""Checks what `rdmadiag capture -i eth0` recorded in a lab VM while a perftest
ran (tests/capture/lab.cmake): the capture stopped cleanly with no drops and
every packet analysed; tshark (independent) reads the same number of packets
and sees the same RDMA opcodes with the same counts as rdmadiag; the opcodes
are the ones the test issues; no anomalies (rxe timer retransmissions only as
far as the kernel's own retry counter confirms them); for Soft-RoCE every ICRC is good;
and the report equals `rdmadiag analyze` of the written file.

  lab_check.py RDMADIAG DIR NAME rxe|siw write|read|send [ITERATIONS]

With ITERATIONS (the test's -n), the packets of the test's own operation are
counted against it (rxe): a latency test of N iterations is N RDMA WRITEs or
SENDs from each side, or N RDMA READ requests (answered by at least N
responses), plus the resends the analysis found (rxe's retransmission timer
fires on these slow VMs: spurious retransmissions, flagged per flow).
"""
import collections
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lab"))
from kernel_retries import kernel_retries, split_anomalies  # noqa: E402

# What each perftest latency test puts on the wire (RC transport).
# rxe: BTH opcodes (IBTA vol. 1, 9.2). perftest's -x 1 exchange runs over TCP, not RDMA.
RXE = {
    "write": {10: "RDMA WRITE Only", 17: "Acknowledge"},
    "read": {12: "RDMA READ Request", 16: "RDMA READ Response Only"},
    "send": {4: "SEND Only", 17: "Acknowledge"},
}
# siw: RDMAP opcodes (RFC 5040, 4.4). With -R perftest also exchanges its
# parameters with Sends on the connection, so Send may appear in every test.
SIW = {
    "write": ({0}, {0, 3}),
    "read": ({1, 2}, {1, 2, 3}),
    "send": ({3}, {3}),
}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def tshark_opcodes(pcap, field, display_filter):
    out = subprocess.run(["tshark", "-r", pcap, "-Y", display_filter, "-T", "fields", "-e", field],
                         check=True, capture_output=True, text=True).stdout
    counts = collections.Counter()
    for line in out.splitlines():
        for v in filter(None, line.split(",")):  # several FPDUs in one segment
            counts[int(v, 0)] += 1
    return counts


def main():
    rdmadiag, rundir, name, mode, test = sys.argv[1:6]
    iterations = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    base = f"{rundir}/server/{name}"
    pcap = base + ".pcap"
    try:
        report = json.load(open(base + ".json"))
    except (OSError, ValueError) as e:
        fail(f"{base}.json: {e}")
    cap = report["capture"]
    if cap["stopped_by"] != "interrupted (SIGINT)":
        fail(f"stopped by {cap['stopped_by']!r}")
    src = cap["sources"][0]
    if src["name"] != "eth0" or not src["live"]:
        fail(f"unexpected source {src}")
    if src["dropped"] or src["if_dropped"] or cap["packets_not_analysed"]:
        fail(f"lost packets: {src['dropped']} kernel, {src['if_dropped']} interface, {cap['packets_not_analysed']} not analysed")
    if cap["packets_written"] != cap["packets_captured"]:
        fail(f"{cap['packets_captured']} captured but {cap['packets_written']} written")
    frames = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-e", "frame.number"], check=True,
                            capture_output=True, text=True).stdout.split()
    if len(frames) != cap["packets_captured"]:
        fail(f"tshark reads {len(frames)} packets, rdmadiag reported {cap['packets_captured']}")

    summary = report["summary"]
    # No PSN anomaly of any kind. The one exception is rxe's retransmission
    # timer, which fires even without loss on these emulated (slow) VMs
    # (docs/lab.md, "Limits"): a timeout retransmission is accepted only when
    # the kernel itself counted at least as many requester retries.
    retries = kernel_retries(rundir) if mode == "rxe" else 0
    timeouts, others = split_anomalies(report["anomalies"])
    if others:
        fail(f"anomalies: {json.dumps(others)[:2000]}")
    if timeouts and len(timeouts) > retries:
        fail(f"{len(timeouts)} timeout retransmissions, but the kernel counted {retries} retries: {json.dumps(timeouts)[:1000]}")
    if mode == "rxe":
        ours = collections.Counter({v["opcode"]: v["packets"] for v in summary["by_opcode"].values()})
        theirs = tshark_opcodes(pcap, "infiniband.bth.opcode", "infiniband")
        expected = set(RXE[test])
        required = expected
        roce = summary["by_transport"]["roce_v2"]
        icrc = summary["icrc"]
        if icrc["bad"] or icrc["unverifiable"] or icrc["ok"] != roce or roce != sum(theirs.values()):
            fail(f"ICRC {icrc}, {roce} RoCEv2 packets, tshark sees {sum(theirs.values())}")
    else:
        ours = collections.Counter({v["opcode"]: v["fpdus"] for v in report["iwarp"]["by_opcode"].values()})
        theirs = tshark_opcodes(pcap, "iwarp_rdma.opcode", "iwarp_rdma")
        required, expected = SIW[test]
        if report["iwarp"]["crc"]["bad"]:
            fail(f"MPA CRC {report['iwarp']['crc']}")
    if ours != theirs:
        fail(f"opcodes: rdmadiag {dict(ours)}, tshark {dict(theirs)}")
    if not required <= set(ours) <= expected:
        fail(f"{test}: opcodes {sorted(ours)}, expected {sorted(required)} (at most {sorted(expected)})")

    again = json.loads(subprocess.run([rdmadiag, "analyze", "--json", "-", pcap], check=True, capture_output=True,
                                      text=True).stdout)
    if again["summary"] != summary or again["anomalies"] != report["anomalies"]:
        fail("the capture's report differs from analyze of the written file")
    if iterations and mode == "rxe":
        # Both sides WRITE or SEND once per iteration; the client alone READs. rxe's
        # timer resends (spurious on these slow VMs, flagged per flow) come on top.
        op, per_iteration = {"write": (10, 2), "read": (12, 1), "send": (4, 2)}[test]
        resent = sum(f["psn"]["retransmissions"] + f["psn"]["spurious_retransmissions"] for f in again["flows"])
        want = per_iteration * iterations
        if ours[op] - resent != want:
            fail(f"{RXE[test][op]}: {ours[op]} packets on the wire, {resent} of them resends, "
                 f"for {iterations} iterations (expected {want} originals)")
        if test == "read" and ours[16] < iterations:
            fail(f"{ours[16]} READ responses for {iterations} iterations")
    print(f"ok: {name}: {cap['packets_captured']} packets, opcodes {dict(sorted(ours.items()))}"
          + (f", ICRC ok {summary['icrc']['ok']}" if mode == "rxe" else "") + (f", {len(timeouts)} timeout retransmissions (kernel retries: {retries})" if timeouts else ", no anomalies")
          + ", no drops")


if __name__ == "__main__":
    main()
