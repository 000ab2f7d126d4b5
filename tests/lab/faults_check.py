#!/usr/bin/env python3
"""tests/lab/faults_check.py — judge every verdict of `rdmadiag analyze` on one
fault-matrix boot (a tests/lab/run directory made with --mark-steps) against
oracles nobody on this project wrote:

  * tshark's per-frame decode (BTH destination QP, PSN, opcode, AETH syndrome,
    RETH length; IPv4 ID; TCP sequence numbers), the "PSN list";
  * the ICRC recomputed here with zlib.crc32 (tests/crosscheck/derive_pcaps.py,
    from ../shared/README.md's masking rules), the IPv4 header checksum and the
    TCP checksum recomputed here;
  * the kernel's own counters of each step, both VMs (rxe hw_counters, siw's
    TCP MIB) and netem's `tc -s qdisc` counts; perftest's exit status.

The rules (G*, D*, O*, R*, K*, N*, C*, B*, T*, I*) are written out, with the
spec sections and the kernel source lines behind them, in docs/fault-matrix.md.
A verdict the capture point cannot confirm or refute is accepted; a verdict an
oracle contradicts is a false verdict, reported with its frame and rule.

  faults_check.py RUN_DIR --analyzer BIN [--json OUT] [--quiet]

Prints one row per step (cell); exit 0 when no verdict is false, 1 otherwise,
2 when the run cannot be judged.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "crosscheck"))
from derive_pcaps import icrc_roce_v2, read_pcap, csum16  # noqa: E402

PSN_MOD = 1 << 24
ROCE_PORT = 4791
MARKER = b"rdmadiag-lab step "
NAK_SEQ = 0x60
NO_BTH = "tshark decodes no BTH at this frame"
IB_MTU = 1024  # rxe's path MTU on this lab (perftest's default; docs/fault-matrix.md)
TSHARK_FIELDS = ["frame.number", "ip.src", "ip.dst", "ip.id", "infiniband.bth.opcode",
                 "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.aeth.syndrome",
                 "infiniband.reth.dmalen", "tcp.srcport", "tcp.dstport", "tcp.seq_raw", "tcp.len",
                 "iwarp_rdma.opcode", "icmp.type"]


def psn_diff(a, b):
    """a - b in 24-bit PSN space, in [-2^23, 2^23)."""
    return ((a - b + (PSN_MOD >> 1)) % PSN_MOD) - (PSN_MOD >> 1)


def sent_before(id_a, id_b):
    """True when IPv4 ID id_a was given out before id_b by the same sender
    (Linux hands out IDs per (src, dst, protocol) in increasing order)."""
    d = (id_b - id_a) % 65536
    return 0 < d < 32768


# ------------------------------------------------------------------ the wire

def wire_facts(pcap):
    """Per frame number: what we compute ourselves from the bytes: ICRC/IP/TCP
    checksum state and step markers. Ethernet + IPv4 only (the lab's wire)."""
    _, _, recs = read_pcap(pcap)
    facts = {}
    for n, (_sec, _usec, _wirelen, pkt) in enumerate(recs, 1):
        f = frame_fact(pkt)
        if f:
            facts[n] = f
    return facts


def frame_fact(pkt):
    if len(pkt) < 34 or pkt[12:14] != b"\x08\x00" or pkt[14] >> 4 != 4:
        return None
    ihl = (pkt[14] & 0x0F) * 4
    total = struct.unpack("!H", pkt[16:18])[0]
    ip = pkt[14:14 + ihl]
    fact = {"ip_ok": len(ip) == ihl and ihl >= 20 and csum16(ip) == 0, "proto": pkt[23]}
    end = 14 + total
    if end > len(pkt) or total < ihl:
        fact["damaged"] = True  # length field corrupted: no receiver takes it
        return fact
    l4 = pkt[14 + ihl:end]
    if fact["proto"] == 17 and len(l4) >= 8:
        dport = struct.unpack("!H", l4[2:4])[0]
        if dport == 9 and l4[8:8 + len(MARKER)] == MARKER:
            fact["marker"] = int(l4[8 + len(MARKER):].split(b"\n")[0] or b"0")
        if dport == ROCE_PORT and len(l4) >= 8 + 12 + 4:
            fact["icrc_ok"] = icrc_roce_v2(ip, l4[:8], l4[8:-4], False) == l4[-4:]
        elif bin(dport ^ ROCE_PORT).count("1") == 1 and len(l4) >= 8 + 12 + 4:
            # RoCEv2 whose destination port took a bit error: the ICRC covers the ports, so
            # it holds with 4791 put back (the receiver answers ICMP port unreachable).
            udp = l4[:2] + struct.pack("!H", ROCE_PORT) + l4[4:8]
            if icrc_roce_v2(ip, udp, l4[8:-4], False) == l4[-4:]:
                fact["icrc_ok"] = False
                fact["flipped_port"] = dport
    if fact["proto"] == 6 and len(l4) >= 20:
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(l4))
        fact["tcp_ok"] = csum16(pseudo + l4) == 0
    fact["damaged"] = not fact["ip_ok"] or not fact.get("icrc_ok", True) or not fact.get("tcp_ok", True)
    return fact


