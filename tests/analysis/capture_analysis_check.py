#!/usr/bin/env python3
"""Transport analysis on the real captures in tests/pcaps/ (acceptance of the
sequence analysis):

- a capture made with no netem impairment (its X.run.json says so) must give
  zero anomalies: no false positives;
- a capture made with netem loss must have every NAK (PSN sequence error)
  linked to the gap it answers, every gap followed by the retransmission that
  fills it, and no more PSNs missing than netem says it dropped;
- a capture made with reordering/duplication must end with every gap filled.

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
            for a in anomalies:
                if a["kind"] == "nak_psn_seq_error" and not a["related_frames"] and "loss" in netem:
                    problems.append("NAK at frame %d not linked to a gap" % a["frame"])
                if a["kind"] == "psn_gap" and not a["related_frames"]:
                    problems.append("gap at frame %d (PSN %d, %d missing) never filled"
                                    % (a["frame"], a["expected_psn"], a["count"]))
            drops = netem_drops(run)
            if "loss" in netem and drops is not None and missing > drops:
                problems.append("%d PSNs missing but netem dropped only %d packets" % (missing, drops))
            if "loss" not in netem and drops:
                problems.append("netem dropped %d packets in a capture without loss" % drops)
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
