#!/usr/bin/env python3
"""Cross-check rdmadiag's iWARP decode (MPA / DDP / RDMAP) against tshark 4.0.

Usage:
    iwarp_crosscheck.py --rdmadiag PATH/rdmadiag [--tshark tshark] [-v] [--cut N] FILE_OR_DIR...

For every capture (directories: every *siw*.pcap / *iwarp*.pcap in them) it
runs rdmadiag once (`analyze --packets --json -`) and tshark once (`-T fields`
with the iwarp_mpa / iwarp_ddp / iwarp_rdma fields, every occurrence), then
compares frame by frame:

  * every frame in which tshark shows an MPA Request/Reply or FPDUs must have
    the same units in our `iwarp` array (rdmadiag puts an FPDU in the frame that
    holds its last byte, as tshark does);
  * per frame, for every field, the values in FPDU order: ULPDU length, CRC (the
    wire bytes: tshark prints them big-endian, we print the CRC32c integer, whose
    wire form is little-endian, so one is the byte swap of the other), DDP T / L /
    DV, STag / TO or QN / MSN / MO, RDMAP version / opcode, invalidate STag,
    Read Request fields, Terminate layer / type / code; MPA Request/Reply flags,
    revision and private data length.
  * independently of tshark: no FPDU may have crc_status "bad", and on a capture
    whose MPA negotiation asked for CRC every FPDU must be "ok".

Frames where rdmadiag decodes FPDUs that tshark does not are counted and shown
("beyond tshark"): tshark recognises FPDUs only after seeing both the MPA
Request and Reply, and does not reassemble out-of-order TCP by default.

Mid-stream (--cut N, default: a third of the frames): the capture is written
again without its first N frames, a place where each iWARP connection is in
full operation. tshark decodes no FPDU there (it needs the negotiation: said in
the output); rdmadiag must find the FPDU boundaries again, mark them `resync`,
and from its first resync point on in each direction decode every FPDU tshark
decodes in the full capture, with the same fields.

Exit status: 0 all passed, 1 any mismatch, 77 tshark not found. The last line
is "N passed, M failed" (checks: one per capture, one per mid-stream cut).
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

# (label, tshark field, our extractor on an FPDU dict, kind)
FPDU_FIELDS = [
    ("ulpdu_len", "iwarp_mpa.ulpdulength", lambda u: u["mpa"]["ulpdu_len"], "int"),
    ("crc", "iwarp_mpa.crc", lambda u: u["mpa"]["crc"], "crc"),
    ("tagged", "iwarp_ddp.tagged_flag", lambda u: u.get("ddp", {}).get("tagged"), "bool"),
    ("last", "iwarp_ddp.last_flag", lambda u: u.get("ddp", {}).get("last"), "bool"),
    ("dv", "iwarp_ddp.dv", lambda u: u.get("ddp", {}).get("version"), "int"),
    ("stag", "iwarp_ddp.stag", lambda u: u.get("ddp", {}).get("stag"), "int"),
    ("to", "iwarp_ddp.tagged_offset", lambda u: u.get("ddp", {}).get("to"), "int"),
    ("qn", "iwarp_ddp.qn", lambda u: u.get("ddp", {}).get("qn"), "int"),
    ("msn", "iwarp_ddp.msn", lambda u: u.get("ddp", {}).get("msn"), "int"),
    ("mo", "iwarp_ddp.mo", lambda u: u.get("ddp", {}).get("mo"), "int"),
    ("rdma_version", "iwarp_rdma.version", lambda u: u.get("rdmap", {}).get("version"), "int"),
    ("opcode", "iwarp_rdma.opcode", lambda u: u.get("rdmap", {}).get("opcode"), "int"),
    ("inval_stag", "iwarp_rdma.inval_stag", lambda u: u.get("rdmap", {}).get("inval_stag"), "int"),
    ("sink_stag", "iwarp_rdma.sinkstag", lambda u: u.get("rdmap", {}).get("sink_stag"), "int"),
    ("sink_to", "iwarp_rdma.sinkto", lambda u: u.get("rdmap", {}).get("sink_to"), "int"),
    ("read_size", "iwarp_rdma.rdmardsz", lambda u: u.get("rdmap", {}).get("read_size"), "int"),
    ("src_stag", "iwarp_rdma.srcstag", lambda u: u.get("rdmap", {}).get("src_stag"), "int"),
    ("src_to", "iwarp_rdma.srcto", lambda u: u.get("rdmap", {}).get("src_to"), "int"),
    ("term_layer", "iwarp_rdma.term_layer", lambda u: u.get("rdmap", {}).get("term_layer"), "int"),
    ("term_etype", "iwarp_rdma.term_etype", lambda u: u.get("rdmap", {}).get("term_etype"), "int"),
    ("term_errcode", "iwarp_rdma.term_errcode", lambda u: u.get("rdmap", {}).get("term_errcode"), "int"),
]
NEG_FIELDS = [
    ("marker", "iwarp_mpa.marker_flag", lambda n: n["marker"], "bool"),
    ("crc_flag", "iwarp_mpa.crc_flag", lambda n: n["crc"], "bool"),
    ("reject", "iwarp_mpa.rej_flag", lambda n: n["reject"], "bool"),
    ("revision", "iwarp_mpa.rev", lambda n: n["revision"], "int"),
    ("pd_length", "iwarp_mpa.pdlength", lambda n: n["pd_length"], "int"),
]
EXTRA = ["frame.number", "tcp.srcport", "tcp.dstport", "iwarp_mpa.key.req", "iwarp_mpa.key.rep", "iwarp_mpa.crc_check"]
TSHARK_FIELDS = EXTRA + [f[1] for f in FPDU_FIELDS] + [f[1] for f in NEG_FIELDS]


def to_int(v, kind):
    if v is None:
        return None
    if kind == "bool":
        if isinstance(v, bool):
            return int(v)
        return 1 if str(v) in ("1", "True", "true") else 0
    if isinstance(v, int):
        return v
    s = str(v)
    return int(s, 16) if s.lower().startswith("0x") else int(s)


def bswap32(x):
    return struct.unpack("<I", struct.pack(">I", x))[0]


def run_tshark(tshark, path):
    # nvme-tcp: tshark takes TCP port 4420 for NVMe/TCP, which hides the MPA
    # of NVMe-oF over iWARP (lab_siw_nvme.pcap).
    cmd = [tshark, "--disable-protocol", "nvme-tcp", "-n", "-r", path, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,", "-E", "header=n"]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    frames = {}
    for line in out.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(TSHARK_FIELDS) - len(cols))
        row = dict(zip(TSHARK_FIELDS, cols))
        if not (row["iwarp_mpa.ulpdulength"] or row["iwarp_mpa.key.req"] or row["iwarp_mpa.key.rep"]):
            continue
        frames[int(row["frame.number"])] = row
    return frames


def run_rdmadiag(binary, path):
    out = subprocess.run([binary, "analyze", "--packets", "--json", "-", path], capture_output=True, text=True)
    if out.returncode not in (0, 3):
        raise RuntimeError(f"rdmadiag exited {out.returncode}: {out.stderr.strip()}")
    doc = json.loads(out.stdout)
    frames = {}
    for p in doc.get("packets", []):
        for u in p.get("iwarp", []):
            frames.setdefault(u.get("end_frame", p["frame"]), []).append((p, u))
    return doc, frames


def split(v):
    return [x for x in v.split(",")] if v else []


def compare_frame(frame, trow, ours, problems, counts):
    """Compares tshark's row with our units ending in `frame`."""
    negs = [u for _, u in ours if "mpa_negotiation" in u]
    fpdus = [u for _, u in ours if "mpa" in u]
    if trow["iwarp_mpa.key.req"] or trow["iwarp_mpa.key.rep"]:
        want = "request" if trow["iwarp_mpa.key.req"] else "reply"
        if len(negs) != 1 or negs[0]["mpa_negotiation"]["type"] != want:
            problems.append(f"frame {frame}: tshark MPA {want}, ours {[n['mpa_negotiation']['type'] for n in negs]}")
            return
        counts["negotiation"] += 1
        for label, tf, get, kind in NEG_FIELDS:
            if to_int(trow[tf], kind) != to_int(get(negs[0]["mpa_negotiation"]), kind):
                problems.append(f"frame {frame}: MPA {label} tshark {trow[tf]} ours {get(negs[0]['mpa_negotiation'])}")
        return
    n_tshark = len(split(trow["iwarp_mpa.ulpdulength"]))
    if len(fpdus) != n_tshark:
        problems.append(f"frame {frame}: tshark {n_tshark} FPDUs, ours {len(fpdus)}")
        return
    counts["fpdus"] += n_tshark
    for label, tf, get, kind in FPDU_FIELDS:
        tv = split(trow[tf])
        if label == "crc" and not tv:
            tv = split(trow["iwarp_mpa.crc_check"])  # tshark 4.0 puts the wire CRC there when CRC is off
        ov = [get(u) for u in fpdus]
        ov = [v for v in ov if v is not None]
        if not tv and label in ("crc",):
            continue
        if kind == "crc":
            ov = [bswap32(to_int(v, "int")) for v in ov]
            tv = [to_int(v, "int") for v in tv]
        else:
            tv = [to_int(v, kind) for v in tv]
            ov = [to_int(v, kind) for v in ov]
        if tv != ov:
            problems.append(f"frame {frame}: {label} tshark {tv} ours {ov}")