def tshark_frames(pcap, flipped_ports=()):
    """tshark's decode per frame. `flipped_ports`: UDP ports one bit off 4791
    that carried RoCEv2 (wire_facts: the ICRC holds with 4791 put back), which
    tshark is told to decode as RoCEv2 too, so that the BTH of such a frame has
    tshark's reading like any other (the ICMP errors quoting them excepted)."""
    cmd = ["tshark", "-r", pcap, "--disable-protocol", "rpcordma", "-o", "infiniband.identify_payload:FALSE",
           "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f"]
    for port in sorted(set(flipped_ports)):
        cmd += ["-d", f"udp.port=={port},infiniband"]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"faults_check: tshark failed: {res.stderr.strip()[:300]}")
    frames = {}
    for line in res.stdout.splitlines():
        v = dict(zip(TSHARK_FIELDS, line.split("\t")))
        n = int(v["frame.number"])
        rec = {"frame": n, "src": v["ip.src"], "dst": v["ip.dst"],
               "ipid": int(v["ip.id"], 16) if v["ip.id"] else None}
        if v["infiniband.bth.psn"] and not v["icmp.type"]:  # (not the packet an ICMP error quotes)
            rec.update(opcode=int(v["infiniband.bth.opcode"]), qp=int(v["infiniband.bth.destqp"], 16),
                       psn=int(v["infiniband.bth.psn"]),
                       syndrome=int(v["infiniband.aeth.syndrome"], 0) if v["infiniband.aeth.syndrome"] else None,
                       dmalen=int(v["infiniband.reth.dmalen"]) if v["infiniband.reth.dmalen"] else None)
        if v["tcp.seq_raw"]:
            rec.update(sport=int(v["tcp.srcport"]), dport=int(v["tcp.dstport"]),
                       seq=int(v["tcp.seq_raw"]), tcplen=int(v["tcp.len"] or 0),
                       terminate=v["iwarp_rdma.opcode"] in ("7", "0x07"))
        frames[n] = rec
    return frames


def step_windows(facts, nsteps):
    """{frame: step} from the marker datagrams (the first copy of each marker
    starts its step; frames before step 1's marker are step 0: boot, ping)."""
    starts = {}
    for n in sorted(facts):
        m = facts[n].get("marker")
        if m and m not in starts and facts[n]["proto"] == 17:
            starts[m] = n
    bounds = sorted((n, s) for s, n in starts.items() if 1 <= s <= nsteps)
    return bounds, [s for s in range(1, nsteps + 1) if s not in starts]


def step_of(frame, bounds):
    step = 0
    for n, s in bounds:
        if frame >= n:
            step = s
    return step


# ------------------------------------------------------------------ flows

def service_of(opcode):
    return {0: "RC", 1: "UC", 2: "RD", 3: "UD"}.get(opcode >> 5, "OTHER")


def roce_flows(frames, facts):
    """(src, dst, dest QP) -> frames in capture order, each with our checksum facts."""
    flows = defaultdict(list)
    for n in sorted(frames):
        r = frames[n]
        if "psn" in r:
            r["damaged"] = facts.get(n, {}).get("damaged", False)
            r["icrc_ok"] = facts.get(n, {}).get("icrc_ok")
            flows[(r["src"], r["dst"], r["qp"])].append(r)
    return flows


