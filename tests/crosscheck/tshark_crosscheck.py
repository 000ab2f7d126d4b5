#!/usr/bin/env python3
"""Cross-check rdmadiag's InfiniBand transport decode against tshark (Wireshark 4.0).

Usage:
    tshark_crosscheck.py --rdmadiag PATH/rdmadiag [--tshark tshark] [-v] FILE_OR_DIR...

For every capture (*.pcap, *.pcapng; directories are searched recursively, so
tests/pcaps also covers tests/pcaps/derived/) it runs rdmadiag once
(`analyze --packets --json -`) and tshark once (`-T fields`), then compares
frame by frame:

  * every frame where either side decoded a BTH must be decoded by both, with
    equal opcode, destination QP and PSN;
  * every other BTH field, extended-header field (RETH, AETH, DETH, ImmDt, IETH,
    AtomicETH, AtomicAckETH, RDETH), MAD / CM field, LRH / GRH field that both
    decode must be equal, and on RoCEv2 frames the IPv4/IPv6 addresses and the
    UDP ports and length; an extended header decoded by one side only is a
    mismatch (except on truncated frames and on the opcodes listed below);
  * the ICRC (VCRC) on the wire: tshark prints the 4 (2) wire bytes as a
    big-endian number, rdmadiag prints the integer the CRC produces (the wire
    bytes read little-endian), so one is the byte-swap of the other (checked on
    rxe_write_lat.pcap frame 31: ours 0xf75c01f7, tshark 0xf7015cf7).

The summary's count of queue pairs must equal the distinct (destination
address, destination QP) of tshark's BTH frames (see QP_FIELDS).

Independently of tshark, every frame with an ICRC/VCRC must have `ok` (a frame
cut short by the snap length may have `unverifiable`; never `bad`), unless the
capture's name marks intentional corruption (contains "bad", "corrupt" or
"broken").

Known places where tshark 4.0 decodes differently (from its source; see
../shared/README.md) -- for these we compare only what tshark gets right:
  * XRC opcodes (0xA0-0xBF) and CNP (0x81): tshark falls to "vendor/unknown"
    and swallows the rest of the packet including the ICRC -> BTH fields only;
  * RD opcodes (0x40-0x5F): tshark parses them as Mellanox DC -> BTH fields only;
  * FECN / BECN: tshark 4.0 does not decode them -> never compared;
  * LINKTYPE_INFINIBAND (247) captures: tshark 4.0 cannot open them -> the file
    is skipped for the comparison (with a visible message), our ICRC/VCRC
    verdicts are still checked;
  * RoCEv2 on a UDP port other than 4791: tshark only decodes it when told, so
    for every such port rdmadiag reports we pass `-d udp.port==P,infiniband`
    (also for a port one bit off 4791 that rdmadiag calls `udp_port_bit_error`);
  * a RoCEv2 packet whose IPv4 header took a bit error (protocol, fragment
    field, header length: rdmadiag's `ipv4_header_bit_error`): tshark does not
    decode it as RoCE. Checked here instead: one bit of header bytes 0-9 put
    back makes the RFC 1071 checksum hold, the packet UDP to 4791 and the ICRC
    (derive_pcaps.py, zlib) hold, and rdmadiag's PSN and QP are that BTH's;
  * ICMP errors: tshark decodes the packet an ICMP error quotes (told the port,
    e.g. the port unreachable Linux answers to such a packet); rdmadiag decodes
    the frame itself only -> BTH not compared on ICMP frames.

Exit status: 0 all files passed, 1 any mismatch / failure, 77 tshark not found
(CTest treats 77 as skipped).  The last line is "N passed, M failed" (files).
"""

import argparse
import concurrent.futures
import ipaddress
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from derive_pcaps import read_pcap, roce_ipv4_bit_restored  # noqa: E402

# --------------------------------------------------------------------------
# Field table: (label, tshark field, kind, extractor on our packet dict, group)
#   kind: int | bool | bytes (hex string, any width) | crc32 | crc16
#   group: "l3" (RoCEv2 IP addresses and UDP header),
#          "bth" (always compared when both decode BTH),
#          "ext" (extended headers / MAD / CM: not compared on opcodes tshark
#                 misdecodes), "crc", "lrh", "grh"
# --------------------------------------------------------------------------


