#!/usr/bin/env python3
"""The Wireshark plugin shows what `rdmadiag analyze` concludes, frame by frame.

For every capture under the given folders (recursively): the per-frame fields
tshark -2 shows through the plugin (ICRC/VCRC/MPA CRC status, PSN flags,
expected PSN, request/response/NAK links, latency) must equal
`rdmadiag analyze --packets --json -` on the same file, and the tags the plugin
puts in the Info column ([ICRC bad], [PSN gap: N missing], ...) must be those
verdicts; the frames `tshark -Y 'rdmadiag.psn.gap'` lists must be the psn_gap
anomalies, and the same for bad ICRCs and `rdmadiag.latency > 0.0001`; with
`tshark -2`, every anomaly analyze lists (any kind, IB/RoCE or iWARP) must be an
expert info of its kind (`rdmadiag.anomaly.<kind>`; checksums: the checksum
item's) on the frame it names, and no other may be shown; and every response
link must point at a response that answers that request or a later one.
Independent of both: the ICRC the plugin reads must be the one tshark's own
InfiniBand dissector shows (`infiniband.invariant.crc`, the same bytes read
big-endian), and in the regression capture made by make_corrupt_pcap.py exactly
the frame whose bit was flipped has a bad ICRC.
Link-type-247 captures are skipped (tshark 4.0 cannot open them).
Exit 77 (CTest skip) when tshark or the plugin cannot be run."""
import argparse
import collections
import json
import pathlib
import re
import struct
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tshark_plugin import tshark_or_skip  # noqa: E402

STATUS = {"0": "bad", "1": "ok", "2": "unverifiable", "Bad": "bad", "Good": "ok", "Unverifiable": "unverifiable"}
MPA_STATUS = dict(STATUS, **{"3": "not_negotiated", "Not present": "not_negotiated"})
FIELDS = ["frame.number", "rdmadiag.icrc.status", "rdmadiag.vcrc.status", "rdmadiag.mpa_crc.status",
          "rdmadiag.psn.gap", "rdmadiag.psn.duplicate", "rdmadiag.psn.out_of_order", "rdmadiag.retransmission",
          "rdmadiag.retransmission.spurious", "rdmadiag.psn.expected", "rdmadiag.request_frame", "rdmadiag.response_frame",
          "rdmadiag.nak.gap_frame", "rdmadiag.latency", "rdmadiag.icrc", "infiniband.invariant.crc",
          "rdmadiag.cc.cnp_response", "rdmadiag.cc.mark_frame", "rdmadiag.cc.verdict", "rdmadiag.cc.cnp_frame",
          "_ws.col.Info"]
CORRUPT = {"rxe_write_bw_loss_corrupt_icrc.pcap": [105]}  # from make_corrupt_pcap.py