def read_ranges(flow):
    """[(first PSN, PSN count)] of every RDMA READ request on a flow (IBA 9.7.4.1.3:
    a READ request reserves one PSN per response packet)."""
    out = []
    for r in flow:
        if r["opcode"] == 12 and r["dmalen"] is not None:  # RC_RDMA_READ_REQUEST
            out.append((r["psn"], max(1, -(-r["dmalen"] // IB_MTU))))
    return out


def in_range(psn, first, count):
    return 0 <= psn_diff(psn, first) < count


# ------------------------------------------------------------------ the rules (docs/fault-matrix.md)

class Judge:
    """Holds one boot's oracles; each rule method returns (rule, reason) when
    a verdict is false, None when the oracles confirm it or cannot tell."""

    def __init__(self, frames, facts, flows, report):
        self.frames, self.facts, self.flows, self.report = frames, facts, flows, report
        self.gap_psns = defaultdict(list)  # flow key -> [(first, count, frame)] rdmadiag called lost

    def key_of(self, frame):
        r = self.frames.get(frame, {})
        return (r["src"], r["dst"], r["qp"]) if "psn" in r else None

    def before(self, key, frame):
        return [r for r in self.flows.get(key, []) if r["frame"] < frame]

    def subject(self, a):
        """(flow key, the frame's record, the flow's frames before it), or None
        when tshark decodes no BTH at the anomaly's frame."""
        key = self.key_of(a["frame"])
        return None if key is None else (key, self.frames[a["frame"]], self.before(key, a["frame"]))

    @staticmethod
    def current_pass(prior):
        """The frames since the flow last went back (a resend pass or a late
        packet): the last frame whose PSN is not above every PSN before it."""
        start, top = 0, None
        for i, r in enumerate(prior):
            if top is not None and psn_diff(r["psn"], top) <= 0:
                start = i
            top = r["psn"] if top is None or psn_diff(r["psn"], top) > 0 else top
        return prior[start:]

    def gap(self, a):
        key, f = self.key_of(a["frame"]), a["frame"]
        first, count = a.get("expected_psn"), a.get("count", 0)
        if key is None or first is None:
            return ("G0", "gap frame has no BTH in tshark's decode")
        me = self.frames[f]
        # R1 accepts a resend of any PSN the report called lost, even falsely: that
        # gap is judged here, the resend claim only for being consistent with it.
        self.gap_psns[key].append((first, count, f))
        if service_of(me["opcode"]) == "UD":
            return ("G4", "UD has no PSN sequence to lose from (IBA 9.8; UD PSNs are per sender QP, not per flow)")
        if me["opcode"] == 17:
            return ("G5", "gap at a plain ACK: ACKs may be coalesced (IBA 9.7.5.1.1), a skipped ACK PSN is no loss")
        for r in self.current_pass(self.before(key, f)):
            if in_range(r["psn"], first, count):
                return ("G1", f"PSN {r['psn']} called lost was on the wire at frame {r['frame']}"
                              f"{' (corrupted: ICRC/IP checksum bad)' if r['damaged'] else ''} before gap frame {f}")
        if me["ipid"] is not None:
            for r in self.flows[key]:
                if r["frame"] > f and in_range(r["psn"], first, count) and r["ipid"] is not None \
                        and sent_before(r["ipid"], me["ipid"]):
                    return ("G3", f"PSN {r['psn']} arrived at frame {r['frame']} with IPv4 ID {r['ipid']:#06x}, "
                                  f"sent before the gap frame ({me['ipid']:#06x}): reordered, not lost")
        if "never resent" in a.get("text", ""):
            for r in self.flows[key]:
                if r["frame"] > f and in_range(r["psn"], first, count):
                    return ("G2", f"'never resent' but PSN {r['psn']} is on the wire at frame {r['frame']}")
        return None

    def duplicate(self, a, subject):
        _, me, prior = subject
        if not any(r["psn"] == me["psn"] for r in prior):
            return ("D1", f"PSN {me['psn']} never appeared on this flow before frame {a['frame']}")
        return None

    def out_of_order(self, a, subject):
        _, me, prior = subject
        # A copy already on the wire makes this one a copy or resend, unless this one was
        # sent first (its IPv4 ID is older): then it is the original, overtaken by its resend.
        earlier = [r for r in prior if r["psn"] == me["psn"]]
        if earlier and not (me["ipid"] is not None and all(r["ipid"] is not None and sent_before(me["ipid"], r["ipid"])
                                                            for r in earlier)):
            return ("O1", f"PSN {me['psn']} was already on the wire: a copy or resend, not a late original")
        # What arrived before it that it should have preceded: higher PSNs, and its
        # own resends (which O1 has shown were all sent after it).
        later = [r for r in prior if psn_diff(r["psn"], me["psn"]) >= 0]
        if not later:
            return ("O2", "no higher PSN (nor its own resend) arrived before it")
        if me["ipid"] is not None and not any(r["ipid"] is not None and sent_before(me["ipid"], r["ipid"])
                                              for r in later):
            return ("O3", f"IPv4 ID {me['ipid']:#06x} is after every higher PSN's: sent later (a resend), not reordered")
        return None

    def retransmission(self, a, subject):
        key, me, prior = subject
        f, p = a["frame"], me["psn"]
        if service_of(me["opcode"]) in ("UC", "UD"):
            return ("R3", f"{service_of(me['opcode'])} never resends (IBA 9.8)")
        if any(r["psn"] == p and r["ipid"] == me["ipid"] and r["ipid"] is not None for r in prior):
            return ("R2", f"frame {f} has the IPv4 ID of an earlier copy of PSN {p}: a network duplicate, not a resend")
        # ... or its original comes later, overtaken by this resend (an older IPv4 ID).
        overtaken = me["ipid"] is not None and any(
            r["frame"] > f and r["psn"] == p and r["ipid"] is not None and sent_before(r["ipid"], me["ipid"])
            for r in self.flows.get(key, []))
        # ... or a damaged copy between the same hosts carried it (its QP number may be the damage).
        src, dst, _ = key
        damaged_copy = any(n < f and r.get("damaged") and r.get("src") == src and r.get("dst") == dst
                           and r.get("psn") == p for n, r in self.frames.items())
        # ... or the responder NAKed (sequence error) at or just below it: it took a later PSN, so
        # PSN p was sent before (in order), even if before the capture of this QP began.
        nak_asked = any(n < f and self.reverse(n, src, dst, (17,)) and r.get("syndrome") == NAK_SEQ
                        and 0 <= psn_diff(p, r["psn"]) < 64 for n, r in self.frames.items())
        seen = any(r["psn"] == p for r in prior) or any(in_range(p, s, n) for s, n in read_ranges(prior)) \
            or any(in_range(p, s, n) for s, n, _ in self.gap_psns.get(key, [])) or overtaken or damaged_copy \
            or nak_asked
        if not seen:
            return ("R1", f"PSN {p} never sent before (nor inside an earlier READ's range, nor reported lost)")
        if a.get("cause") == "ack_corrupt" and not self.damaged_answer(key, p, prior, f):
            return ("R6", f"'the ACK/response was captured corrupt' but no damaged packet from the responder "
                          f"came between PSN {p}'s last copy and frame {f}")
        if a.get("cause") == "read_response_lost_after_capture":
            last = self.last_response_copy(key, p, f)
            if last is None or self.frames[last].get("damaged"):
                return ("R7", f"'READ response lost after the capture point' but "
                              + (f"the last READ response with PSN {p} before it is damaged (frame {last})" if last
                                 else f"no READ response with PSN {p} is on the wire before it"))
        if a.get("cause") == "ack_lost":
            resp = self.response_seen(key, p, prior, f)
            if resp:
                return ("R5", f"'the ACK/response never reached the capture point' but frame {resp} answering "
                              f"PSN {p} is on the wire")
        return None

    def damaged_answer(self, key, p, prior, f):
        """A damaged packet from the responder's host between PSN p's last earlier copy and f."""
        last = max([r["frame"] for r in prior if r["psn"] == p], default=None)
        src, dst, _ = key
        return last is not None and any(self.frames.get(n, {}).get("src") == dst and self.frames.get(n, {}).get("dst") == src
                                        and self.frames[n].get("damaged") for n in range(last + 1, f))

    def last_response_copy(self, key, p, f):
        """The last READ response with PSN p from the responder's host before f
        (damaged copies too, whatever their QP number says), or None."""
        src, dst, _ = key
        return next((n for n in range(f - 1, 0, -1) if self.reverse(n, src, dst, (13, 14, 15, 16))
                     and self.frames[n].get("psn") == p), None)

    def response_seen(self, key, p, prior, f):
        """A response from the responder covering PSN p, after p's last earlier
        copy and before f. Any response acknowledges every request PSN up to its
        own (IBA 9.7.5.1.1, coalesced and implicit ACKs); a PSN inside a READ's
        range (a re-issued READ) is answered only by the READ response of that PSN."""
        reads = [r for r in prior if r["opcode"] == 12 and r["dmalen"] is not None
                 and r["psn"] != p and in_range(p, r["psn"], -(-r["dmalen"] // IB_MTU))]
        copies = [r for r in prior if r["psn"] == p]
        last = max([r["frame"] for r in reads + copies], default=None)
        if last is None:
            return None
        src, dst, _ = key
        for n in range(last + 1, f):
            r = self.frames.get(n, {})
            if not self.reverse(n, src, dst, (13, 14, 15, 16, 17, 18)):
                continue
            d = psn_diff(r["psn"], p)
            if d == 0 or (not reads and 0 < d < 64):
                return n
        return None

    def spurious(self, a, subject):
        """S1: a resend called spurious ("its original was not lost at the
        capture point") that the requester needed: the original (or, for a
        re-issued READ, the READ response with that PSN) never reached the wire
        intact, or the responder NAKed at or below its PSN in the meantime."""
        key, me, prior = subject
        p, f, (src, dst, _) = me["psn"], a["frame"], key
        reads = [r for r in prior if r["opcode"] == 12 and r["dmalen"] is not None
                 and in_range(p, r["psn"], -(-r["dmalen"] // IB_MTU))]
        if reads:
            got = [n for n in range(reads[-1]["frame"] + 1, f) if self.reverse(n, src, dst, (13, 14, 15, 16))
                   and self.frames[n]["psn"] == p and not self.frames[n]["damaged"]]
            return None if got else ("S1", f"re-issued READ at PSN {p} called spurious, but no intact READ "
                                           f"response with PSN {p} reached the wire before it")
        copies = [r for r in prior if r["psn"] == p and not r["damaged"]]
        if not copies:
            return ("S1", f"resend of PSN {p} called spurious, but no intact copy of it was on the wire before")
        upto = [r for r in prior if r["frame"] <= copies[-1]["frame"]]
        start = self.current_pass(upto)[0]["frame"]
        for n in range(start, f):
            if self.reverse(n, src, dst, (17,)) and self.frames[n]["syndrome"] == NAK_SEQ \
                    and -65536 < psn_diff(self.frames[n]["psn"], p) <= 0:
                return ("S1", f"resend of PSN {p} called spurious, but the responder NAKed PSN "
                              f"{self.frames[n]['psn']} at frame {n} (go-back-N asks for it)")
        return None

    def reverse(self, n, src, dst, opcodes):
        r = self.frames.get(n, {})
        return r.get("src") == dst and r.get("dst") == src and r.get("opcode") in opcodes

    def nak(self, a, syndromes):
        r = self.frames.get(a["frame"], {})
        syn = r.get("syndrome")
        if syn is None or not syndromes(syn):
            return ("K0", f"tshark's AETH syndrome at frame {a['frame']} is {syn}, not this NAK")
        return None

    def icrc_bad(self, a):
        # (a frame whose lengths were corrupted has no ICRC we can compute: accepted)
        if self.facts.get(a["frame"], {}).get("icrc_ok") is True:
            return ("C1", f"our ICRC of frame {a['frame']} is good")
        return None

    def bad_opcode_sequence(self, a):
        key, f = self.key_of(a["frame"]), a["frame"]
        prior = self.before(key, f) if key else []
        if not prior:
            return None
        prev = prior[-1]
        if psn_diff(self.frames[f]["psn"], prev["psn"]) != 1 or prev["damaged"] or self.frames[f]["damaged"]:
            return ("B1", f"the previous packet on the flow (frame {prev['frame']}, PSN {prev['psn']}) is not PSN-1 "
                          "or is damaged: a network fault explains the break, the sender did not violate IBA 9.7.1")
        return None


def with_subject(rule, letter):
    """A rule about one packet of a flow; false (X0) when tshark sees no BTH there."""
    def check(judge, a):
        subject = judge.subject(a)
        return rule(judge, a, subject) if subject else (letter + "0", NO_BTH)
    return check


ROCE_RULES = {
    "psn_gap": Judge.gap,
    "psn_duplicate": with_subject(Judge.duplicate, "D"),
    "psn_out_of_order": with_subject(Judge.out_of_order, "O"),
    "retransmission": with_subject(Judge.retransmission, "R"),
    "icrc_bad": Judge.icrc_bad,
    "bad_opcode_sequence": Judge.bad_opcode_sequence,
    "nak_psn_seq_error": lambda j, a: j.nak(a, lambda s: s == NAK_SEQ),
    "rnr_nak": lambda j, a: j.nak(a, lambda s: 0x20 <= s < 0x40),
    "spurious_retransmission": with_subject(Judge.spurious, "S"),
}
# Per-packet verdicts (`packets[].analysis`, --packets) judged like the anomaly
# of the same meaning: every frame flagged, not only the first of an episode.
PACKET_FLAGS = (("gap", "psn_gap"), ("duplicate", "psn_duplicate"), ("out_of_order", "psn_out_of_order"),
                ("retransmission", "retransmission"), ("spurious_retransmission", "spurious_retransmission"))


def packet_verdicts(report):
    """The per-packet flags as anomaly-shaped dicts (source: packet)."""
    out = []
    for pkt in report.get("packets") or []:
        an = pkt.get("analysis") or {}
        for flag, kind in PACKET_FLAGS:
            if an.get(flag):
                v = {"kind": kind, "frame": pkt["frame"], "source": "packet"}
                if kind == "psn_gap":
                    v.update(expected_psn=an.get("expected_psn"), count=an["gap"])
                out.append(v)
    return out


# ------------------------------------------------------------------ iWARP (siw): TCP as the oracle

IWARP_PROTOCOL_KINDS = ("ddp_msn_gap", "ddp_mo_discontinuity", "mpa_bad_framing", "mpa_crc_bad",
                        "payload_length_mismatch", "rdmap_terminate")


def tcp_direction(frames, src, dst):
    """Segments with payload of one TCP direction ('ip:port' ends), capture order."""
    (sip, sport), (dip, dport) = src.rsplit(":", 1), dst.rsplit(":", 1)
    return [r for n, r in sorted(frames.items()) if r.get("tcplen") and r["src"] == sip and r["dst"] == dip
            and r["sport"] == int(sport) and r["dport"] == int(dport)]


def seq_overlap(seq, length, first, count):
    a = (seq - first) % (1 << 32)
    b = (first - seq) % (1 << 32)
    return a < count or b < length


class IwarpJudge:
    def __init__(self, frames, facts, report):
        self.frames, self.facts = frames, facts
        self.flows = (report.get("iwarp") or {}).get("flows") or []
        self.cache = {}

    def segments(self, flow):
        if flow not in self.cache:
            f = self.flows[flow] if 0 <= flow < len(self.flows) else None
            self.cache[flow] = tcp_direction(self.frames, f["src"], f["dst"]) if f else []
        return self.cache[flow]

    def damaged(self, frame):
        return self.facts.get(frame, {}).get("damaged", False)

    def hole(self, a):
        segs, f = self.segments(a["flow"]), a["frame"]
        first, count = a.get("tcp_seq", a.get("psn")), a.get("count", 0)  # the report's key is tcp_seq
        if first is None or not count:
            return None
        for r in segs:
            if r["frame"] < f and seq_overlap(r["seq"], r["tcplen"], first, count):
                return ("T1", f"TCP bytes {first}.. called lost were on the wire at frame {r['frame']}"
                              f"{' (corrupted: TCP checksum bad)' if self.damaged(r['frame']) else ''}")
        if a.get("fill") == "reordering":
            return None  # the report says reordered, which T2 would require
        if a.get("fill") == "corruption":
            # claims the bytes were captured in a damaged segment (a port bit flipped):
            # our own TCP checksum must fail on it and tshark's sequence number cover them
            copy = (a.get("related_frames") or [None])[-1]
            r = self.frames.get(copy, {})
            if not self.damaged(copy) or r.get("seq") is None or not seq_overlap(r["seq"], r["tcplen"], first, count):
                return ("T5", f"frame {copy}, called the damaged copy of TCP bytes {first}.., is not a damaged "
                              "segment carrying them")
            return None
        me = self.frames.get(f, {})
        fills = [r for r in segs if r["frame"] > f and seq_overlap(r["seq"], r["tcplen"], first, 1)]
        if fills and me.get("ipid") is not None and fills[0]["ipid"] is not None \
                and sent_before(fills[0]["ipid"], me["ipid"]):
            return ("T2", f"the bytes arrived at frame {fills[0]['frame']}, sent before frame {f} "
                          f"(IPv4 ID {fills[0]['ipid']:#06x} < {me['ipid']:#06x}): reordered, not lost")
        return None

    def protocol_error(self, a, step_ok):
        """siw checks MPA/DDP/RDMAP itself and terminates on an error: a claimed
        protocol error is false when the step's perftest succeeded, no TERMINATE
        is on the wire, and no segment of that direction was damaged in flight."""
        if a["kind"] == "rdmap_terminate":
            return None if self.frames.get(a["frame"], {}).get("terminate") else \
                ("T4", "tshark sees no RDMAP Terminate at this frame")
        segs = self.segments(a["flow"])
        if not step_ok or any(self.damaged(r["frame"]) for r in segs if r["frame"] <= a["frame"]):
            return None
        if any(r.get("terminate") for r in self.frames.values()):
            return None
        return ("T3", "siw accepted this stream (perftest exit 0, no Terminate, no damaged segment "
                      "before it): the protocol error is the analyzer's")


# ------------------------------------------------------------------ one boot

def load_boot(run_dir):
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    cells_path = os.path.join(run_dir, "cells.json")
    cells = json.load(open(cells_path)) if os.path.exists(cells_path) else {}
    return run, cells


def analyze(analyzer, pcap):
    res = subprocess.run([analyzer, "analyze", "--json", "-", "--packets", pcap], capture_output=True, text=True,
                         timeout=600)
    if res.returncode != 0:
        raise SystemExit(f"faults_check: {analyzer} analyze exit {res.returncode}: {res.stderr.strip()[:300]}")
    return json.loads(res.stdout)


def judge_anomalies(report, judge, ijudge, bounds, step_ok):
    """Every anomaly through its rule: [(step, anomaly, rule, reason)] for the false ones."""
    false, seen = [], set()
    verdicts = (report.get("anomalies") or []) + packet_verdicts(report)
    for a in sorted(verdicts, key=lambda x: (x["frame"], "source" in x)):
        step = step_of(a["frame"], bounds)
        kind = a["kind"]
        if kind in ROCE_RULES:
            bad = ROCE_RULES[kind](judge, a)
        elif kind == "tcp_hole":
            bad = ijudge.hole(a)
        elif kind in IWARP_PROTOCOL_KINDS and ijudge.flows and a.get("flow", -1) < len(ijudge.flows) \
                and judge.key_of(a["frame"]) is None:
            bad = ijudge.protocol_error(a, step_ok.get(step, False))
        else:
            bad = None
        if bad and (a["frame"], bad[0]) not in seen:
            seen.add((a["frame"], bad[0]))
            false.append((step, a, bad[0], bad[1]))
    return false


def missed_bad_icrc(report, facts, frames):
    """RoCE frames (tshark decodes a BTH) whose ICRC we find bad but the report
    does not call bad (C2). A frame corrupted so that it is no RoCE any more
    (say the bit flipped made it an IP fragment) is nobody's ICRC to check."""
    called = {a["frame"] for a in report.get("anomalies") or [] if a["kind"] == "icrc_bad"}
    return [n for n, f in sorted(facts.items())
            if f.get("icrc_ok") is False and n not in called and "psn" in frames.get(n, {})]


def side_of(ip):
    return "server" if ip == "10.77.0.1" else "client" if ip == "10.77.0.2" else None


def step_wire_counts(frames, bounds):
    """{step: {side: {...}}}: per tshark, RoCE frames sent by each side, NAKs
    (PSN sequence error), request/response PSNs seen before on their flow
    (psn_repeat: resends and copies) of which network copies (same IPv4 ID),
    TCP payload segments and those repeating a sequence number."""
    out = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    seen_tcp = defaultdict(set)
    for n, r in sorted(frames.items()):
        s, side = step_of(n, bounds), side_of(r.get("src"))
        if side is None:
            continue
        c = out[s][side]
        if "psn" in r:
            c["roce"] += 1
            c["nak_seq"] += r.get("syndrome") == NAK_SEQ
            k = (r["src"], r["dst"], r["qp"], r["psn"])
            if r["opcode"] not in (17, 18):  # ACKs repeat PSNs by design
                c["psn_repeat"] += k in seen_tcp[s]
                c["network_copy"] += (k, r["ipid"]) in seen_tcp[s]
                seen_tcp[s].update((k, (k, r["ipid"])))
        elif r.get("tcplen"):
            k = (r["src"], r["sport"], r["dst"], r["dport"], r["seq"])
            c["tcp_segments"] += 1
            c["tcp_resent"] += k in seen_tcp[s]
            seen_tcp[s].add(k)
    return out


def verdict_counts(report, frames, bounds):
    """{step: {side that sent the anomaly's frame: {kind: n, psn_missing: n}}}."""
    out = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for a in report.get("anomalies") or []:
        side = side_of(frames.get(a["frame"], {}).get("src")) or "?"
        c = out[step_of(a["frame"], bounds)][side]
        # A TCP hole the report itself calls reordered (filled by bytes sent before
        # it) claims no loss: it is not counted against netem's drops or TCP's resends.
        # Nor does one it calls captured damaged (judged by T5).
        fill = a.get("fill") if a["kind"] == "tcp_hole" else None
        c[f"tcp_hole_{fill}" if fill in ("reordering", "corruption") else a["kind"]] += 1
        if a["kind"] == "psn_gap":
            c["psn_missing"] += a.get("count", 0)
    return out


def counter(step, side, name):
    c = step.get(f"{side}_counters") or {}
    return c.get(f"hw_counters/{name}", c.get(name, 0))


def step_rules(step, wire, verdicts, netem_sides, mode):
    """The counting rules of one step: [(rule, reason)] for false verdicts, and
    notes where two oracles disagree with each other (not rdmadiag's fault)."""
    false, notes = [], []
    for side, peer in (("client", "server"), ("server", "client")):
        v, w = verdicts.get(side, {}), wire.get(side, {})
        if mode == "rxe" and step.get(f"{side}_counters") is not None:
            sent = counter(step, side, "sent_pkts")
            not_on_wire = max(0, sent - w.get("roce", 0))
            if v.get("psn_missing", 0) > not_on_wire:
                false.append(("N1", f"{v['psn_missing']} PSNs from the {side} called lost, but its rxe sent "
                                    f"{sent} packets and {w.get('roce', 0)} are on the wire: at most "
                                    f"{not_on_wire} never reached it"))
            naks_wire, oos = w.get("nak_seq", 0), counter(step, side, "out_of_seq_request")
            if v.get("nak_psn_seq_error", 0) > naks_wire:
                false.append(("K1", f"{v['nak_psn_seq_error']} NAKs from the {side} reported, tshark sees {naks_wire}"))
            if side not in netem_sides and naks_wire != oos:
                notes.append(f"{side}: tshark NAKs {naks_wire} != out_of_seq_request {oos}")
            retries = counter(step, side, "completer_retry_err") + counter(step, side, "rcvd_rnr_err")
            if v.get("retransmission", 0) > retries:
                false.append(("K2", f"{v['retransmission']} resend episodes by the {side} reported, its kernel "
                                    f"started {retries} (completer_retry_err + rcvd_rnr_err)"))
        if mode == "siw" and step.get(f"{side}_counters") is not None:
            netem = step.get(f"{side}_netem") or {}
            drops = netem.get("dropped", 0)
            if v.get("tcp_hole", 0) > drops:
                false.append(("N2", f"{v['tcp_hole']} TCP holes from the {side}, netem dropped {drops} of its packets"))
            resent = counter(step, side, "snmp/TcpRetransSegs")
            if v.get("tcp_hole", 0) > resent and side in netem_sides:
                false.append(("K3", f"{v['tcp_hole']} TCP holes from the {side}, its TCP resent {resent} segments"))
    return false, notes


def judge_boot(run_dir, analyzer):
    run, cells = load_boot(run_dir)
    pcap = os.path.join(run_dir, "wire.pcap")
    mode = "siw" if run.get("mode") == "siw" else "rxe"
    steps = run.get("steps", [])
    facts = wire_facts(pcap)
    frames = tshark_frames(pcap, [f["flipped_port"] for f in facts.values() if "flipped_port" in f])
    bounds, unmarked = step_windows(facts, len(steps))
    report = analyze(analyzer, pcap)
    judge = Judge(frames, facts, roce_flows(frames, facts), report)
    ijudge = IwarpJudge(frames, facts, report)
    step_ok = {i: s.get("server_rc") == 0 and s.get("client_rc") == 0 for i, s in enumerate(steps, 1)}
    false = [{"step": st, "frame": a["frame"], "kind": a["kind"], "rule": rule, "why": why,
              "text": a.get("text", "")} for st, a, rule, why in judge_anomalies(report, judge, ijudge, bounds, step_ok)]
    for n in missed_bad_icrc(report, facts, frames):
        false.append({"step": step_of(n, bounds), "frame": n, "kind": "icrc_ok", "rule": "C2",
                      "why": "our ICRC is bad, the report does not call it bad", "text": ""})
    wire, verdicts = step_wire_counts(frames, bounds), verdict_counts(report, frames, bounds)
    netem_sides = [r for r, v in (run.get("netem") or {}).items() if v]
    rows = []
    for i, step in enumerate(steps, 1):
        sf, notes = step_rules(step, wire.get(i, {}), verdicts.get(i, {}), netem_sides, mode)
        false += [{"step": i, "frame": None, "kind": "counts", "rule": r, "why": w, "text": ""} for r, w in sf]
        cell = (cells.get("cells") or [{}] * len(steps))[i - 1].get("cell", f"step{i}")
        rows.append(step_row(i, cell, step, wire.get(i, {}), verdicts.get(i, {}), notes, false))
    return {"run": run_dir, "mode": mode, "fault": cells.get("fault", "?"), "side": cells.get("side", "?"),
            "netem": run.get("netem"), "unmarked_steps": unmarked, "icrc": report.get("summary", {}).get("icrc"),
            "rows": rows, "false_verdicts": false}


KEY_COUNTERS = ("out_of_seq_request", "duplicate_request", "rcvd_seq_err", "completer_retry_err",
                "retry_exceeded_err", "rcvd_rnr_err", "send_rnr_err", "snmp/TcpRetransSegs")


def step_row(i, cell, step, wire, verdicts, notes, false):
    kernel = {}
    for side in ("client", "server"):
        for name in KEY_COUNTERS:
            v = counter(step, side, name)
            if v:
                kernel[f"{side[0]}.{name.split('/')[-1]}"] = v
    merged = defaultdict(int)
    for side_counts in verdicts.values():
        for k, v in side_counts.items():
            merged[k] += v
    return {"step": i, "cell": cell, "rc": [step.get("server_rc"), step.get("client_rc")],
            "frames": {s: dict(wire.get(s, {})) for s in ("client", "server")},
            "netem": {s: step.get(f"{s}_netem") for s in ("client", "server") if step.get(f"{s}_netem")},
            "kernel": kernel, "verdicts": dict(merged), "notes": notes,
            "false": [f"{f['rule']}@{f['frame']}" if f["frame"] else f["rule"] for f in false if f["step"] == i]}


# ------------------------------------------------------------------ output

def fmt_counts(d):
    return " ".join(f"{k}={v}" for k, v in sorted(d.items()) if v) or "-"


def row_cells(result, row):
    n = row["netem"]
    netem = " ".join(f"{s[0]}:{v['sent_pkts']}/{v['dropped']}" for s, v in n.items()) or "-"
    frames = "/".join(str(row["frames"][s].get("roce") or row["frames"][s].get("tcp_segments", 0))
                      for s in ("client", "server"))
    repeats = " ".join(f"{s[0]}.{k}={row['frames'][s][k]}" for s in ("client", "server")
                       for k in ("psn_repeat", "network_copy", "nak_seq", "tcp_resent") if row["frames"][s].get(k))
    frames += f" ({repeats})" if repeats else ""
    false = compact_false(row["false"])
    return [row["cell"], result["fault"], result["side"], "/".join(map(str, row["rc"])), frames, netem,
            fmt_counts(row["kernel"]), fmt_counts(row["verdicts"]), false]


def compact_false(entries, listed=6):
    """'G1@461 R5@512' as is; a long list as counts per rule with first frames."""
    if len(entries) <= listed:
        return " ".join(entries) or "none"
    by_rule = defaultdict(list)
    for e in entries:
        rule, _, frame = e.partition("@")
        by_rule[rule].append(frame)
    return " ".join(f"{r}×{len(f)}" + (f" (@{','.join(x for x in f[:2] if x)}…)" if any(f) else "")
                    for r, f in sorted(by_rule.items()))


HEADER = ["cell", "fault", "netem on", "rc s/c", "frames c→s/s→c (tshark: repeats)", "netem sent/dropped",
          "kernel counters (c./s.)", "rdmadiag verdicts", "false verdicts (rule@frame)"]


def table_markdown(results):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for res in results:
        for row in res["rows"]:
            lines.append("| " + " | ".join(c.replace("|", "/") for c in row_cells(res, row)) + " |")
    lines.append("")
    for res in results:
        for f in res["false_verdicts"]:
            lines.append(f"- `{os.path.basename(res['run'])}` step {f['step']} frame {f['frame']} "
                         f"{f['kind']} — {f['rule']}: {f['why']}" + (f" (report: \"{f['text']}\")" if f["text"] else ""))
    for res in results:
        for row in res["rows"]:
            for note in row["notes"]:
                lines.append(f"- note (oracles disagree, not a verdict): `{os.path.basename(res['run'])}` "
                             f"{row['cell']}: {note}")
    return "\n".join(lines) + "\n"


def main(argv):
    p = argparse.ArgumentParser(prog="faults_check.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--analyzer", required=True)
    p.add_argument("--json", metavar="OUT", help="write the verdict as JSON")
    p.add_argument("--quiet", action="store_true", help="only the table rows")
    a = p.parse_args(argv)
    if not os.path.exists(os.path.join(a.run_dir, "run.json")):
        print(f"faults_check: {a.run_dir} holds no run.json", file=sys.stderr)
        return 2
    res = judge_boot(a.run_dir, a.analyzer)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    for row in res["rows"]:
        print(" | ".join(row_cells(res, row)))
    if not a.quiet:
        for f in res["false_verdicts"]:
            print(f"FALSE step {f['step']} frame {f['frame']} {f['kind']} [{f['rule']}] {f['why']}")
        if res["unmarked_steps"]:
            print(f"note: no marker seen for steps {res['unmarked_steps']}: their frames count in the step before")
    return 1 if res["false_verdicts"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