def _get(*path):
    def f(p):
        v = p
        for k in path:
            if not isinstance(v, dict) or k not in v:
                return None
            v = v[k]
        return v
    return f


def _reth_or_atomic(key):
    """tshark 4.0 files the AtomicETH virtual address and R_Key under the RETH's
    field names (infiniband.reth.va / r_key), so those compare against either."""
    def f(p):
        for hdr in ("reth", "atomic_eth"):
            if isinstance(p.get(hdr), dict) and key in p[hdr]:
                return p[hdr][key]
        return None
    return f


def _cm(kind, key):
    def f(p):
        cm = p.get("cm")
        if not cm or cm.get("type") != kind:
            return None
        return cm.get(key)
    return f


def _roce_v2_get(*path):
    g = _get(*path)
    return lambda p: g(p) if p.get("transport") == "roce_v2" else None


def _roce_v2_addr(key, version):
    def f(p):
        if p.get("transport") != "roce_v2" or key not in p:
            return None
        a = ipaddress.ip_address(p[key])
        return a if a.version == version else None
    return f


FIELDS = [
    # RoCEv2 outer headers (only on frames we call roce_v2)
    ("ipv4.src", "ip.src", "addr", _roce_v2_addr("src", 4), "l3"),
    ("ipv4.dst", "ip.dst", "addr", _roce_v2_addr("dst", 4), "l3"),
    ("ipv6.src", "ipv6.src", "addr", _roce_v2_addr("src", 6), "l3"),
    ("ipv6.dst", "ipv6.dst", "addr", _roce_v2_addr("dst", 6), "l3"),
    ("udp.src_port", "udp.srcport", "int", _roce_v2_get("udp", "src_port"), "l3"),
    ("udp.dst_port", "udp.dstport", "int", _roce_v2_get("udp", "dst_port"), "l3"),
    ("udp.length", "udp.length", "int", _roce_v2_get("udp", "length"), "l3"),
    # BTH
    ("opcode", "infiniband.bth.opcode", "int", _get("opcode"), "bth"),
    ("dest_qp", "infiniband.bth.destqp", "int", _get("dest_qp"), "bth"),
    ("psn", "infiniband.bth.psn", "int", _get("psn"), "bth"),
    ("se", "infiniband.bth.se", "bool", _get("se"), "bth"),
    ("mig_req", "infiniband.bth.m", "bool", _get("mig_req"), "bth"),
    ("pad_count", "infiniband.bth.padcnt", "int", _get("pad_count"), "bth"),
    ("tver", "infiniband.bth.tver", "int", _get("tver"), "bth"),
    ("pkey", "infiniband.bth.p_key", "int", _get("pkey"), "bth"),
    ("ack_req", "infiniband.bth.a", "bool", _get("ack_req"), "bth"),
    # extended transport headers
    ("rdeth.ee_context", "infiniband.rdeth.eecnxt", "int", _get("rdeth", "ee_context"), "ext"),
    ("deth.qkey", "infiniband.deth.q_key", "int", _get("deth", "qkey"), "ext"),
    ("deth.src_qp", "infiniband.deth.srcqp", "int", _get("deth", "src_qp"), "ext"),
    ("reth.va", "infiniband.reth.va", "int", _reth_or_atomic("va"), "ext"),
    ("reth.rkey", "infiniband.reth.r_key", "int", _reth_or_atomic("rkey"), "ext"),
    ("reth.dma_len", "infiniband.reth.dmalen", "int", _get("reth", "dma_len"), "ext"),
    ("atomic_eth.swap_add", "infiniband.atomiceth.swapdt", "int", _get("atomic_eth", "swap_add"), "ext"),
    ("atomic_eth.compare", "infiniband.atomiceth.cmpdt", "int", _get("atomic_eth", "compare"), "ext"),
    ("aeth.syndrome", "infiniband.aeth.syndrome", "int", _get("aeth", "syndrome"), "ext"),
    ("aeth.msn", "infiniband.aeth.msn", "int", _get("aeth", "msn"), "ext"),
    ("atomic_ack_eth.orig_remote_data", "infiniband.atomicacketh.origremdt", "int",
     _get("atomic_ack_eth", "orig_remote_data"), "ext"),
    ("imm", "infiniband.immdt", "bytes", _get("imm"), "ext"),
    ("ieth.rkey", "infiniband.ieth", "bytes", _get("ieth", "rkey"), "ext"),
    # MAD / CM
    ("mad.mgmt_class", "infiniband.mad.mgmtclass", "int", _get("mad", "mgmt_class"), "ext"),
    ("mad.method", "infiniband.mad.method", "int", _get("mad", "method"), "ext"),
    ("mad.status", "infiniband.mad.status", "int", _get("mad", "status"), "ext"),
    ("mad.transaction_id", "infiniband.mad.transactionid", "int", _get("mad", "transaction_id"), "ext"),
    ("mad.attribute_id", "infiniband.mad.attributeid", "int", _get("mad", "attribute_id"), "ext"),
    ("cm.REQ.local_comm_id", "infiniband.cm.req", "int", _cm("REQ", "local_comm_id"), "ext"),
    ("cm.REQ.local_qpn", "infiniband.cm.req.localqpn", "int", _cm("REQ", "local_qpn"), "ext"),
    ("cm.REQ.starting_psn", "infiniband.cm.req.startpsn", "int", _cm("REQ", "starting_psn"), "ext"),
    ("cm.REQ.service_id", "infiniband.cm.req.serviceid", "int", _cm("REQ", "service_id"), "ext"),
    ("cm.REP.local_comm_id", "infiniband.cm.rep", "int", _cm("REP", "local_comm_id"), "ext"),
    ("cm.REP.remote_comm_id", "infiniband.cm.rep.remotecommid", "int", _cm("REP", "remote_comm_id"), "ext"),
    ("cm.REP.local_qpn", "infiniband.cm.rep.localqpn", "int", _cm("REP", "local_qpn"), "ext"),
    ("cm.REP.starting_psn", "infiniband.cm.rep.startpsn", "int", _cm("REP", "starting_psn"), "ext"),
    ("cm.RTU.local_comm_id", "infiniband.cm.rtu.localcommid", "int", _cm("RTU", "local_comm_id"), "ext"),
    ("cm.RTU.remote_comm_id", "infiniband.cm.rtu.remotecommid", "int", _cm("RTU", "remote_comm_id"), "ext"),
    ("cm.REJ.local_comm_id", "infiniband.cm.rej.localcommid", "int", _cm("REJ", "local_comm_id"), "ext"),
    ("cm.REJ.remote_comm_id", "infiniband.cm.rej.remotecommid", "int", _cm("REJ", "remote_comm_id"), "ext"),
    ("cm.DREQ.local_comm_id", "infiniband.cm.dreq.localcommid", "int", _cm("DREQ", "local_comm_id"), "ext"),
    ("cm.DREQ.remote_comm_id", "infiniband.cm.dreq.remotecommid", "int", _cm("DREQ", "remote_comm_id"), "ext"),
    ("cm.DREP.local_comm_id", "infiniband.cm.drsp.localcommid", "int", _cm("DREP", "local_comm_id"), "ext"),
    ("cm.DREP.remote_comm_id", "infiniband.cm.drsp.remotecommid", "int", _cm("DREP", "remote_comm_id"), "ext"),
    # CRCs
    ("icrc_wire", "infiniband.invariant.crc", "crc32", _get("icrc_wire"), "crc"),
    ("vcrc_wire", "infiniband.variant.crc", "crc16", _get("vcrc_wire"), "crc"),
    # LRH (native IB)
    ("lrh.vl", "infiniband.lrh.vl", "int", _get("lrh", "vl"), "lrh"),
    ("lrh.lver", "infiniband.lrh.lver", "int", _get("lrh", "lver"), "lrh"),
    ("lrh.sl", "infiniband.lrh.sl", "int", _get("lrh", "sl"), "lrh"),
    ("lrh.lnh", "infiniband.lrh.lnh", "int", _get("lrh", "lnh"), "lrh"),
    ("lrh.dlid", "infiniband.lrh.dlid", "int", _get("lrh", "dlid"), "lrh"),
    ("lrh.slid", "infiniband.lrh.slid", "int", _get("lrh", "slid"), "lrh"),
    ("lrh.pkt_len", "infiniband.lrh.pktlen", "int", _get("lrh", "pkt_len"), "lrh"),
    # GRH (RoCEv1 and native IB with LNH=3; tshark shows RoCEv2/IPv6 as ipv6.*)
    ("grh.traffic_class", "infiniband.grh.tclass", "int", _get("grh", "traffic_class"), "grh"),
    ("grh.flow_label", "infiniband.grh.flowlabel", "int", _get("grh", "flow_label"), "grh"),
    ("grh.payload_length", "infiniband.grh.paylen", "int", _get("grh", "payload_length"), "grh"),
    ("grh.next_header", "infiniband.grh.nxthdr", "int", _get("grh", "next_header"), "grh"),
    ("grh.hop_limit", "infiniband.grh.hoplmt", "int", _get("grh", "hop_limit"), "grh"),
]

