#!/usr/bin/env python3
"""A capture point inside the sending host can see its RoCE packets before the
adapter computes their ICRC (like TCP checksum offload): every packet that host
sends then carries a bad ICRC in the capture, though the wire's was good.

Before decode/icrc_origin.h, rdmadiag called each such packet "corrupted in
flight; the receiver drops it" and the sequence analysis then hid the real
faults: rxe_write_bw_loss.pcap with the requester's ICRCs zeroed gave 871
icrc_bad, 0 gaps and 0 retransmissions, while the file holds 7 gaps and 638
retransmissions and the responder's intact ACKs name the "corrupt" PSNs, which
a receiver that dropped them never would.

The fixtures are made here from bundled real captures (rdma_rxe traffic), by
overwriting the ICRC of every RoCE packet one host sent, with zeros or with
garbage: nothing the receiver saw changes. The oracles: the ICRC check of
tests/crosscheck/derive_pcaps.py (independent of rdmadiag) counts the bad
ICRCs; tshark's BTH PSNs give the gaps (a PSN beyond the highest seen plus
one) and repeats (a PSN not above it) of the sender's requests; and the
construction says every verdict must be the one on the untouched file. Real
corruption (lab_rxe_write_corrupt.pcap, netem corrupt) must stay corruption.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "crosscheck"))
import derive_pcaps as dp  # noqa: E402  (the repository's independent ICRC code)

rdmadiag, pcaps = sys.argv[1], sys.argv[2]
SOURCES = ["rxe_write_bw_loss.pcap", "lab_rxe_write_lat_loss.pcap", "lab_rxe_read_lat_loss.pcap"]
REQUEST_OPCODES = "0,1,2,3,4,5,6,7,8,9,10,11,12,19,20"  # RC SEND/WRITE/READ request/atomics
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""))
    if not ok:
        failures.append(name)


def roce(pkt):
    """(source IPv4, ip header, udp header, transport bytes, ICRC offset) of a whole RoCEv2/IPv4 frame."""
    if len(pkt) < 14 + 20 + 8 + 12 + 4 or pkt[12:14] != b"\x08\x00" or pkt[14] >> 4 != 4 or pkt[23] != 17:
        return None
    if struct.unpack("!H", pkt[20:22])[0] & 0x3FFF:  # a fragment (or a header a bit error made one): not RoCE
        return None
    ihl = (pkt[14] & 0x0F) * 4
    end = 14 + struct.unpack("!H", pkt[16:18])[0]
    udp = pkt[14 + ihl:14 + ihl + 8]
    if struct.unpack("!H", udp[2:4])[0] != dp.ROCE_PORT or end > len(pkt):
        return None
    return pkt[26:30], pkt[14:14 + ihl], udp, pkt[14 + ihl + 8:end - 4], end - 4


def bad_icrcs(path):
    _, _, recs = dp.read_pcap(path)
    n = 0
    for _, _, _, pkt in recs:
        r = roce(pkt)
        if r and dp.icrc_roce_v2(r[1], r[2], r[3], False) != pkt[r[4]:r[4] + 4]:
            n += 1
    return n


def rewrite(src, dst, sender, garbage, until=None):
    """Overwrites the ICRC of `sender`'s RoCE frames (before record `until`); returns
    their 1-based frame numbers."""
    linktype, snaplen, recs = dp.read_pcap(src)
    rng = random.Random(4791)
    out, done = [], []
    for i, (sec, usec, wirelen, pkt) in enumerate(recs):
        r = roce(pkt)
        if r and r[0] == sender and (until is None or i + 1 < until):
            icrc = bytes(rng.randrange(256) for _ in range(4)) if garbage else b"\0\0\0\0"
            pkt = pkt[:r[4]] + icrc + pkt[r[4] + 4:]
            done.append(i + 1)
        out.append((sec, usec, wirelen, pkt))
    dp.write_pcap(dst, linktype, out, snaplen)
    return done


def tshark(path, *args):
    return subprocess.run(["tshark", "-r", path, *args], capture_output=True, text=True, check=True).stdout


def requester(path):
    """The address that sends the first RC request, and tshark's (frame, QP, PSN) of its requests."""
    rows = [l.split("\t") for l in tshark(path, "-Y", "infiniband.bth.opcode in {%s}" % REQUEST_OPCODES,
                                          "-T", "fields", "-e", "frame.number", "-e", "ip.src", "-e",
                                          "infiniband.bth.destqp", "-e", "infiniband.bth.psn").split("\n") if l]
    sender = rows[0][1]
    return sender, [(int(f), int(q, 0), int(p)) for f, s, q, p in rows if s == sender]


