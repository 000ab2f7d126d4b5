"""Which flows of a lab step's capture belong to one connection, from perftest's own printout.

A reliable connection's requests travel one way and their answers the other, and a request does
not carry its sender's QP number, so `rdmadiag analyze` infers which flow answers which
(docs/analysis.md, "Flows and pairing"). The truth here comes from elsewhere: perftest prints
each QP's number and starting PSN ("local address" for its own, "remote address" for its
peer's), and a QP's first request carries that PSN (or, when the first ones were lost before
the capture point, one a little above it). So the first request PSN seen on the wire towards a
destination QP names the sending QP among the printed ones: that QP and the destination are one
connection.
"""
import json
import os
import re
import subprocess
import tempfile

# RC requests: SEND first..only/imm (0-5), RDMA WRITE first..only/imm (6-11), RDMA READ request
# (12), CmpSwap and FetchAdd (19, 20), SEND last/only with invalidate (22, 23)
REQUEST_OPCODES = set(range(0, 13)) | {19, 20, 22, 23}
PSN_SPACE = 1 << 24


def analyzed_flows(rdmadiag, pcap, first, last):
    """`rdmadiag analyze`'s flows of frames first..last."""
    with tempfile.TemporaryDirectory() as tmp:
        cut = os.path.join(tmp, "step.pcap")
        subprocess.run(["editcap", "-r", pcap, cut, f"{first}-{last}"], check=True, capture_output=True)
        return json.loads(subprocess.run([rdmadiag, "analyze", "--json", "-", cut], check=True,
                                         capture_output=True, text=True).stdout)["flows"]


def printed_qps(text, which):
    """{starting PSN: QPN} of the "local" or "remote" address lines perftest printed."""
    pattern = which + r" address: LID \w+ QPN (0x[0-9a-f]+) PSN (0x[0-9a-f]+)"
    return {int(psn, 16): int(qpn, 16) for qpn, psn in re.findall(pattern, text)}


def sender_of(printed, psn, window):
    """The printed QP whose starting PSN is at most `window` below `psn`; None if none or two."""
    near = [qpn for start, qpn in printed.items() if (psn - start) % PSN_SPACE < window]
    return near[0] if len(near) == 1 else None


def true_pairs(text, rows, first, last, host_ip, window=1):
    """{(src, dst, dest QP): the dest QP of its reverse flow} for frames first..last.

    text: the perftest printout of the host at host_ip; rows: tshark rows (frame.number,
    frame.time_epoch, ip.src, ip.dst, infiniband.bth.opcode, infiniband.bth.destqp,
    infiniband.bth.psn). window 1: the first request must carry the printed PSN (no loss);
    larger under loss. With requests both ways each direction is read on its own, and they
    must agree. Raises ValueError when the wire and the printout do not fit."""
    senders = {True: printed_qps(text, "local"), False: printed_qps(text, "remote")}  # by: host sends?
    firsts = {}
    for number, _, src, dst, opcode, destqp, psn in rows:
        if first <= int(number) <= last and opcode and int(opcode) in REQUEST_OPCODES:
            firsts.setdefault((src, dst, int(destqp, 16)), int(psn))
    pairs = {}
    for (src, dst, destqp), psn in firsts.items():
        sender = sender_of(senders[src == host_ip], psn, window)
        if sender is None:
            raise ValueError(f"the first request {src}->{dst} to QP {destqp:#x} has PSN {psn:#x}, "
                             f"not just above one printed PSN")
        pairs[(src, dst, destqp)] = sender
    for (src, dst, destqp), sender in list(pairs.items()):
        if pairs.setdefault((dst, src, sender), destqp) != destqp:  # the answers' flow, or the other way's
            raise ValueError(f"{src}->{dst} QP {destqp:#x} is sent to by QP {sender:#x}, "
                             f"but the other way disagrees")
    return pairs


def check_pairing(flows, truth):
    """The flows paired with another connection's flow, or not paired at all, as messages."""
    wrong = []
    for f in flows:
        key = (f["src"], f["dst"], f["dest_qp"])
        if key in truth and f.get("peer_qp") != truth[key]:
            wrong.append(f"{key[0]}->{key[1]} QP {key[2]:#x} paired with QP {f.get('peer_qp')} "
                         f"({f.get('pairing')}), its connection's other QP is {truth[key]:#x}")
    return wrong
