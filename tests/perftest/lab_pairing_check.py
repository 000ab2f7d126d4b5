#!/usr/bin/env python3
"""With many QPs between two hosts and loss on the wire, every flow `rdmadiag analyze` pairs must
be paired with its own connection's flow.

usage: lab_pairing_check.py RDMADIAG PCAP CLIENT_STDOUT...

One CLIENT_STDOUT (perftest's client printout) per step: with several, the capture is cut at
the lab's step markers (tests/lab/run --mark-steps), step N from its marker to the next; with
one, the whole capture is that step. Used by lab_pairing_many_qps (tests/perftest/lab.cmake:
Debian's perftest on Soft-RoCE, 16 QPs, loss on both VMs, ib_write_bw -b then ib_read_bw) and
by pairing_many_qps_capture on tests/pcaps/lab_rxe_write_bw_q16_loss.pcap.

No CM exchange: analyze pairs each response flow with a requester flow from PSNs alone
(docs/analysis.md). The truth comes from perftest's printout and the wire (lab_pairs.py: the
PSN of a QP's first captured request names the sending QP among those perftest printed, up to
64 PSNs above its start when the first requests were lost before the capture point); tshark
reads the wire. Every flow the truth names must be paired with the flow it names.
"""
import sys

from lab_pairs import analyzed_flows, check_pairing, true_pairs
from lab_wire import step_markers, tshark

CLIENT_IP = "10.77.0.2"
LOSS_WINDOW = 64  # PSNs a first captured request may lie above its QP's printed start


def fail(message):
    sys.exit(f"lab_pairing_check: {message}")


def step_ranges(pcap, steps):
    """[(first frame, last frame)] of each step."""
    if steps == 1:
        return [(1, 10**9)]
    starts = {step: frame for step, (frame, _) in step_markers(pcap).items()}
    if sorted(starts) != list(range(1, steps + 1)):
        fail(f"step markers found for steps {sorted(starts)}, expected 1-{steps}")
    return [(starts[s], starts.get(s + 1, 10**9) - 1) for s in range(1, steps + 1)]


def check_step(rdmadiag, pcap, rows, printout, first, last, step):
    qps = printout.count("local address: LID")
    try:
        truth = true_pairs(printout, rows, first, last, CLIENT_IP, LOSS_WINDOW)
    except ValueError as e:
        fail(f"step {step}: {e}")
    if qps < 2 or len(truth) != 2 * qps:
        fail(f"step {step}: the truth names {len(truth)} flows, expected 2 for each of {qps} QPs")
    flows = analyzed_flows(rdmadiag, pcap, first, last)
    wrong = check_pairing(flows, truth)
    if wrong:
        fail(f"step {step}: {len(wrong)} of {len(truth)} flows not with their own connection's: " + "; ".join(wrong))
    how = sorted({f.get("pairing") for f in flows if (f["src"], f["dst"], f["dest_qp"]) in truth})
    print(f"step {step}: {len(truth)} flows of {qps} connections, each paired with its own ({', '.join(how)})")


def main():
    if len(sys.argv) < 4:
        fail("usage: lab_pairing_check.py RDMADIAG PCAP CLIENT_STDOUT...")
    rdmadiag, pcap, outs = sys.argv[1], sys.argv[2], sys.argv[3:]
    rows = tshark(pcap, "infiniband", ["frame.number", "frame.time_epoch", "ip.src", "ip.dst",
                                       "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn"])
    naks = len(tshark(pcap, "infiniband.aeth.syndrome >= 0x60", ["frame.number"]))
    for step, ((first, last), out) in enumerate(zip(step_ranges(pcap, len(outs)), outs), start=1):
        with open(out) as f:
            check_step(rdmadiag, pcap, rows, f.read(), first, last, step)
    print(f"lab_pairing_check: ok ({naks} NAKs in the capture)")


if __name__ == "__main__":
    main()