# Extended headers whose one-sided presence is a mismatch (our key, tshark field)
PRESENCE = [
    ("reth", "infiniband.reth.va"),
    ("aeth", "infiniband.aeth.syndrome"),
    ("deth", "infiniband.deth.q_key"),
    ("atomic_eth", "infiniband.atomiceth.swapdt"),
    ("atomic_ack_eth", "infiniband.atomicacketh.origremdt"),
    ("imm", "infiniband.immdt"),
    ("ieth", "infiniband.ieth"),
    ("icrc_wire", "infiniband.invariant.crc"),
]

ALWAYS_REQUIRED = ("opcode", "dest_qp", "psn")

LINKTYPE_INFINIBAND = 247


def tshark_divergent(opcode):
    """Opcodes tshark 4.0 is known to decode differently -> BTH-only compare."""
    if 0x40 <= opcode <= 0x5F:
        return "RD (tshark parses as Mellanox DC)"
    if 0xA0 <= opcode <= 0xBF:
        return "XRC (tshark: vendor/unknown)"
    if opcode == 0x81:
        return "CNP (tshark: vendor/unknown)"
    return None


def corrupt_by_name(path):
    name = os.path.basename(path).lower()
    return any(m in name for m in ("bad", "corrupt", "broken"))


def parse_value(kind, s):
    s = s.strip()
    if s == "":
        return None
    if kind == "bool":
        low = s.lower()
        if low in ("true", "1"):
            return 1
        if low in ("false", "0"):
            return 0
        return int(s, 0)
    if kind == "bytes":
        return int(s.replace(":", "").replace("0x", ""), 16)
    if kind == "addr":
        return ipaddress.ip_address(s)
    return int(s, 0)


