#!/usr/bin/env python3
"""Cross-check rdmadiag's MAC Control decode and pause analysis against tshark.

Usage: pfc_crosscheck.py --rdmadiag PATH [--tshark tshark] DIR

For every capture in DIR (tests/pcaps/pfc, made by make_pfc_pcaps.py with
scapy), and for two link speeds plus none:

  1. Decode, frame by frame, against tshark's `macc.*` fields: a frame tshark
     decodes completely as PAUSE (macc.pause_time) or PFC (macc.cbfc.enbv and
     macc.cbfc.pause_time.c0..c7) must be decoded by rdmadiag with equal fields
     (`mac_control` in `analyze --packets --json`); a frame tshark marks short
     or malformed must have no `mac_control` but a `truncated` or
     `bad_mac_control` diagnostic; tshark's "8 MSbs of ENBV must be 0" expert
     info must match our `pfc_reserved_bits`.
  2. The pause analysis, recomputed here from tshark's fields only and the
     arithmetic of IEEE 802.3 Annex 31B/31D (a quantum is 512 bit times; a new
     frame restarts the timer, 0 resumes; PAUSE speaks for all 8 priorities;
     PFC for the priorities whose enable bit is set), must equal the `pfc`
     section of rdmadiag's JSON report: per sender and priority the frames, XON
     frames, quanta total and maximum, continuous pauses, paused time, longest
     pause and storms; per priority the RoCE packets (priority: outer VLAN PCP,
     else DSCP / 8) and those sent while another sender had that priority
     paused, and the distinct (destination address, QP) of those. Without a
     link speed, every time must be null.

Exit status 0 pass, 1 mismatch, 77 tshark missing (CTest: skipped).
"""
import argparse
from fractions import Fraction
import glob
import json
import os
import shutil
import subprocess
import sys

FIELDS = ["frame.number", "frame.time_epoch", "eth.src", "macc.opcode", "macc.pause_time", "macc.cbfc.enbv"] + \
    [f"macc.cbfc.pause_time.c{n}" for n in range(8)] + \
    ["vlan.priority", "ip.dsfield.dscp", "ip.dst", "infiniband.bth.destqp", "udp.dstport", "_ws.malformed", "_ws.short",
     "_ws.expert.message"]
STORM_S = 0.1  # rdmadiag's default --pause-storm-ms 100