def check_capture(args, path):
    problems = []
    counts = {"fpdus": 0, "negotiation": 0, "beyond": 0}
    tframes = run_tshark(args.tshark, path)
    doc, oframes = run_rdmadiag(args.rdmadiag, path)
    for frame, trow in sorted(tframes.items()):
        compare_frame(frame, trow, oframes.get(frame, []), problems, counts)
    for frame, units in sorted(oframes.items()):
        if frame not in tframes:
            counts["beyond"] += len(units)
            if args.verbose:
                print(f"  frame {frame}: {len(units)} units decoded by rdmadiag only")
    # Independent of tshark: CRC verdicts.
    crc_negotiated = any(u["mpa_negotiation"]["crc"] for us in oframes.values() for _, u in us if "mpa_negotiation" in u)
    for frame, units in oframes.items():
        for _, u in units:
            if "mpa" not in u:
                continue
            st = u["mpa"]["crc_status"]
            if st == "bad" or (crc_negotiated and st != "ok"):
                problems.append(f"frame {frame}: crc_status {st}")
    iw = doc.get("iwarp", {})
    print(f"{os.path.basename(path)}: {counts['fpdus']} FPDUs and {counts['negotiation']} MPA Request/Reply compared "
          f"with tshark, {len(problems)} mismatches; rdmadiag: {iw.get('fpdus')} FPDUs, CRC {iw.get('crc')}, "
          f"{counts['beyond']} units beyond tshark")
    for p in problems[:20]:
        print("  MISMATCH " + p)
    return not problems and counts["fpdus"] > 0, tframes, oframes


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in (0xA1B2C3D4, 0xA1B23C4D):
        raise RuntimeError("not a little-endian classic pcap")
    header, records, off = data[:24], [], 24
    while off + 16 <= len(data):
        incl = struct.unpack("<I", data[off + 8:off + 12])[0]
        records.append(data[off:off + 16 + incl])
        off += 16 + incl
    return header, records