def normalize_ours(kind, v):
    if v is None:
        return None
    if kind == "addr":
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        return int(v, 16) if v.lower().startswith("0x") else int(v, 0)
    return int(v)


def bswap32(v):
    return struct.unpack("<I", struct.pack(">I", v))[0]


def bswap16(v):
    return struct.unpack("<H", struct.pack(">H", v))[0]


def pcap_linktype(path):
    """Link type of a classic pcap file, or None (pcapng or unreadable)."""
    try:
        with open(path, "rb") as f:
            hdr = f.read(24)
    except OSError:
        return None
    if len(hdr) < 24:
        return None
    magic = hdr[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        return struct.unpack("<I", hdr[20:24])[0] & 0x0FFFFFFF
    if magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        return struct.unpack(">I", hdr[20:24])[0] & 0x0FFFFFFF
    return None


def repaired_ipv4_header_mismatch(path, frame, ours):
    """None when one bit of the IPv4 header's bytes 0-9 put back makes this frame a RoCEv2/IPv4
    packet whose header checksum and ICRC hold and whose BTH PSN and QP are rdmadiag's; else why not."""
    found = roce_ipv4_bit_restored(read_pcap(path)[2][frame - 1][3], range(80))
    if found is None:
        return "no single header bit makes it a RoCEv2 packet whose checksum and ICRC hold"
    ib = found[3]
    psn = struct.unpack("!I", ib[8:12])[0] & 0xFFFFFF
    qp = struct.unpack("!I", ib[4:8])[0] & 0xFFFFFF
    if ours.get("psn") != psn or ours.get("dest_qp") != qp:
        return "repaired BTH: PSN %d QP %d, rdmadiag %s %s" % (psn, qp, ours.get("psn"), ours.get("dest_qp"))
    return None


def run_rdmadiag(rdmadiag, path):
    proc = subprocess.run([rdmadiag, "analyze", "--packets", "--json", "-", path],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # exit 3 = damaged / cut short input: still a usable report
    if proc.returncode not in (0, 3):
        raise RuntimeError("rdmadiag exit %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace").strip()))
    doc = json.loads(proc.stdout.decode())
    return {p["frame"]: p for p in doc.get("packets", [])}, proc.returncode, doc.get("summary", {})


