#!/usr/bin/env python3
"""Cross-check rdmadiag's congestion analysis (decode/congestion_analysis.h) against tshark
and the generator's ground truth.

Usage: cc_crosscheck.py --rdmadiag PATH [--tshark tshark] DIR

For every capture NAME.pcap in DIR with a NAME.truth.json (tests/pcaps/cc, made by
make_cc_pcaps.py with scapy's RoCE layers):

  1. From tshark's decode only (ip.src, ip.dst, ip.dsfield.ecn, infiniband.bth.opcode,
     infiniband.bth.destqp, frame.time_epoch) and the truth's map of each data flow to the
     sender QP its CNPs name: per flow the CE-marked packets (ECN 3, RFC 3168), the CNPs
     (opcode 0x81 from the flow's destination to its source naming its sender QP), and each
     CNP's response time (from the first CE mark after the previous CNP to the CNP; none when
     no mark waited), recomputed here in exact nanoseconds. They must equal the `congestion`
     section of `rdmadiag analyze --json` (count, min, mean, max), and so must the totals
     (ECN-capable packets, CE marks, CNPs).
  2. The rate reaction: the generator made some senders slow down after a CNP and one keep
     its rate (truth). The time from the first CNP to the first gap at least 1.25 times the median
     before it must equal the report's reaction time. Here the median inter-packet gap of the 16 packets after each flow's
     first CNP over the median of the 16 before it is recomputed from tshark's times; it must
     say the same as the truth (>= 1.5 slowed, <= 1.1 kept), and rdmadiag must report a slowed
     episode for each slowed sender, a kept-rate episode and one cc_no_reaction anomaly for
     each sender that kept its rate, and none for the others.
  3. scapy computed the ICRCs: rdmadiag must find none bad.
  4. `analyze -j 2` gives the same JSON.

Exit status 0 pass, 1 mismatch, 77 tshark missing (CTest: skipped).
"""
import argparse
from decimal import Decimal
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys

FIELDS = ["frame.number", "frame.time_epoch", "ip.src", "ip.dst", "ip.dsfield.ecn", "infiniband.bth.opcode",
          "infiniband.bth.destqp"]
CNP = 0x81
WINDOW = 16
RATE_CUT = 1.25  # rdmadiag's default (docs/congestion.md)


