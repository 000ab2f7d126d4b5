#!/usr/bin/env python3
"""A capture that holds one direction of a queue pair only (a port mirror of one
direction, or the answers on the other path of an ECMP pair) must not get
verdicts that need the other direction.

Each bundled two-way capture is split by tshark into the requester's packets
and the responder's. On the requests alone rdmadiag called every resend made
after a NAK it could not see a "transport timeout" (rxe_write_bw_loss.pcap: 4
of 7, where tshark shows a NAK before each in the two-way file) and counted it
in timeout_retransmissions; on the answers alone it said of every NAK "no gap
seen at the capture point (lost after it)", a place it cannot know. The rule
checked: with no answer of the queue pair captured, a resend with no NAK and
no loss before it is cause no_answer_captured, never timeout, ack_lost or
spurious; a NAK whose requests are not captured says the place cannot be told.
The gaps the requests show are the same as in the two-way capture.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
SOURCES = ["rxe_write_bw_loss.pcap", "lab_rxe_write_lat_loss.pcap", "lab_rxe_read_lat_loss.pcap"]
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""))
    if not ok:
        failures.append(name)


def tshark(path, *args):
    out = subprocess.run(["tshark", "-r", path, *args], capture_output=True, text=True, check=True)
    return out.stdout


def report(path):
    out = subprocess.run([rdmadiag, "analyze", "--json", "-", path], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def gaps(rep, src):
    flows = {f["flow"]: f for f in rep["flows"]}
    return sorted((a["psn"], a.get("count", 0)) for a in rep["anomalies"]
                  if a["kind"] == "psn_gap" and flows[a["flow"]]["src"] == src)


def split(src_path, tmp):
    """(requester address, requests-only file, answers-only file), by tshark."""
    lines = tshark(src_path, "-Y", "infiniband.bth.opcode == 10 || infiniband.bth.opcode == 12 || "
                   "infiniband.bth.opcode == 6 || infiniband.bth.opcode == 7 || infiniband.bth.opcode == 8",
                   "-T", "fields", "-e", "ip.src", "-e", "ip.dst").split("\n")
    req, resp = lines[0].split("\t")
    one, other = os.path.join(tmp, "requests.pcap"), os.path.join(tmp, "answers.pcap")
    tshark(src_path, "-Y", "ip.src == %s && udp.dstport == 4791" % req, "-w", one)
    tshark(src_path, "-Y", "ip.src == %s && udp.dstport == 4791" % resp, "-w", other)
    return req, resp, one, other


def check_requests(name, two_way, req, path, resp):
    answers = tshark(path, "-Y", "ip.src == %s" % resp, "-T", "fields", "-e", "frame.number").split()
    check(name + ": tshark finds no answer in the requests' file", not answers)
    rep = report(path)
    resends = [a for a in rep["anomalies"] if a["kind"] == "retransmission"]
    bad = [(a["frame"], a.get("cause")) for a in resends if a.get("cause") in ("timeout", "ack_lost", "ack_corrupt")]
    check(name + ": no resend called a timeout or an ACK lost", not bad, str(bad))
    unknown = [a for a in resends if not a["related_frames"]]
    check(name + ": a resend with nothing before it is no_answer_captured",
          all(a.get("cause") == "no_answer_captured" for a in unknown), "%d such" % len(unknown))
    psn = [f["psn"] for f in rep["flows"] if f["src"] == req]
    check(name + ": no timeout or spurious resend counted",
          all(p["timeout_retransmissions"] == 0 and p["spurious_retransmissions"] == 0 for p in psn), str(psn))
    check(name + ": the same gaps as the two-way capture", gaps(rep, req) == gaps(two_way, req), str(gaps(rep, req)))
    return len(unknown)


def check_answers(name, path):
    rep = report(path)
    naks = [a for a in rep["anomalies"] if a["kind"] == "nak_psn_seq_error"]
    told = [a["frame"] for a in naks if "cannot be told" not in a["text"] or a["related_frames"]]
    check(name + ": no NAK is given a place of loss", not told, "%d NAKs, %s" % (len(naks), told))
    return len(naks)


if not shutil.which("tshark"):
    print("tshark not installed")
    sys.exit(77)

unknown_total = naks_total = 0
with tempfile.TemporaryDirectory() as tmp:
    for source in SOURCES:
        src_path = os.path.join(pcaps, source)
        two_way = report(src_path)
        req, resp, requests, answers = split(src_path, tmp)
        unknown_total += check_requests(source + " requests", two_way, req, requests, resp)
        naks_total += check_answers(source + " answers", answers)
check("the captures exercise both rules", unknown_total > 0 and naks_total > 0,
      "%d resends with nothing before them, %d NAKs" % (unknown_total, naks_total))
sys.exit(1 if failures else 0)