def run_tshark(tshark, path, extra_ports):
    fields = ["frame.number", "frame.cap_len", "frame.len", "icmp.type"] + [f[1] for f in FIELDS] + QP_FIELDS
    fields = list(dict.fromkeys(fields))
    # nvme-rdma: tshark's NVMe dissector throws on some NVMe-oF data (e.g. the
    # Commands Supported and Effects log page in lab_rxe_nvme.pcap, frames 83-85)
    # and the ICRC after it is lost; NVMe is checked by nvme_crosscheck.py.
    cmd = [tshark, "--disable-protocol", "rpcordma", "--disable-protocol", "nvme-rdma",
           "-o", "infiniband.identify_payload:FALSE", "-n", "-r", path]
    for port in sorted(extra_ports):
        cmd += ["-d", "udp.port==%d,infiniband" % port]
    cmd += ["-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        err = "\n".join(l for l in proc.stderr.decode(errors="replace").splitlines()
                        if "Running as user" not in l).strip()
        raise RuntimeError("tshark exit %d: %s" % (proc.returncode, err))
    rows = {}
    for line in proc.stdout.decode(errors="replace").splitlines():
        cols = line.split("\t")
        cols += [""] * (len(fields) - len(cols))
        row = dict(zip(fields, cols))
        rows[int(row["frame.number"])] = row
    return rows


class FileResult:
    def __init__(self, path):
        self.path = path
        self.lines = []          # informational output
        self.mismatches = []     # (frame, field, ours, theirs)
        self.crc_failures = []   # (frame, what, verdict)
        self.errors = []
        self.frames_compared = 0
        self.fields_compared = 0
        self.divergent = {}      # reason -> frames
        self.tshark_skipped = None
        self.crc_checked = 0

    @property
    def failed(self):
        return bool(self.mismatches or self.crc_failures or self.errors)


def fmt(v, kind):
    if v is None:
        return "-"
    if kind in ("crc32",):
        return "0x%08x" % v
    if kind in ("crc16",):
        return "0x%04x" % v
    return str(v)


