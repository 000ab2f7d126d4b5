#!/usr/bin/env python3
"""The plugin's NVMe fields (rdmadiag.nvme.*) against independent views, on
every capture with tshark's NVMe decode beside it (tests/pcaps/NAME.nvme.tsv):

- on every completion tshark's nvme-rdma decode pairs, rdmadiag.nvme.command_frame
  is tshark's nvme.cmd_pkt (or nvme.fabrics.cmd_pkt), and rdmadiag.nvme.latency
  the difference of the two frames' times as tshark shows them;
- rdmadiag.nvme.cause.events is non-zero exactly when the event list computed
  from tshark's IB fields alone (nvme_crosscheck.transport_events: a request
  PSN not the next expected, READ response PSN breaks, NAK / RNR NAK) has an
  event on the command's queue pairs inside its window, and
  rdmadiag.nvme.cause.first_frame is the first of them;
- the frames carrying the expert info rdmadiag.nvme.cause.expert are exactly
  the completions with events, and exactly those `rdmadiag nvme` attributes
  (nvme_crosscheck checks that list against the same independent events); rdmadiag.nvme.unanswered marks exactly the
  commands `rdmadiag nvme` lists as unanswered.
On NVMe over iWARP captures (NAME.iwarp_nvme.tsv beside them; tshark has no
NVMe decode there), for every command `rdmadiag nvme` completes: the plugin's
fields on its completion frame name its command frame, the latency is the two
frames' tshark times apart, rdmadiag.nvme.cause.events is non-zero exactly when
tshark's own TCP analysis flags a data segment of the command's connection
inside its window (nvme_iwarp_crosscheck.tcp_events), with the first such frame.
tshark runs with -2 (command frames learn their completion on the second pass).
Exit 77 (CTest skip) when tshark or the plugin cannot be run."""
import argparse
import csv
import glob
import io
import json
import os
import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here))
sys.path.insert(0, str(here.parent / "crosscheck"))
from tshark_plugin import tshark_or_skip  # noqa: E402
from nvme_crosscheck import read_tsv, transport_events  # noqa: E402
from nvme_iwarp_crosscheck import tcp_events  # noqa: E402

FIELDS = ["frame.number", "frame.time_relative", "ip.dst", "infiniband.bth.destqp", "rdmadiag.nvme.queue",
          "rdmadiag.nvme.cid", "rdmadiag.nvme.command_frame", "rdmadiag.nvme.response_frame", "rdmadiag.nvme.latency",
          "rdmadiag.nvme.cause.events", "rdmadiag.nvme.cause.first_frame", "rdmadiag.nvme.unanswered",
          "nvme.cmd_pkt", "nvme.fabrics.cmd_pkt", "nvme.cqe.status"]


def first(v):
    return v.split(",")[0] if v else ""


def check_capture(ts, rdmadiag, pcap, tshark_tsv, errors):
    name = os.path.basename(pcap)
    out = ts.run(["-2", "-r", pcap, "-T", "fields", "-E", "header=y", "-E", "separator=/t"] +
                 [a for f in FIELDS for a in ("-e", f)])
    rows = {int(r["frame.number"]): r for r in csv.DictReader(io.StringIO(out.stdout), delimiter="\t")}
    expert = ts.run(["-2", "-r", pcap, "-Y", "rdmadiag.nvme.cause.expert", "-T", "fields", "-e", "frame.number"])
    expert_frames = {int(l) for l in expert.stdout.split()}
    events = transport_events(read_tsv(tshark_tsv))
    report = json.loads(subprocess.run([rdmadiag, "nvme", pcap, "--json", "-"], capture_output=True, text=True).stdout)
    paired = attributed = 0
    for f, r in rows.items():
        # tshark's nvme.cmd_pkt also marks data frames: completions only (they carry a CQE status).
        tcmd = (first(r["nvme.cmd_pkt"]) or first(r["nvme.fabrics.cmd_pkt"])) if r["nvme.cqe.status"] else ""
        if not tcmd or not r["rdmadiag.nvme.command_frame"]:
            if tcmd:
                errors.append(f"{name}: frame {f}: tshark pairs it with frame {tcmd}, the plugin with none")
            continue
        c = int(tcmd)
        if int(r["rdmadiag.nvme.command_frame"]) != c:
            errors.append(f"{name}: frame {f}: command frame plugin {r['rdmadiag.nvme.command_frame']}, tshark {c}")
            continue
        paired += 1
        want_us = (float(r["frame.time_relative"]) - float(rows[c]["frame.time_relative"])) * 1e6
        if abs(float(r["rdmadiag.nvme.latency"]) - want_us) > 0.01:
            errors.append(f"{name}: frame {f}: latency plugin {r['rdmadiag.nvme.latency']}, tshark's frame times {want_us:.3f}")
        qps = {(rows[x]["ip.dst"], int(first(rows[x]["infiniband.bth.destqp"]), 16)) for x in (c, f)}
        inside = sorted(e for qp in qps for e in events.get(qp, []) if c <= e < f)
        n = int(r["rdmadiag.nvme.cause.events"] or 0)
        attributed += n > 0
        if bool(inside) != (n > 0):
            errors.append(f"{name}: frame {f}: cause events plugin {n}, independent list {inside[:5]}")
        elif inside and int(r["rdmadiag.nvme.cause.first_frame"]) != inside[0]:
            errors.append(f"{name}: frame {f}: first cause frame plugin {r['rdmadiag.nvme.cause.first_frame']}, independent {inside[0]}")
        if (n > 0) != (f in expert_frames):
            errors.append(f"{name}: frame {f}: expert info {'missing' if n else 'unexpected'}")
    # All completions with causes, tshark-decoded or not (4 KiB in-capsule writes are SEND First):
    # as `rdmadiag nvme` lists them (whose attribution nvme_crosscheck checks against the same event list).
    cmds = subprocess.run([rdmadiag, "nvme", pcap, "--commands", "-"], capture_output=True, text=True).stdout
    caused = {int(c["response_frame"]) for c in csv.DictReader(io.StringIO(cmds), delimiter="\t") if int(c["transport_events"])}
    if caused != expert_frames:
        errors.append(f"{name}: cause expert infos at {sorted(expert_frames ^ caused)[:10]}... differ from rdmadiag nvme's")
    want_unanswered = {u["command_frame"] for u in report["unanswered"]}
    got_unanswered = {f for f, r in rows.items() if r["rdmadiag.nvme.unanswered"] in ("1", "True")}
    if want_unanswered != got_unanswered:
        errors.append(f"{name}: unanswered plugin {sorted(got_unanswered)}, rdmadiag nvme {sorted(want_unanswered)}")
    print(f"plugin_nvme_crosscheck: {name}: {paired} completions paired as tshark pairs them, latency from tshark's "
          f"frame times; {attributed} with causes, as the independent event list says; "
          f"{len(expert_frames)} cause expert infos; {len(got_unanswered)} unanswered")