def tshark_rows(tshark, path):
    cmd = [tshark, "-r", path, "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split("\t")
        rows.append(dict(zip(FIELDS, cols)))
    return rows


def num(s):
    return int(s, 0) if s else None


def decoded_by_tshark(r):
    """(opcode, pause_quanta, enable_vector, [quanta]) when tshark decoded every field, else None."""
    op = num(r["macc.opcode"])
    if op is None or r["_ws.malformed"] or r["_ws.short"]:
        return None
    if op == 1:
        q = num(r["macc.pause_time"])
        return None if q is None else (op, q, None, None)
    if op == 0x101:
        quanta = [num(r[f"macc.cbfc.pause_time.c{n}"]) for n in range(8)]
        enbv = num(r["macc.cbfc.enbv"])
        return None if enbv is None or None in quanta else (op, None, enbv, quanta)
    return (op, None, None, None)


def check_decode(rows, packets, name, errors):
    ours = {p["frame"]: p for p in packets}
    checked = 0
    for r in rows:
        f = int(r["frame.number"])
        p = ours[f]
        mc = p.get("mac_control")
        codes = {d["code"] for d in p.get("diagnostics", [])}
        if not r["macc.opcode"] and not (r["_ws.malformed"] or r["_ws.short"]):
            if mc:
                errors.append(f"{name} frame {f}: mac_control decoded, tshark saw no MAC Control")
            continue
        t = decoded_by_tshark(r)
        if t is None:
            if mc or not codes & {"truncated", "bad_mac_control", "frame_too_short"}:
                errors.append(f"{name} frame {f}: tshark: short/malformed; ours: {mc} {codes}")
            checked += 1
            continue
        if not mc:
            errors.append(f"{name} frame {f}: tshark decoded {t}, we did not")
            continue
        got = (mc["opcode"], mc.get("pause_quanta"), mc.get("enable_vector"), mc.get("quanta"))
        if got != t:
            errors.append(f"{name} frame {f}: ours {got} != tshark {t}")
        if r["eth.src"] != mc.get("sender"):
            errors.append(f"{name} frame {f}: sender {mc.get('sender')} != tshark {r['eth.src']}")
        reserved_t = "8 MSbs of ENBV must be 0" in r["_ws.expert.message"]
        if reserved_t != ("pfc_reserved_bits" in codes):
            errors.append(f"{name} frame {f}: reserved-bits expert: tshark {reserved_t}, ours {codes}")
        checked += 1
    return checked


# ---- the pause analysis, recomputed from tshark's fields

def epoch_ns(s):
    """tshark's frame.time_epoch ("1700000000.002005000") as exact integer nanoseconds."""
    sec, _, frac = s.partition(".")
    return int(sec) * 10**9 + int((frac + "000000000")[:9])


class Prio:
    """One sender's priority; times are exact Fractions of nanoseconds."""

    def __init__(self):
        self.frames = self.xon = self.quanta_total = self.quanta_max = 0
        self.pauses = self.storms = 0
        self.paused = self.longest = Fraction(0)
        self.open = None  # [start, until]

    def close(self, end):
        length = end - self.open[0]
        self.pauses += 1
        self.paused += length
        self.longest = max(self.longest, length)
        self.storms += length > STORM_S * 10**9
        self.open = None


def expected_analysis(rows, bps):
    senders, order = {}, []
    roce = {}
    intervals = []  # (sender, priority, start, until) of every pause, for the RoCE check
    for r in rows:
        t = decoded_by_tshark(r)
        ts = epoch_ns(r["frame.time_epoch"])
        if t is not None and t[0] in (1, 0x101):
            src = r["eth.src"]
            if src not in senders:
                senders[src] = [Prio() for _ in range(8)]
                order.append(src)
            for n in range(8):
                if t[0] == 0x101 and not t[2] >> n & 1:
                    continue
                q = t[1] if t[0] == 1 else t[3][n]
                p = senders[src][n]
                p.frames += 1
                p.xon += q == 0
                p.quanta_total += q
                p.quanta_max = max(p.quanta_max, q)
                if not bps:
                    continue
                if p.open and p.open[1] < ts:
                    intervals.append((src, n, *p.open))
                    p.close(p.open[1])
                if q:  # a new time replaces what is left of the old one
                    until = ts + Fraction(q * 512 * 10**9, bps)
                    if p.open:
                        p.open[1] = until
                    else:
                        p.open = [ts, until]
                elif p.open:
                    intervals.append((src, n, p.open[0], ts))
                    p.close(ts)
        elif r["udp.dstport"] == "4791":
            pcp = r["vlan.priority"].split(",")[0]
            prio = int(pcp) if pcp else int(r["ip.dsfield.dscp"]) // 8
            qp = (r["ip.dst"], int(r["infiniband.bth.destqp"], 0))
            roce.setdefault(prio, []).append((ts, r["eth.src"], qp))
    for src in order:
        for n, p in enumerate(senders[src]):
            if p.open:
                intervals.append((src, n, *p.open))
                p.close(p.open[1])
    roce_counts = {}
    stalls = {prio: stalls_in_pauses(pkts, [(s, a, b) for s, n, a, b in intervals if n == prio]) if bps else None
              for prio, pkts in roce.items()}
    for prio, pkts in roce.items():
        paused = [qp for ts, src, qp in pkts if any(n == prio and s != src and a <= ts <= b for s, n, a, b in intervals)]
        roce_counts[prio] = (len(pkts), len(paused) if bps else None, len(set(paused)) if bps else None)
    return senders, order, roce_counts, stalls


STALL_MIN_NS = 10_000  # rdmadiag's PauseStalls::kMinStallNs


def covered(spans, t0, t1):
    """The part of [t0, t1] the (start, end) spans cover, overlaps once."""
    total, reach = 0, t0
    for a, b in sorted((max(a, t0), min(b, t1)) for a, b in spans):
        if b > reach and a < t1:
            total += b - max(a, reach)
            reach = b
    return total


def stalls_in_pauses(pkts, spans):
    """(count, longest ns) of the gaps >= 10 us between packets of one queue pair that pauses by
    other senders cover at least half of (docs/pfc.md)."""
    last, count, longest = {}, 0, 0
    for ts, src, qp in pkts:
        t0 = last.get(qp)
        last[qp] = ts
        if t0 is None or ts - t0 < STALL_MIN_NS:
            continue
        if 2 * covered([(a, b) for s, a, b in spans if s != src], t0, ts) >= ts - t0:
            count += 1
            longest = max(longest, ts - t0)
    return count, longest


def close_enough(a, b):
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


stall_counts = []  # per priority and run: the stalls recomputed here (the summary line shows they are not all 0)


def check_analysis(rows, report, bps, name, errors):
    senders, order, roce, stalls = expected_analysis(rows, bps)
    pfc = report.get("pfc")
    if not order:
        return
    if pfc is None:
        errors.append(f"{name}: no pfc section")
        return
    got_senders = [s["mac"] for s in pfc["senders"]]
    if got_senders != order:
        errors.append(f"{name}: senders {got_senders} != {order}")
        return
    for s in pfc["senders"]:
        ours = {p["priority"]: p for p in s["priorities"]}
        for n, e in enumerate(senders[s["mac"]]):
            if not e.frames:
                if n in ours:
                    errors.append(f"{name} {s['mac']} p{n}: reported without frames")
                continue
            o = ours.get(n)
            if o is None:
                errors.append(f"{name} {s['mac']} p{n}: missing")
                continue
            want = {"frames": e.frames, "xon": e.xon, "quanta_total": e.quanta_total, "quanta_max": e.quanta_max,
                    "pauses": e.pauses if bps else None, "storms": e.storms if bps else None}
            for k, v in want.items():
                if o[k] != v:
                    errors.append(f"{name} {s['mac']} p{n} {k}: ours {o[k]} != {v}")
            for k, v in (("paused_us", float(e.paused) / 1e3), ("longest_pause_us", float(e.longest) / 1e3)):
                if not close_enough(o[k], v if bps else None):
                    errors.append(f"{name} {s['mac']} p{n} {k}: ours {o[k]} != {v if bps else None}")
    got_roce = {r["priority"]: (r["packets"], r["sent_while_paused"], r["qps_while_paused"])
                for r in pfc["roce"]["by_priority"]}
    if got_roce != roce:
        errors.append(f"{name}: RoCE by priority ours {got_roce} != {roce}")
    for r in pfc["roce"]["by_priority"]:
        want, got = stalls[r["priority"]], r["stalls_in_pauses"]
        if want is None or got is None:
            if (want is None) != (got is None):
                errors.append(f"{name} p{r['priority']}: stalls ours {got} != {want}")
            continue
        if got["count"] != want[0] or not close_enough(got["longest_us"], want[1] / 1e3):
            errors.append(f"{name} p{r['priority']}: stalls ours {got['count']}, longest {got['longest_us']} us "
                          f"!= {want[0]}, {want[1] / 1e3} us")
        stall_counts.append(want[0])
    storms = sum(p.storms for s in order for p in senders[s])
    got_storms = sum(1 for a in report["anomalies"] if a["kind"] == "pause_storm")
    if got_storms != storms:
        errors.append(f"{name}: pause_storm anomalies {got_storms} != {storms}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("dir")
    a = ap.parse_args()
    if not shutil.which(a.tshark):
        print("tshark not found")
        return 77
    files = sorted(glob.glob(os.path.join(a.dir, "*.pcap")))
    if len(files) < 3:
        print(f"FAIL: only {len(files)} captures in {a.dir}")
        return 1
    errors, frames, runs = [], 0, 0
    for path in files:
        name = os.path.basename(path)
        rows = tshark_rows(a.tshark, path)
        for gbps in (None, 10, 100):
            cmd = [a.rdmadiag, "analyze", "-q", "--packets", "--json", "-", path]
            if gbps:
                cmd += ["--link-speed", str(gbps)]
            report = json.loads(subprocess.run(cmd, capture_output=True, text=True).stdout)
            label = f"{name} ({gbps or 'no'} Gb/s)"
            frames += check_decode(rows, report["packets"], label, errors)
            check_analysis(rows, report, gbps * 10**9 if gbps else 0, label, errors)
            runs += 1
    for e in errors[:50]:
        print("MISMATCH", e)
    print(f"{runs} runs over {len(files)} captures, {frames} MAC Control frame decodes compared, "
          f"{sum(stall_counts)} QP stalls in pauses compared, {len(errors)} mismatches")
    if not sum(stall_counts):
        errors.append("no QP stall in pauses in any capture: the stall check compared nothing")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