def check_file(path, rdmadiag, tshark, verbose=False):
    res = FileResult(path)
    try:
        ours, rc, summary = run_rdmadiag(rdmadiag, path)
    except Exception as e:  # noqa: BLE001
        res.errors.append(str(e))
        return res
    if rc == 3:
        res.lines.append("note: rdmadiag reports the input damaged or cut short (exit 3)")

    # 1. our own CRC verdicts
    strict = not corrupt_by_name(path)
    for fr, p in sorted(ours.items()):
        for crc in ("icrc", "vcrc"):
            if crc not in p:
                continue
            res.crc_checked += 1
            verdict = p[crc]
            truncated = p.get("caplen", 0) < p.get("len", 0) or p.get("truncated")
            if verdict == "ok":
                continue
            if verdict == "unverifiable" and truncated:
                continue
            if strict or verdict != "bad":
                res.crc_failures.append((fr, crc, verdict))
    if not strict:
        res.lines.append("note: name marks intentional corruption: bad ICRC/VCRC allowed")

    # 2. tshark
    lt = pcap_linktype(path)
    if lt == LINKTYPE_INFINIBAND:
        res.tshark_skipped = "LINKTYPE_INFINIBAND (247): tshark 4.0 cannot open it"
        nbth = sum(1 for p in ours.values() if "opcode" in p)
        if nbth == 0:
            res.errors.append("rdmadiag decoded no BTH in a LINKTYPE_INFINIBAND capture")
        res.lines.append("SKIPPED tshark comparison: %s; checked our ICRC/VCRC only (%d BTH frames)"
                         % (res.tshark_skipped, nbth))
        return res

    extra_ports = set()
    for p in ours.values():
        if p.get("transport") == "roce_v2" and "udp" in p and p["udp"]["dst_port"] != 4791:
            extra_ports.add(p["udp"]["dst_port"])
    if extra_ports:
        res.lines.append("note: RoCEv2 on UDP port(s) %s: tshark told with -d udp.port==P,infiniband"
                         % ",".join(str(x) for x in sorted(extra_ports)))
    try:
        theirs = run_tshark(tshark, path, extra_ports)
    except Exception as e:  # noqa: BLE001
        res.errors.append(str(e))
        return res

    if set(theirs) != set(ours):
        res.errors.append("frame count differs: rdmadiag %d, tshark %d" % (len(ours), len(theirs)))

    for fr in sorted(set(ours) | set(theirs)):
        p = ours.get(fr, {})
        t = theirs.get(fr)
        # Frame lengths on every frame (not just IB ones): a link-layer record
        # header (ERF) is not part of the packet, for tshark nor for us.
        for label, tf in (("len", "frame.len"), ("caplen", "frame.cap_len")):
            if p and t is not None and t.get(tf, "").strip():
                if p.get(label) != int(t[tf]):
                    res.mismatches.append((fr, label, fmt(p.get(label), "int"), t[tf]))
        t_has = t is not None and t["infiniband.bth.opcode"].strip() != ""
        o_has = "opcode" in p
        if not (t_has or o_has):
            continue
        if t_has and not o_has and t.get("icmp.type", "").strip():
            continue  # the packet an ICMP error quotes (see the known differences above)
        if o_has and not t_has and any(d.get("code") == "ipv4_header_bit_error" for d in p.get("diagnostics", [])):
            why = repaired_ipv4_header_mismatch(path, fr, p)
            if why:
                res.mismatches.append((fr, "IPv4 header bit error", "ours", why))
            else:
                res.lines.append("note: frame %d: IPv4 header one bit off a RoCEv2 packet's (checksum and ICRC hold "
                                 "with it put back): BTH checked against the repaired bytes" % fr)
            continue
        if not (t_has and o_has):
            res.mismatches.append((fr, "BTH decoded", "yes" if o_has else "no", "yes" if t_has else "no"))
            continue
        res.frames_compared += 1
        truncated = (p.get("caplen", 0) < p.get("len", 0)) or bool(p.get("truncated"))
        why = tshark_divergent(p["opcode"])
        if why:
            res.divergent[why] = res.divergent.get(why, 0) + 1
        for label, tf, kind, getter, group in FIELDS:
            if why and group not in ("bth", "l3"):
                continue
            ov = normalize_ours(kind, getter(p))
            tv = parse_value(kind, t.get(tf, ""))
            if label in ALWAYS_REQUIRED and (ov is None or tv is None):
                res.mismatches.append((fr, label, fmt(ov, kind), fmt(tv, kind)))
                continue
            if ov is None or tv is None:
                continue
            if kind == "crc32":
                tv = bswap32(tv)
            elif kind == "crc16":
                tv = bswap16(tv)
            res.fields_compared += 1
            if ov != tv:
                res.mismatches.append((fr, label, fmt(ov, kind), fmt(tv, kind)))
        if why or truncated:
            continue
        for key, tf in PRESENCE:
            o_present = key in p or (key == "reth" and "atomic_eth" in p)  # see _reth_or_atomic
            t_present = t.get(tf, "").strip() != ""
            if o_present != t_present:
                res.mismatches.append((fr, key + " present", "yes" if o_present else "no",
                                       "yes" if t_present else "no"))
    for why, n in sorted(res.divergent.items()):
        res.lines.append("note: %d frame(s) with %s opcodes: compared BTH fields only" % (n, why))
    check_queue_pairs(res, summary, theirs)
    return res