def check_iwarp_capture(ts, rdmadiag, pcap, errors):
    name = os.path.basename(pcap)
    fields = ["frame.number", "frame.time_relative", "rdmadiag.nvme.command_frame", "rdmadiag.nvme.latency",
              "rdmadiag.nvme.cause.events", "rdmadiag.nvme.cause.first_frame"]
    out = ts.run(["-2", "-r", pcap, "-T", "fields", "-E", "header=y", "-E", "separator=/t"] +
                 [a for f in fields for a in ("-e", f)])
    rows = {int(r["frame.number"]): r for r in csv.DictReader(io.StringIO(out.stdout), delimiter="\t")}
    oracle = tcp_events(pcap)
    if oracle is None:
        errors.append(f"{name}: tshark's TCP analysis could not be read")
        return
    conn_of, events = oracle
    cmds = subprocess.run([rdmadiag, "nvme", pcap, "--commands", "-"], capture_output=True, text=True).stdout
    checked = attributed = 0
    for c in csv.DictReader(io.StringIO(cmds), delimiter="\t"):
        lo, hi = int(c["command_frame"]), int(c["response_frame"])
        r = rows.get(hi, {})
        # A segment may end several capsules: the plugin lists each (comma separated).
        listed = (r.get("rdmadiag.nvme.command_frame") or "").split(",")
        if str(lo) not in listed:
            errors.append(f"{name}: frame {hi}: plugin's command frames {listed}, rdmadiag nvme's {lo}")
            continue
        i = listed.index(str(lo))
        pick = lambda f: (r.get(f) or "").split(",")[i] if len((r.get(f) or "").split(",")) > i else ""
        want_us = (float(r["frame.time_relative"]) - float(rows[lo]["frame.time_relative"])) * 1e6
        if abs(float(pick("rdmadiag.nvme.latency")) - want_us) > 0.01:
            errors.append(f"{name}: frame {hi}: latency plugin {pick('rdmadiag.nvme.latency')}, tshark's frame times {want_us:.3f}")
        inside = [f for f in events.get(conn_of.get(lo), []) if lo <= f < hi]
        n = int(pick("rdmadiag.nvme.cause.events") or 0)
        attributed += n > 0
        if bool(inside) != (n > 0):
            errors.append(f"{name}: frame {hi}: cause events plugin {n}, tshark's TCP analysis {inside[:5]}")
        elif inside and int(pick("rdmadiag.nvme.cause.first_frame")) != inside[0]:
            errors.append(f"{name}: frame {hi}: first cause frame plugin {pick('rdmadiag.nvme.cause.first_frame')}, "
                          f"tshark {inside[0]}")
        checked += 1
    print(f"plugin_nvme_crosscheck: {name} (iWARP): {checked} completions name their command and latency as "
          f"rdmadiag nvme and tshark's frame times do; {attributed} with causes, as tshark's TCP analysis says")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("--plugin-root", required=True)
    ap.add_argument("pcap_dir")
    a = ap.parse_args()
    ts = tshark_or_skip(a.plugin_root)
    if ts is None:
        return 77
    errors = []
    decodes = sorted(glob.glob(os.path.join(a.pcap_dir, "*.nvme.tsv")))
    if not decodes:
        print("plugin_nvme_crosscheck: no NAME.nvme.tsv")
        return 77
    for tsv in decodes:
        stem = tsv[: -len(".nvme.tsv")]
        check_capture(ts, a.rdmadiag, stem + ".pcap", stem + ".tshark.tsv", errors)
    for tsv in sorted(glob.glob(os.path.join(a.pcap_dir, "*.iwarp_nvme.tsv"))):
        check_iwarp_capture(ts, a.rdmadiag, tsv[: -len(".iwarp_nvme.tsv")] + ".pcap", errors)
    for e in errors[:50]:
        print("plugin_nvme_crosscheck: MISMATCH", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
