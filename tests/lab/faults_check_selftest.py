#!/usr/bin/env python3
"""Self-test of tests/lab/faults_check.py's rules (no lab, no rdmadiag): each
rule fires on a hand-made packet sequence that breaks it and stays silent on
one that keeps it; the ICRC/IP checksum facts are checked on a real rxe capture
(every frame intact, then one bit flipped).

  faults_check_selftest.py PCAP     (tests/pcaps/rxe_write_lat.pcap)
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faults_check as fc  # noqa: E402
from derive_pcaps import read_pcap, write_pcap  # noqa: E402

A, B = "10.77.0.2", "10.77.0.1"
failures = []


def expect(what, got, want):
    ok = (got[0] if got else None) == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got}")
    if not ok:
        failures.append(what)


def pkt(n, psn, ipid, opcode=7, src=A, dst=B, qp=0x11, damaged=False, syndrome=None, dmalen=None):
    return {"frame": n, "src": src, "dst": dst, "ipid": ipid, "opcode": opcode, "qp": qp, "psn": psn,
            "syndrome": syndrome, "dmalen": dmalen, "damaged": damaged, "icrc_ok": not damaged}


def judge(packets):
    frames = {p["frame"]: p for p in packets}
    return fc.Judge(frames, {}, fc.roce_flows(frames, {n: {"damaged": p["damaged"]} for n, p in frames.items()}), {})


def sequence_rules():
    # 100 (corrupted) 101: PSN 100 was on the wire, so a gap at 101 is no loss.
    j = judge([pkt(1, 100, 1, damaged=True), pkt(2, 101, 2)])
    expect("G1 corrupted PSN called lost", j.gap({"frame": 2, "expected_psn": 100, "count": 1}), "G1")
    j = judge([pkt(1, 99, 1), pkt(2, 101, 3), pkt(3, 100, 4)])
    expect("G1 silent on a real loss (100 resent later)", j.gap({"frame": 2, "expected_psn": 100, "count": 1}), None)
    j = judge([pkt(1, 99, 1), pkt(2, 101, 3), pkt(3, 100, 2)])
    expect("G3 a delayed original (older IPv4 ID) called lost",
           j.gap({"frame": 2, "expected_psn": 100, "count": 1}), "G3")
    j = judge([pkt(1, 5, 1, opcode=100), pkt(2, 9, 2, opcode=100)])
    expect("G4 a gap on UD", j.gap({"frame": 2, "expected_psn": 6, "count": 3}), "G4")
    j = judge([pkt(1, 99, 1), pkt(2, 101, 3), pkt(3, 100, 4)])
    expect("G2 'never resent' but resent", j.gap({"frame": 2, "expected_psn": 100, "count": 1,
                                                  "text": "never resent in this capture"}), "G2")
    j = judge([pkt(1, 100, 1), pkt(2, 101, 2), pkt(3, 101, 2)])
    expect("D1 silent on a network copy", fc.ROCE_RULES["psn_duplicate"](j, {"frame": 3}), None)
    expect("D1 a PSN never seen called duplicate", fc.ROCE_RULES["psn_duplicate"](j, {"frame": 2}), "D1")
    j = judge([pkt(1, 100, 1), pkt(2, 102, 3), pkt(3, 101, 2)])
    expect("O3 silent on a reordered original", fc.ROCE_RULES["psn_out_of_order"](j, {"frame": 3}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 102, 2), pkt(3, 101, 3)])
    expect("O3 a later-sent packet called out of order", fc.ROCE_RULES["psn_out_of_order"](j, {"frame": 3}), "O3")
    # 101 (ID 2) delayed; 102 (ID 3); the resend of 101 (ID 4) overtakes the original.
    j = judge([pkt(1, 100, 1), pkt(2, 102, 3), pkt(3, 101, 4), pkt(4, 101, 2)])
    expect("O1 silent on an original overtaken by its resend", fc.ROCE_RULES["psn_out_of_order"](j, {"frame": 4}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 102, 3), pkt(3, 101, 4), pkt(4, 101, 5)])
    expect("O1 a second resend called out of order", fc.ROCE_RULES["psn_out_of_order"](j, {"frame": 4}), "O1")
    # 101 (ID 2) delayed past its own resend (ID 3), nothing higher sent yet: still reordered.
    j = judge([pkt(1, 100, 1), pkt(2, 101, 3), pkt(3, 101, 2)])
    expect("O2/O3 silent on an original overtaken by its resend alone",
           fc.ROCE_RULES["psn_out_of_order"](j, {"frame": 3}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 100, 2), pkt(3, 101, 3)])
    expect("O2 a packet with nothing after it called out of order",
           fc.ROCE_RULES["psn_out_of_order"](j, {"frame": 3}), "O2")


def resend_rules():
    j = judge([pkt(1, 100, 1), pkt(2, 100, 1)])
    expect("R2 a network copy called a resend", fc.ROCE_RULES["retransmission"](j, {"frame": 2}), "R2")
    j = judge([pkt(1, 100, 1, opcode=12, dmalen=4096), pkt(2, 102, 2, opcode=12)])
    expect("R1 silent on a re-issued READ inside the READ's PSNs",
           fc.ROCE_RULES["retransmission"](j, {"frame": 2}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 101, 2)])
    expect("R1 a first transmission called a resend", fc.ROCE_RULES["retransmission"](j, {"frame": 2}), "R1")
    j = judge([pkt(1, 100, 1), pkt(2, 101, 2, qp=0x8011, damaged=True), pkt(3, 102, 3), pkt(4, 101, 4)])
    expect("R1 silent on a resend of a copy whose QP number was damaged",
           fc.ROCE_RULES["retransmission"](j, {"frame": 4}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 102, 3), pkt(3, 101, 4), pkt(4, 101, 2)])
    expect("R1 silent on a resend that overtook its original", fc.ROCE_RULES["retransmission"](j, {"frame": 3}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 100, 7, src=B, dst=A, opcode=17, syndrome=0), pkt(3, 100, 2)])
    expect("R5 'ACK lost' while the ACK is captured",
           fc.ROCE_RULES["retransmission"](j, {"frame": 3, "cause": "ack_lost"}), "R5")
    j = judge([pkt(1, 100, 1), pkt(2, 100, 7, src=B, dst=A, opcode=17, syndrome=0, damaged=True), pkt(3, 100, 2)])
    expect("R6 silent on 'ACK captured corrupt' with the damaged ACK captured",
           fc.ROCE_RULES["retransmission"](j, {"frame": 3, "cause": "ack_corrupt"}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 100, 7, src=B, dst=A, opcode=17, syndrome=0), pkt(3, 100, 2)])
    expect("R6 'ACK captured corrupt' with only an intact ACK",
           fc.ROCE_RULES["retransmission"](j, {"frame": 3, "cause": "ack_corrupt"}), "R6")
    # READ 100..103; responses 100..103; the READ re-issued from 102 (the requester lacked it).
    answers = [pkt(2 + i, 100 + i, 10 + i, src=B, dst=A, opcode=(13, 14, 14, 15)[i]) for i in range(4)]
    j = judge([pkt(1, 100, 1, opcode=12, dmalen=4096), *answers, pkt(6, 102, 2, opcode=12, dmalen=2048)])
    expect("R7 silent on 'READ response lost after the capture point' with it captured intact",
           fc.ROCE_RULES["retransmission"](j, {"frame": 6, "cause": "read_response_lost_after_capture"}), None)
    answers[2] = pkt(4, 102, 12, src=B, dst=A, opcode=14, qp=0x80011, damaged=True)
    j = judge([pkt(1, 100, 1, opcode=12, dmalen=4096), *answers, pkt(6, 102, 2, opcode=12, dmalen=2048)])
    expect("R7 'READ response lost after the capture point' with it captured damaged",
           fc.ROCE_RULES["retransmission"](j, {"frame": 6, "cause": "read_response_lost_after_capture"}), "R7")
    # The capture of the QP begins at 101; the responder NAKs 100 (it took 101): 100 was sent before.
    j = judge([pkt(1, 101, 2), pkt(2, 100, 7, src=B, dst=A, opcode=17, syndrome=0x60), pkt(3, 100, 3)])
    expect("R1 silent on a resend the responder's NAK asked for",
           fc.ROCE_RULES["retransmission"](j, {"frame": 3}), None)
    j = judge([pkt(1, 100, 1), pkt(2, 101, 2), pkt(3, 100, 7, src=B, dst=A, opcode=17, syndrome=0x60),
               pkt(4, 101, 4)])
    expect("S1 a resend after a NAK below it called spurious",
           fc.ROCE_RULES["spurious_retransmission"](j, {"frame": 4}), "S1")
    j = judge([pkt(1, 100, 1), pkt(2, 100, 2)])
    expect("S1 silent on a timer resend of a delivered packet",
           fc.ROCE_RULES["spurious_retransmission"](j, {"frame": 2}), None)


def seg(n, seq, ipid, length=100):
    return {"frame": n, "src": A, "dst": B, "ipid": ipid, "sport": 1, "dport": 2, "seq": seq, "tcplen": length}


def tcp_rules():
    report = {"iwarp": {"flows": [{"src": f"{A}:1", "dst": f"{B}:2"}]}}
    hole = {"flow": 0, "frame": 2, "psn": 1100, "count": 100}
    frames = {1: seg(1, 1000, 1), 2: seg(2, 1200, 3), 3: seg(3, 1100, 2)}
    expect("T2 a reordered segment called lost", fc.IwarpJudge(frames, {}, report).hole(hole), "T2")
    expect("T2 silent when the report itself says reordered",
           fc.IwarpJudge(frames, {}, report).hole(dict(hole, fill="reordering")), None)
    frames = {1: seg(1, 1000, 1), 2: seg(2, 1200, 3), 3: seg(3, 1100, 4)}
    expect("T1, T2 silent on a real loss and its resend", fc.IwarpJudge(frames, {}, report).hole(hole), None)
    frames = {1: seg(1, 1000, 1), 2: seg(2, 1100, 2), 3: seg(3, 1200, 3)}
    expect("T1 bytes on the wire called lost", fc.IwarpJudge(frames, {}, report).hole(dict(hole, frame=3)), "T1")


def count_rules():
    step = {"client_counters": {"hw_counters/sent_pkts": 10, "hw_counters/completer_retry_err": 1,
                                "hw_counters/out_of_seq_request": 0}}
    false, _ = fc.step_rules(step, {"client": {"roce": 10}}, {"client": {"psn_missing": 1, "retransmission": 2}},
                             [], "rxe")
    fired = {r for r, _ in false}
    expect("N1 loss claimed with every sent packet on the wire", ("N1" if "N1" in fired else None,), "N1")
    expect("K2 more resend episodes than the kernel started", ("K2" if "K2" in fired else None,), "K2")
    false, _ = fc.step_rules(step, {"client": {"roce": 9}}, {"client": {"psn_missing": 1, "retransmission": 1}},
                             [], "rxe")
    expect("N1, K2 silent when the kernel's counts allow the claims", tuple(r for r, _ in false) or (None,), None)


def icrc_facts(pcap):
    linktype, _, recs = read_pcap(pcap)
    with tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "good.pcap")
        write_pcap(good, linktype, recs)
        facts = fc.wire_facts(good)
        roce = [n for n, f in facts.items() if "icrc_ok" in f]
        intact = len(roce) > 10 and all(facts[n]["icrc_ok"] and facts[n]["ip_ok"] for n in roce)
        expect(f"every RoCE frame of {os.path.basename(pcap)} has a good ICRC and IP checksum ({len(roce)} frames)",
               (intact,), True)
        n = roce[len(roce) // 2]
        sec, usec, wl, data = recs[n - 1]
        bad = bytearray(data)
        bad[-10] ^= 0x04  # one payload bit
        recs[n - 1] = (sec, usec, wl, bytes(bad))
        write_pcap(good, linktype, recs)
        expect("a flipped payload bit makes the ICRC bad", (fc.wire_facts(good)[n]["icrc_ok"],), False)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sequence_rules()
    resend_rules()
    tcp_rules()
    count_rules()
    icrc_facts(sys.argv[1])
    print(f"{len(failures)} failed" if failures else "all rules behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
