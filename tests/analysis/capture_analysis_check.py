#!/usr/bin/env python3
"""Transport analysis on the real captures in tests/pcaps/ (acceptance of the
sequence analysis):

- a capture made with no netem impairment (its X.run.json says so) must give
  zero anomalies: no false positives;
- a capture made with netem loss must have every NAK (PSN sequence error)
  linked to the gap it answers (unless, by tshark's decode, its PSN is older
  than the first request captured on that flow: no gap could show it), every gap followed by the retransmission that
  fills it, and no more PSNs missing than netem says it dropped;
- a capture made with reordering/duplication must end with every gap filled;
- where netem dropped (and reordered) nothing, no PSN is called lost; where it duplicated
  nothing, nothing is called a network duplicate.

The expected outcome comes from how each capture was made (netem settings and
drop counters recorded by the lab in X.run.json), not from rdmadiag.
Usage: capture_analysis_check.py --rdmadiag BIN DIR
"""
import argparse
import json
import os
import re
import subprocess
import sys


def netem_of(run):
    n = run.get("netem") or {}
    text = " ".join(v for v in n.values() if v) if isinstance(n, dict) else str(n)
    for k in ("loss_client", "loss_server"):
        if str(run.get(k, "0")) not in ("0", "", "None") and "loss" not in text:
            text += " loss %s%%" % run[k]
    return text


def netem_drops(run):
    total = 0
    found = False
    for side in (run.get("netem_stats") or {}).values():
        m = re.search(r"qdisc netem .*?dropped (\d+)", side or "", re.S)
        if m:
            total += int(m.group(1))
            found = True
    return total if found else None


def first_request_psns(tsv_path):
    """From tshark's decode (X.tshark.tsv): (IPv4 source, dest QP) -> (first frame, first request PSN)."""
    first = {}
    if not os.path.exists(tsv_path):
        return first
    with open(tsv_path) as f:
        cols = f.readline().rstrip("\n").split("\t")
        at = {c: i for i, c in enumerate(cols)}
        if "infiniband.bth.opcode" not in at:
            return first  # not an IB/RoCE decode
        for line in f:
            c = line.rstrip("\n").split("\t")
            op, psn = c[at["infiniband.bth.opcode"]], c[at["infiniband.bth.psn"]]
            if not op or not psn or int(op) in (13, 14, 15, 16, 17, 18):
                continue
            # The reference columns hold IPv4 addresses only: an IPv6 flow is keyed by its QP.
            key = (c[at["ip.src"]], int(c[at["infiniband.bth.destqp"]], 16))
            first.setdefault(key, (int(c[at["frame.number"]]), int(psn)))
    return first


def before_capture(first, nak, flows):
    """A NAK for a PSN older than the first request tshark saw on the reverse flow: lost before any gap could show."""
    f = flows.get(nak.get("flow"))
    if not f or f.get("peer_flow") is None:
        return False
    peer = flows.get(f["peer_flow"])
    start = (first.get((peer["src"], peer["dest_qp"])) or first.get(("", peer["dest_qp"]))) if peer else None
    return start is not None and 0 < (start[1] - nak["psn"]) % (1 << 24) < (1 << 23)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("--derived", help="directory of captures derived from loss-free real ones (no run.json)")
    ap.add_argument("dir")
    args = ap.parse_args()
    passed = failed = 0
    paths = [os.path.join(args.dir, n) for n in sorted(os.listdir(args.dir))]
    if args.derived:
        paths += [os.path.join(args.derived, n) for n in sorted(os.listdir(args.derived))]
    for path in paths:
        name = os.path.relpath(path, args.dir)
        if not name.endswith(".pcap"):
            continue
        run_path = path[:-5] + ".run.json"
        if args.derived and path.startswith(args.derived):
            run = {}  # re-encapsulated prefixes of loss-free runs: loss-free themselves
        elif not os.path.exists(run_path):
            print("skip %s: no run.json saying how it was made" % name)
            continue
        else:
            run = json.load(open(run_path))
        netem = netem_of(run)
        res = subprocess.run([args.rdmadiag, "analyze", "--json", "-", path], capture_output=True, text=True)
        problems = []
        if res.returncode != 0:
            problems.append("exit status %d: %s" % (res.returncode, res.stderr.strip()))
            report = {"anomalies": [], "flows": []}
        else:
            report = json.loads(res.stdout)
        anomalies = report.get("anomalies", [])
        kinds = {}
        for a in anomalies:
            kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
        rdma_flows = [f for f in report.get("flows", []) if f.get("transport") != "iwarp"]
        missing = sum(f["psn"]["missing"] for f in rdma_flows)
        if not netem.strip():
            if anomalies:
                problems.append("loss-free capture with %d anomalies: %s; first: %s"
                                % (len(anomalies), kinds, anomalies[0].get("text", anomalies[0])))
            verdict = "loss-free: 0 anomalies"
        else:
            first = first_request_psns(path[:-5] + ".tshark.tsv")
            flows = {f["flow"]: f for f in rdma_flows}
            for a in anomalies:
                if a["kind"] == "nak_psn_seq_error" and not a["related_frames"] and "loss" in netem and \
                        not before_capture(first, a, flows):
                    problems.append("NAK at frame %d not linked to a gap" % a["frame"])
                if a["kind"] == "psn_gap" and not a["related_frames"]:
                    problems.append("gap at frame %d (PSN %d, %d missing) never filled"
                                    % (a["frame"], a["expected_psn"], a["count"]))
            drops = netem_drops(run)
            if "loss" in netem and drops is not None and missing > drops:
                problems.append("%d PSNs missing but netem dropped only %d packets" % (missing, drops))
            if "loss" not in netem and drops:
                problems.append("netem dropped %d packets in a capture without loss" % drops)
            if drops == 0 and missing and "reorder" not in netem:
                problems.append("%d PSNs called lost, but netem dropped nothing" % missing)
            if "duplicate" not in netem and kinds.get("psn_duplicate"):
                problems.append("%d network duplicates, but netem duplicated nothing" % kinds["psn_duplicate"])
            verdict = "netem '%s': %s, %d PSNs missing, netem dropped %s" % (netem.strip(), kinds, missing, drops)
        if problems:
            failed += 1
            print("FAIL %s (%s)" % (name, verdict))
            for p in problems[:10]:
                print("    " + p)
        else:
            passed += 1
            print("ok   %s (%s)" % (name, verdict))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