def check_cut(args, path, tframes_full):
    header, records = read_pcap(path)
    cut = args.cut if args.cut is not None else len(records) // 3
    with tempfile.TemporaryDirectory() as tmp:
        cut_path = os.path.join(tmp, f"cut{cut}_" + os.path.basename(path))
        with open(cut_path, "wb") as f:
            f.write(header)
            for r in records[cut:]:
                f.write(r)
        tframes_cut = run_tshark(args.tshark, cut_path)
        tshark_cut_fpdus = sum(len(split(r["iwarp_mpa.ulpdulength"])) for r in tframes_cut.values())
        doc, ours = run_rdmadiag(args.rdmadiag, cut_path)
    problems = []
    counts = {"fpdus": 0, "negotiation": 0, "beyond": 0}
    # First resync frame per direction (TCP port pair), in full-capture numbering.
    first_resync = {}
    for frame, units in sorted(ours.items()):
        for p, u in units:
            if u.get("resync"):
                first_resync.setdefault((p["tcp"]["src_port"], p["tcp"]["dst_port"]), frame + cut)
            elif "mpa" in u:
                problems.append(f"cut frame {frame}: FPDU without resync flag")
    compared_dirs = set()
    for frame, trow in sorted(tframes_full.items()):
        if frame <= cut or not trow["iwarp_mpa.ulpdulength"]:
            continue
        port = (int(trow["tcp.srcport"]), int(trow["tcp.dstport"]))
        if port not in first_resync or frame < first_resync[port]:
            continue
        compared_dirs.add(port)
        compare_frame(frame, trow, ours.get(frame - cut, []), problems, counts)
    resyncs = doc.get("iwarp", {}).get("resyncs", 0)
    print(f"{os.path.basename(path)} without its first {cut} frames: tshark decodes {tshark_cut_fpdus} FPDUs "
          f"(it needs the MPA negotiation); rdmadiag resynchronised {resyncs} times "
          f"(directions {sorted(first_resync)} from frames {[first_resync[k] for k in sorted(first_resync)]}) and "
          f"matches tshark's full-capture decode on {counts['fpdus']} FPDUs after them, {len(problems)} mismatches")
    for p in problems[:20]:
        print("  MISMATCH " + p)
    return not problems and counts["fpdus"] > 0 and len(compared_dirs) >= 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("--cut", type=int, default=None)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    if not shutil.which(args.tshark):
        print("SKIPPED: tshark not found")
        return 77
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith(".pcap") and ("siw" in f or "iwarp" in f))
        else:
            files.append(p)
    passed = failed = 0
    for path in files:
        try:
            ok, tframes, _ = check_capture(args, path)
            ok_cut = check_cut(args, path, tframes)
        except (RuntimeError, subprocess.CalledProcessError, json.JSONDecodeError) as e:
            print(f"{path}: ERROR {e}")
            ok = ok_cut = False
        for r in (ok, ok_cut):
            passed += r
            failed += not r
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