def sequence_oracle(requests):
    """Per destination QP: PSN jumps beyond the highest seen + 1 (gaps) and PSNs not above it (repeats)."""
    high, gaps, repeats = {}, 0, 0
    for _, qp, psn in requests:
        if qp in high:
            d = (psn - high[qp]) & 0xFFFFFF
            if d >= 0x800000 or d == 0:
                repeats += 1
                continue
            gaps += d > 1
        high[qp] = psn
    return gaps, repeats


def report(path, *extra):
    out = subprocess.run([rdmadiag, "analyze", "-q", *extra, "--json", "-", path], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def verdicts(rep):
    return sorted((a["kind"], a["frame"], a.get("psn", 0), a.get("count", 0), a.get("cause", ""), a["text"])
                  for a in rep["anomalies"] if a["kind"] not in ("icrc_bad", "icrc_not_wire"))


def check_fixture(name, path, original, frames):
    check(name + ": the independent ICRC check finds the rewritten frames bad", bad_icrcs(path) == len(frames),
          "%d bad, %d rewritten" % (bad_icrcs(path), len(frames)))
    for jobs in ("1", "2"):
        rep = report(path, "-j", jobs)
        notes = [a for a in rep["anomalies"] if a["kind"] == "icrc_not_wire"]
        check("%s -j %s: one icrc_not_wire note counting every rewritten packet" % (name, jobs),
              len(notes) == 1 and notes[0]["count"] == len(frames) and notes[0]["frame"] == frames[0],
              str([(a["frame"], a["count"]) for a in notes]))
        check("%s -j %s: the summary says which bad ICRCs are not the wire's" % (name, jobs),
              rep["summary"]["icrc"].get("not_wire") == len(frames) and rep["summary"]["icrc"]["bad"] == len(frames),
              str(rep["summary"]["icrc"]))
        check("%s -j %s: no packet called corrupt" % (name, jobs),
              rep["summary"]["anomalies"]["by_kind"].get("icrc_bad", 0) == 0 and
              all(f["icrc_bad"] == 0 for f in rep["flows"]))
        check("%s -j %s: the flows' verdicts are the untouched file's" % (name, jobs), rep["flows"] == original["flows"])
        check("%s -j %s: the anomalies are the untouched file's" % (name, jobs), verdicts(rep) == verdicts(original))
    return notes[0] if notes else {"related_frames": []}


def check_source(src, tmp):
    path = os.path.join(pcaps, src)
    sender, requests = requester(path)
    gaps, repeats = sequence_oracle(requests)
    original = report(path)
    psn = [f["psn"] for f in original["flows"] if f["src"] == sender]
    check(src + ": the untouched file's gaps and resends are tshark's",
          sum(p["gaps"] for p in psn) == gaps and
          sum(p["retransmissions"] + p["spurious_retransmissions"] for p in psn) == repeats,
          "tshark %d gaps, %d repeats; rdmadiag %s" % (gaps, repeats,
                                                       [(p["gaps"], p["retransmissions"], p["spurious_retransmissions"])
                                                        for p in psn]))
    addr = bytes(int(x) for x in sender.split("."))
    for garbage in (False, True):
        name = "%s, %s's ICRCs %s" % (src, sender, "garbage" if garbage else "zeroed")
        fixture = os.path.join(tmp, "fixture.pcap")
        check_fixture(name, fixture, original, rewrite(path, fixture, addr, garbage))
    # Only the first half rewritten: the intact packet after it contradicts the verdict.
    half = requests[len(requests) // 2][0]
    fixture = os.path.join(tmp, "half.pcap")
    frames = rewrite(path, fixture, addr, False, until=half)
    note = check_fixture(src + ", the first half zeroed", fixture, original, frames)
    first_intact = min(f for f, _, _ in requests if f >= half)
    check(src + ": the first intact packet of the sender contradicts the note",
          len(note["related_frames"]) == 2 and note["related_frames"][1] <= first_intact, str(note["related_frames"]))


CM_SOURCES = ["rxe_send_lat_rdmacm.pcap", "lab_rxe_send_lat_rdmacm_near_psn.pcap"]


def cm_answer_oracle(path, sender):
    """tshark's frame of the first CM message from the other host naming, as its
    Remote Communication ID, the Local one of a REQ or REP `sender` sent before it."""
    rows = [l.split("\t") for l in tshark(path, "-Y", "infiniband.cm.req || infiniband.cm.rep || "
                                          "infiniband.cm.rtu.localcommid || infiniband.cm.rej.localcommid",
                                          "-T", "fields", "-e", "frame.number", "-e", "ip.src",
                                          "-e", "infiniband.cm.req", "-e", "infiniband.cm.rep",
                                          "-e", "infiniband.cm.rep.remotecommid", "-e", "infiniband.cm.rtu.remotecommid",
                                          "-e", "infiniband.cm.rej.remotecommid").split("\n") if l]
    introduced = set()
    for frame, src, req, rep, *remote in rows:
        if src == sender:
            introduced |= {x for x in (req, rep) if x}
        elif any(r and r in introduced for r in remote):
            return int(frame)
    return None


def check_cm_source(src, tmp):
    """Connections set up by the CM (rdma_cm): while a sender's direction is
    undecided its CM REQ or REP is held as corrupt. The peer's intact answer to
    it (a REP naming the REQ's Local Communication ID, an RTU naming the REP's)
    decides, and the held messages reach the CM pairing (before: pairing
    inferred, no path MTU, flows starting at their first RC packet)."""
    path = os.path.join(pcaps, src)
    original = report(path)
    check(src + ": the untouched file's RC flows are paired by the CM",
          any(f.get("pairing") == "cm" for f in original["flows"]))
    for sender in sorted({l for l in tshark(path, "-Y", "infiniband.cm.req || infiniband.cm.rep", "-T", "fields", "-e", "ip.src").split()}):
        fixture = os.path.join(tmp, "cm.pcap")
        frames = rewrite(path, fixture, bytes(int(x) for x in sender.split(".")), False)
        note = check_fixture("%s, %s's ICRCs zeroed" % (src, sender), fixture, original, frames)
        answer = cm_answer_oracle(path, sender)
        check("%s, %s's ICRCs zeroed: decided by the peer's CM answer (tshark: frame %s)" % (src, sender, answer),
              answer is not None and note["related_frames"][:1] == [answer], str(note["related_frames"]))


def damaged_fragment_headers(path):
    """IPv4 headers with a fragment bit set whose RFC 1071 checksum fails (a bit error made them fragments)."""
    _, _, recs = dp.read_pcap(path)
    n = 0
    for _, _, _, pkt in recs:
        if len(pkt) >= 34 and pkt[12:14] == b"\x08\x00" and struct.unpack("!H", pkt[20:22])[0] & 0x3FFF:
            ihl = (pkt[14] & 0x0F) * 4
            n += dp.csum16(pkt[14:14 + ihl]) != 0
    return n


def check_real_corruption():
    path = os.path.join(pcaps, "lab_rxe_write_corrupt.pcap")
    rep = report(path)
    bad = bad_icrcs(path)
    kinds = rep["summary"]["anomalies"]["by_kind"]
    headers = damaged_fragment_headers(path)
    check("lab_rxe_write_corrupt.pcap: netem's corruption stays corruption",
          "icrc_not_wire" not in kinds and kinds.get("icrc_bad", 0) == bad + headers and bad > 0,
          "independent check %d bad on UDP 4791, %d damaged headers; icrc_bad %s" % (bad, headers, kinds.get("icrc_bad")))
    diags = rep["summary"]["diagnostics"]
    # Decoded as the RoCE packet it was (one header bit put back: checksum and ICRC hold).
    check("lab_rxe_write_corrupt.pcap: a header the bit error made a fragment is a damaged RoCE header",
          headers == 1 and diags.get("ipv4_header_bit_error", {}).get("count") == headers and "ip_fragment" not in diags,
          "RFC 1071 finds %d; diagnostics %s" % (headers, diags))


def main():
    if subprocess.run(["which", "tshark"], capture_output=True).returncode:
        print("tshark not installed")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        for src in SOURCES:
            check_source(src, tmp)
        for src in CM_SOURCES:
            check_cm_source(src, tmp)
    check_real_corruption()
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