def linktype(path):
    head = path.read_bytes()[:24]
    if len(head) < 24:
        return None
    magic = struct.unpack("<I", head[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        return struct.unpack("<I", head[20:24])[0]
    if magic in (0xD4C3B2A1, 0x4D3CB2A1):
        return struct.unpack(">I", head[20:24])[0]
    return None  # pcapng: tshark reads it


def expected_frames(rdmadiag, path):
    out = subprocess.run([rdmadiag, "analyze", str(path), "--packets", "--json", "-"], capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"rdmadiag analyze {path} failed: {out.stderr.strip()}")
    report = json.loads(out.stdout)
    frames = {}
    for p in report["packets"]:
        a = p.get("analysis", {})
        units = p.get("iwarp", [])
        req = sorted(([a["request_frame"]] if "request_frame" in a else []) +
                     [u["request_frame"] for u in units if "request_frame" in u])
        lat = [a["latency_us"]] if "latency_us" in a else []
        lat += [u["latency_us"] for u in units if "latency_us" in u]
        frames[p["frame"]] = {
            "icrc": p.get("icrc", ""),
            "vcrc": p.get("vcrc", ""),
            "mpa_crc": [u["mpa"]["crc_status"] for u in units if "mpa" in u],
            "gap": a.get("gap", 0),
            "duplicate": bool(a.get("duplicate")),
            "out_of_order": bool(a.get("out_of_order")),
            "retransmission": bool(a.get("retransmission")),
            "spurious": bool(a.get("spurious_retransmission")),
            "expected_psn": a.get("expected_psn", ""),
            "request_frame": req,
            "response_frame": a.get("response_frame", 0),
            "nak_gap_frame": a.get("nak_gap_frame", 0),
            "latency_us": sorted(lat),
            "cnp_response_us": [a["cnp_response_us"]] if "cnp_response_us" in a else [],
            "cnp_mark_frame": a.get("cnp_mark_frame", 0),
            "cc_verdict": a.get("cc_verdict", ""),
            "cc_cnp_frame": a.get("cc_cnp_frame", 0),
        }
    anomalies = report.get("anomalies", [])
    if isinstance(anomalies, dict):
        anomalies = anomalies.get("items", [])
    gaps = sorted({a["frame"] for a in anomalies if a["kind"] == "psn_gap"})
    # The plugin shows an anomaly at the frame being analysed when it was raised:
    # for cc_no_reaction, the frame where the episode was judged.
    kept = sorted(a["related_frames"][0] for a in anomalies if a["kind"] == "cc_no_reaction")
    return frames, gaps, kept, collections.Counter(expert_place(a) for a in anomalies)


# Checksum anomalies are shown by the checksum items' expert infos (docs/wireshark.md).
CRC_EXPERT = {"icrc_bad": "rdmadiag.icrc.bad", "vcrc_bad": "rdmadiag.vcrc.bad", "mpa_crc_bad": "rdmadiag.mpa_crc.bad"}


def expert_place(a):
    """(frame, expert field) where the plugin must show a listed anomaly: the frame it names
    (cc_no_reaction: the packet where the episode was judged, its first related frame)."""
    frame = a["related_frames"][0] if a["kind"] == "cc_no_reaction" else a["frame"]
    return frame, CRC_EXPERT.get(a["kind"], f"rdmadiag.anomaly.{a['kind']}")


def anomaly_experts(ts):
    """The expert fields an anomaly can be shown as, from tshark's own field list."""
    r = ts.run(["-G", "fields"])
    names = [c[2] for c in (line.split("\t") for line in r.stdout.splitlines()) if len(c) > 2 and c[0] == "F"]
    return sorted(n for n in names if n.startswith("rdmadiag.anomaly.")) + sorted(CRC_EXPERT.values())


def shown_experts(ts, path, experts):
    """(frame, expert field) of every anomaly expert info tshark -2 shows, counted."""
    r = ts.run(["-2", "-r", str(path), "-Y", " || ".join(experts), "-T", "fields", "-E", "occurrence=a",
                "-E", "aggregator=;", "-e", "frame.number"] + sum([["-e", e] for e in experts], []))
    if r.returncode != 0:
        raise RuntimeError(f"tshark -Y rdmadiag.anomaly.* on {path} failed: {r.stderr.strip()[-500:]}")
    shown = collections.Counter()
    for line in r.stdout.splitlines():
        v = line.split("\t")
        for e, occurrences in zip(experts, v[1:]):
            shown[(int(v[0]), e)] += len(split(occurrences))
    return shown


INFO_TAG = re.compile(r" \[(ICRC bad|VCRC bad|PSN gap: \d+ missing|PSN duplicate|PSN out of order|Retransmission|"
                      r"MPA CRC bad)\]")


def info_tags(info):
    """The plugin's tags in an Info column, sorted."""
    return sorted(INFO_TAG.findall(info))


def tags_of(f):
    """The Info tags a frame with these verdicts must carry (docs/wireshark.md)."""
    tags = ["ICRC bad"] * (f["icrc"] == "bad") + ["VCRC bad"] * (f["vcrc"] == "bad")
    tags += [f"PSN gap: {f['gap']} missing"] * bool(f["gap"]) + ["PSN duplicate"] * f["duplicate"]
    tags += ["PSN out of order"] * f["out_of_order"] + ["Retransmission"] * f["retransmission"]
    return sorted(tags + ["MPA CRC bad"] * f["mpa_crc"].count("bad"))


def split(v):
    return [x for x in v.split(";") if x != ""]


def shown_frames(ts, path):
    # Two passes: a request's response link and latency are known only after its response.
    r = ts.run(["-2", "-r", str(path), "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;"] +
               sum([["-e", f] for f in FIELDS], []))
    if r.returncode != 0:
        raise RuntimeError(f"tshark on {path} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    frames, icrc_pairs = {}, []
    for line in r.stdout.splitlines():
        v = dict(zip(FIELDS, line.split("\t")))
        n = int(v["frame.number"])
        frames[n] = {
            "icrc": STATUS.get(v["rdmadiag.icrc.status"], v["rdmadiag.icrc.status"]),
            "vcrc": STATUS.get(v["rdmadiag.vcrc.status"], v["rdmadiag.vcrc.status"]),
            "mpa_crc": [MPA_STATUS.get(x, x) for x in split(v["rdmadiag.mpa_crc.status"])],
            "gap": int(v["rdmadiag.psn.gap"] or 0),
            "duplicate": v["rdmadiag.psn.duplicate"] != "",
            "out_of_order": v["rdmadiag.psn.out_of_order"] != "",
            "retransmission": v["rdmadiag.retransmission"] != "",
            "spurious": v["rdmadiag.retransmission.spurious"] != "",
            "expected_psn": int(v["rdmadiag.psn.expected"]) if v["rdmadiag.psn.expected"] else "",
            "request_frame": sorted(int(x) for x in split(v["rdmadiag.request_frame"])),
            "response_frame": int(v["rdmadiag.response_frame"] or 0),
            "nak_gap_frame": int(v["rdmadiag.nak.gap_frame"] or 0),
            "latency_us": sorted(float(x) * 1e6 for x in split(v["rdmadiag.latency"])),
            "cnp_response_us": [float(x) * 1e6 for x in split(v["rdmadiag.cc.cnp_response"])],
            "cnp_mark_frame": int(v["rdmadiag.cc.mark_frame"] or 0),
            "cc_verdict": v["rdmadiag.cc.verdict"],
            "cc_cnp_frame": int(v["rdmadiag.cc.cnp_frame"] or 0),
        }
        frames[n]["info"] = info_tags(v["_ws.col.Info"])
        if v["rdmadiag.icrc"] and v["infiniband.invariant.crc"]:
            icrc_pairs.append((n, int(v["rdmadiag.icrc"], 16), int(split(v["infiniband.invariant.crc"])[0], 16)))
    return frames, icrc_pairs


def filtered(ts, path, expr, two_pass=False):
    r = ts.run((["-2"] if two_pass else []) + ["-r", str(path), "-Y", expr, "-T", "fields", "-e", "frame.number"])
    if r.returncode != 0:
        raise RuntimeError(f"tshark -Y '{expr}' on {path} failed: {r.stderr.strip()[-500:]}")
    return sorted(int(x) for x in r.stdout.split())


def same(a, b, key):
    if key in ("latency_us", "cnp_response_us"):
        return len(a) == len(b) and all(abs(x - y) < 0.01 for x, y in zip(a, b))
    return a == b


def check(ts, rdmadiag, path, experts):
    """Returns (frames compared, list of mismatch descriptions)."""
    want, gap_frames, kept_frames, want_experts = expected_frames(rdmadiag, path)
    got, icrc_pairs = shown_frames(ts, path)
    bad = []
    if sorted(want) != sorted(got):
        bad.append(f"frame numbers differ: rdmadiag {len(want)}, tshark {len(got)}")
    for n in sorted(set(want) & set(got)):
        for key in want[n]:
            if not same(want[n][key], got[n][key], key):
                bad.append(f"frame {n} {key}: rdmadiag {want[n][key]!r}, plugin {got[n][key]!r}")
        # The Info column (second pass, as the GUI's packet list) tags what analyze found, no more.
        if got[n]["info"] != tags_of(want[n]):
            bad.append(f"frame {n} Info tags {got[n]['info']}, analyze's verdicts call for {tags_of(want[n])}")
    for n, ours, theirs in icrc_pairs:
        if ours != int.from_bytes(theirs.to_bytes(4, "big"), "little"):
            bad.append(f"frame {n}: plugin ICRC 0x{ours:08x} is not tshark's infiniband.invariant.crc 0x{theirs:08x}")
    # A gap whose PSNs all came late later (reordering) is withdrawn: known in the second pass.
    shown_gaps = filtered(ts, path, "rdmadiag.psn.gap", two_pass=True)
    if shown_gaps != gap_frames:
        bad.append(f"-Y rdmadiag.psn.gap lists {shown_gaps}, analyze's psn_gap anomalies are at {gap_frames}")
    shown_kept = filtered(ts, path, "rdmadiag.anomaly.cc_no_reaction")
    if shown_kept != kept_frames:
        bad.append(f"-Y rdmadiag.anomaly.cc_no_reaction lists {shown_kept}, analyze judged them at {kept_frames}")
    # Every anomaly analyze lists, of every kind and transport, is an expert info on the frame it names.
    got_experts = shown_experts(ts, path, experts)
    for place in sorted(set(want_experts) | set(got_experts)):
        if want_experts[place] != got_experts[place]:
            bad.append(f"frame {place[0]} {place[1]}: analyze lists {want_experts[place]}, tshark -2 shows "
                       f"{got_experts[place]}")
    want_bad = sorted(n for n, f in want.items() if f["icrc"] == "bad")
    shown_bad = filtered(ts, path, 'rdmadiag.icrc.status == "bad"')
    if shown_bad != want_bad:
        bad.append(f'-Y rdmadiag.icrc.status == "bad" lists {shown_bad}, analyze has bad ICRCs at {want_bad}')
    if path.name in CORRUPT and shown_bad != CORRUPT[path.name]:
        bad.append(f"{path.name}: bad ICRC at {shown_bad}, the corrupted frame is {CORRUPT[path.name]}")
    want_slow = sorted(n for n, f in want.items() if any(x > 100 for x in f["latency_us"]))
    shown_slow = filtered(ts, path, "rdmadiag.latency > 0.0001", two_pass=True)
    if shown_slow != want_slow:
        bad.append(f"-Y rdmadiag.latency > 0.0001 lists {len(shown_slow)} frames, analyze {len(want_slow)}")
    # Forward links need the second pass.
    r = ts.run(["-2", "-r", str(path), "-Y", "rdmadiag.response_frame", "-T", "fields", "-e", "frame.number",
                "-e", "rdmadiag.response_frame"])
    links = 0
    for line in r.stdout.splitlines():
        q, resp = line.split("\t")
        links += 1
        # A coalesced ACK answers every request up to its PSN (and every copy of a
        # resent one); the response names the latest, the links reach all of them.
        back = want.get(int(resp), {}).get("request_frame", [])
        if not back or int(q) > max(back):
            bad.append(f"-2: frame {q} links to response {resp}, which answers {back}")
    return len(got), links, len(gap_frames), len(want_bad), sum(want_experts.values()), bad


def check_pause(ts, rdmadiag, path):
    """PAUSE/PFC frames: rdmadiag.pfc.priority/quanta equal tshark's own macc.* decode (PAUSE: all 8
    priorities; PFC: the enabled ones); with the link speed preference, the frames where the plugin
    shows a pause storm are analyze --link-speed's pause_storm frames. Returns mismatch descriptions."""
    fields = ["frame.number", "macc.opcode", "macc.pause_time", "macc.cbfc.enbv"] + \
        [f"macc.cbfc.pause_time.c{n}" for n in range(8)] + ["rdmadiag.pfc.priority", "rdmadiag.pfc.quanta"]
    r = ts.run(["-r", str(path), "-Y", "macc.opcode == 1 || macc.opcode == 0x101", "-T", "fields", "-E", "occurrence=a",
                "-E", "aggregator=;"] + sum([["-e", f] for f in fields], []))
    bad, frames = [], 0
    for line in r.stdout.splitlines():
        v = dict(zip(fields, line.split("\t")))
        op = int(v["macc.opcode"], 0)
        needed = ["macc.pause_time"] if op == 1 else ["macc.cbfc.enbv"] + [f"macc.cbfc.pause_time.c{n}" for n in range(8)]
        if any(not v[f] for f in needed):  # cut by the snap length or a runt: no decode to show
            want = []
        elif op == 1:
            want = [(n, int(v["macc.pause_time"], 0)) for n in range(8)]
        else:
            enbv = int(v["macc.cbfc.enbv"], 0)
            want = [(n, int(v[f"macc.cbfc.pause_time.c{n}"], 0)) for n in range(8) if enbv >> n & 1]
        got = list(zip((int(x) for x in split(v["rdmadiag.pfc.priority"])), (int(x) for x in split(v["rdmadiag.pfc.quanta"]))))
        frames += 1
        if got != want:
            bad.append(f"frame {v['frame.number']}: plugin {got}, tshark macc {want}")
    out = subprocess.run([rdmadiag, "analyze", str(path), "--link-speed", "10", "--json", "-"], capture_output=True, text=True)
    storms = sorted(a["frame"] for a in json.loads(out.stdout)["anomalies"] if a["kind"] == "pause_storm")
    r = ts.run(["-2", "-o", "rdmadiag.link_speed_mbps:10000", "-r", str(path), "-Y", "rdmadiag.anomaly.pause_storm",
                "-T", "fields", "-e", "frame.number"])
    shown = sorted(int(x) for x in r.stdout.split())
    if shown != storms:
        bad.append(f"-Y rdmadiag.anomaly.pause_storm at 10 Gb/s lists {shown}, analyze --link-speed 10 {storms}")
    return frames, len(storms), bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("--plugin-root", required=True, help="folder holding <release>/epan/rdmadiag.so")
    ap.add_argument("captures", nargs="+")
    args = ap.parse_args()
    ts = tshark_or_skip(args.plugin_root)
    if not ts:
        return 77
    files = []
    for c in args.captures:
        p = pathlib.Path(c)
        files += sorted(p.rglob("*.pcap")) + sorted(p.rglob("*.pcapng")) if p.is_dir() else [p]
    failures = total_frames = compared = total_anomalies = 0
    experts = anomaly_experts(ts)
    for f in files:
        if linktype(f) == 247:
            print(f"skip  {f.name}: link type 247 (tshark 4.0 cannot open it)")
            continue
        if not ts.readable(f):
            print(f"FAIL  {f}: not readable by the user tshark runs as")
            failures += 1
            continue
        frames, links, gaps, bad_icrc, anomalies, bad = check(ts, args.rdmadiag, f, experts)
        if f.parent.name == "pfc":
            pause_frames, storms, pause_bad = check_pause(ts, args.rdmadiag, f)
            print(f"      {f.name}: {pause_frames} PAUSE/PFC frames against macc.*, {storms} storms")
            bad += pause_bad
        compared += 1
        total_frames += frames
        status = "ok   " if not bad else "FAIL "
        total_anomalies += anomalies
        print(f"{status} {f.name}: {frames} frames, {gaps} PSN gaps, {bad_icrc} bad ICRC, {links} response links, "
              f"{anomalies} anomaly expert infos"
              f"{'' if not bad else f', {len(bad)} mismatches'}")
        for b in bad[:20]:
            print(f"        {b}")
        failures += bool(bad)
    print(f"{compared} captures, {total_frames} frames and {total_anomalies} anomaly expert infos compared, "
          f"{failures} with mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