# The queue pairs a capture shows: distinct (destination address, destination QP)
# over every frame with a BTH, the address from the IP header (RoCEv2) else the
# GRH's DGID (RoCEv1, native IB with a GRH) else the LRH's DLID: a QP is named
# by its port and QP number (IBA 3.5.4). ICMP errors are left out (tshark
# decodes the packet they quote, see above).
QP_FIELDS = ["ip.dst", "ipv6.dst", "infiniband.grh.dgid", "infiniband.lrh.dlid"]


def tshark_queue_pairs(theirs):
    qps = set()
    for t in theirs.values():
        qp = t["infiniband.bth.destqp"].strip()
        if not qp or t.get("icmp.type", "").strip():
            continue
        v4, v6, gid, lid = (t[f].strip() for f in QP_FIELDS)
        dst = ("ip", v4 or v6) if (v4 or v6) else ("gid", gid) if gid else ("lid", lid)
        qps.add((dst, int(qp, 0)))
    return len(qps)


def check_queue_pairs(res, summary, theirs):
    if "queue_pairs" not in summary:
        res.errors.append("rdmadiag's summary has no queue_pairs")
        return
    n = tshark_queue_pairs(theirs)
    if summary["queue_pairs"] != n:
        res.mismatches.append((0, "queue pairs seen", str(summary["queue_pairs"]), str(n)))


def collect(paths):
    out = []
    for a in paths:
        if os.path.isdir(a):
            for root, dirs, files in os.walk(a):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith((".pcap", ".pcapng")):
                        out.append(os.path.join(root, f))
        elif os.path.exists(a):
            out.append(a)
        else:
            print("error: %s does not exist" % a, file=sys.stderr)
            out.append(a)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rdmadiag", required=True, help="path to the rdmadiag binary")
    ap.add_argument("--tshark", default="tshark", help="tshark to run (default: from PATH)")
    ap.add_argument("-j", "--jobs", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("-v", "--verbose", action="store_true", help="print every mismatch")
    ap.add_argument("paths", nargs="+", help="captures or directories")
    args = ap.parse_args()

    tshark = shutil.which(args.tshark)
    if tshark is None:
        print("SKIPPED: tshark not found")
        return 77
    if not os.access(args.rdmadiag, os.X_OK):
        print("error: rdmadiag not executable: %s" % args.rdmadiag)
        return 1

    files = collect(args.paths)
    if not files:
        print("error: no captures found")
        return 1

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        results = list(ex.map(lambda f: check_file(f, args.rdmadiag, tshark, args.verbose), files))

    passed = failed = 0
    tot_frames = tot_fields = tot_crc = skipped = 0
    for r in results:
        status = "FAIL" if r.failed else "ok"
        print("%s: %s: %d frames compared, %d fields compared, %d mismatches, %d ICRC/VCRC verdicts checked%s"
              % (status, r.path, r.frames_compared, r.fields_compared, len(r.mismatches), r.crc_checked,
                 " (tshark skipped)" if r.tshark_skipped else ""))
        for l in r.lines:
            print("    " + l)
        for e in r.errors:
            print("    ERROR: " + e)
        lim = None if args.verbose else 10
        for fr, field, o, t in r.mismatches[:lim]:
            print("    MISMATCH frame %d %s: ours %s, tshark %s" % (fr, field, o, t))
        if lim is not None and len(r.mismatches) > lim:
            print("    ... %d more mismatches (-v shows all)" % (len(r.mismatches) - lim))
        for fr, crc, verdict in r.crc_failures[:lim]:
            print("    CRC frame %d %s: %s (expected ok)" % (fr, crc, verdict))
        if lim is not None and len(r.crc_failures) > lim:
            print("    ... %d more CRC failures" % (len(r.crc_failures) - lim))
        tot_frames += r.frames_compared
        tot_fields += r.fields_compared
        tot_crc += r.crc_checked
        skipped += bool(r.tshark_skipped)
        if r.failed:
            failed += 1
        else:
            passed += 1
    print("total: %d files (%d without tshark comparison), %d frames compared, %d fields compared, "
          "%d ICRC/VCRC verdicts checked" % (len(results), skipped, tot_frames, tot_fields, tot_crc))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