def tshark_rows(tshark, path):
    cmd = [tshark, "-r", path, "-T", "fields", "-E", "separator=\t"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        r = dict(zip(FIELDS, line.split("\t")))
        if not r.get("infiniband.bth.opcode"):
            continue
        rows.append({"frame": int(r["frame.number"]), "ns": int(Decimal(r["frame.time_epoch"]) * 10**9),
                     "src": r["ip.src"], "dst": r["ip.dst"], "ecn": int(r["ip.dsfield.ecn"] or 0),
                     "opcode": int(r["infiniband.bth.opcode"], 0), "qp": int(r["infiniband.bth.destqp"], 0)})
    return rows


def expected_flow(rows, t):
    """Counts and CNP response times of one truth flow, from tshark's fields."""
    data = [r for r in rows if r["opcode"] != CNP and (r["src"], r["dst"], r["qp"]) == (t["src"], t["dst"], t["dest_qp"])]
    cnps = [r for r in rows if r["opcode"] == CNP and (r["src"], r["dst"], r["qp"]) == (t["dst"], t["src"], t["sender_qp"])]
    events = sorted([(r["frame"], "d", r) for r in data] + [(r["frame"], "c", r) for r in cnps])
    responses, mark = [], None
    for _, kind, r in events:
        if kind == "d" and r["ecn"] == 3 and mark is None:
            mark = r["ns"]
        elif kind == "c":
            if mark is not None:
                responses.append(r["ns"] - mark)
            mark = None
    return data, cnps, responses


def gap_ratio(data, cnps):
    """Median gap of the WINDOW packets after the first CNP over the median of the WINDOW before it."""
    first = cnps[0]["frame"]
    before = [b["ns"] - a["ns"] for a, b in zip(data, data[1:]) if b["frame"] < first][-WINDOW:]
    after = [b["ns"] - a["ns"] for a, b in zip(data, data[1:]) if a["frame"] > first or b["frame"] > first][:WINDOW]
    return statistics.median(after) / statistics.median(before)


def reaction_ns(data, cnps):
    """From the first CNP to the first packet after it whose gap is at least RATE_CUT times the median before."""
    first = cnps[0]
    gaps = [(b, b["ns"] - a["ns"]) for a, b in zip(data, data[1:])]
    baseline = statistics.median([g for b, g in gaps if b["frame"] < first["frame"]][-WINDOW:])
    return next(b["ns"] - first["ns"] for b, g in gaps if b["frame"] > first["frame"] and g >= RATE_CUT * baseline)


def near(a, b):
    return a is not None and abs(a - b) < 1e-6


def check_flow(name, t, got, rows, errors):
    data, cnps, responses = expected_flow(rows, t)
    tag = f"{name} {t['src']}->{t['dst']} QP {t['dest_qp']:#x}"
    ce = sum(1 for r in data if r["ecn"] == 3)
    if ce != t["ce_marked"] or len(cnps) != t["cnps"]:
        errors.append(f"{tag}: tshark sees {ce} CE / {len(cnps)} CNPs, the generator made {t['ce_marked']} / {t['cnps']}")
    if not got:
        if ce or cnps:
            errors.append(f"{tag}: not in rdmadiag's congestion flows")
        return
    for key, want in (("packets", len(data)), ("ce_marked", ce), ("cnps", len(cnps)),
                      ("cnps_without_mark", len(cnps) - len(responses))):
        if got[key] != want:
            errors.append(f"{tag}: {key} {got[key]} != {want} (tshark)")
    resp = got["cnp_response_us"]
    if resp["count"] != len(responses):
        errors.append(f"{tag}: {resp['count']} response times != {len(responses)} (tshark)")
    elif responses:
        for key, want in (("min", min(responses)), ("mean", sum(responses) / len(responses)), ("max", max(responses))):
            if not near(resp[key], want / 1000):
                errors.append(f"{tag}: CNP response {key} {resp[key]} us != {want / 1000} us (tshark)")
    if cnps:
        ratio = gap_ratio(data, cnps)
        if (t["slowed"] and ratio < 1.5) or (t["kept_rate"] and ratio > 1.1):
            errors.append(f"{tag}: tshark's gaps after/before the first CNP {ratio:.3f} disagree with the truth")
        print(f"{tag}: CE {ce}, CNPs {len(cnps)}, responses {[r / 1000 for r in responses]} us, gap ratio {ratio:.3f}")
    if t["slowed"] and cnps:
        want = reaction_ns(data, cnps) / 1000
        if not near(got["reaction_us"]["max"], want):
            errors.append(f"{tag}: reaction {got['reaction_us']['max']} us != {want} us (tshark)")
    if bool(got["slowed"]) != t["slowed"] or bool(got["kept_rate"]) != t["kept_rate"]:
        errors.append(f"{tag}: slowed {got['slowed']} kept_rate {got['kept_rate']}, truth slowed {t['slowed']} "
                      f"kept_rate {t['kept_rate']}")
    want_frame = cnps[0]["frame"] if t["kept_rate"] else None
    if got.get("first_kept_rate_cnp_frame") != want_frame:
        errors.append(f"{tag}: first kept-rate CNP frame {got.get('first_kept_rate_cnp_frame')} != {want_frame}")
    if got["sender_qp"] != (t["sender_qp"] if cnps else None):
        errors.append(f"{tag}: sender_qp {got['sender_qp']} != {t['sender_qp']}")


def run_json(rdmadiag, path, jobs):
    out = subprocess.run([rdmadiag, "analyze", "-j", str(jobs), "--json", "-", path], check=True, capture_output=True,
                         text=True).stdout
    return out


def check(rdmadiag, tshark, path, truth_path, errors):
    name = os.path.basename(path)
    truth = json.load(open(truth_path))
    rows = tshark_rows(tshark, path)
    text = run_json(rdmadiag, path, 1)
    if run_json(rdmadiag, path, 2) != text:
        errors.append(f"{name}: analyze -j 2 JSON differs from -j 1")
    report = json.loads(text)
    cc = report.get("congestion")
    if cc is None:
        errors.append(f"{name}: no congestion section")
        return
    for t in truth["flows"]:
        got = next((f for f in cc["flows"] if (f["src"], f["dst"], f["dest_qp"]) == (t["src"], t["dst"], t["dest_qp"])),
                   None)
        check_flow(name, t, got, rows, errors)
    totals = {"ect_packets": sum(1 for r in rows if r["ecn"] and r["opcode"] != CNP),
              "ce_marked": sum(1 for r in rows if r["ecn"] == 3 and r["opcode"] != CNP),
              "cnps": sum(1 for r in rows if r["opcode"] == CNP), "cnps_unmatched": truth["cnps_unmatched"],
              "kept_rate_flows": sum(1 for t in truth["flows"] if t["kept_rate"])}
    for key, want in totals.items():
        if cc[key] != want:
            errors.append(f"{name}: {key} {cc[key]} != {want}")
    no_reaction = sum(1 for a in report["anomalies"] if a["kind"] == "cc_no_reaction")
    if no_reaction != totals["kept_rate_flows"]:
        errors.append(f"{name}: {no_reaction} cc_no_reaction anomalies, truth {totals['kept_rate_flows']}")
    bad = sum(1 for a in report["anomalies"] if a["kind"] == "icrc_bad")
    if bad:
        errors.append(f"{name}: {bad} bad ICRCs in scapy's frames")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("dir")
    a = ap.parse_args()
    if not shutil.which(a.tshark):
        print("tshark not found: skipped")
        return 77
    errors = []
    n = 0
    for truth in sorted(glob.glob(os.path.join(a.dir, "*.truth.json"))):
        check(a.rdmadiag, a.tshark, truth[: -len(".truth.json")] + ".pcap", truth, errors)
        n += 1
    if n == 0:
        errors.append(f"no *.truth.json in {a.dir}")
    for e in errors:
        print("MISMATCH:", e)
    print(f"{n} capture(s), {len(errors)} mismatches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
