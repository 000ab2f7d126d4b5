#!/usr/bin/env python3
"""NVMe-oF over iWARP (siw) decode of `rdmadiag nvme` against an oracle built
here from tshark's iWARP decode (tests/pcaps/NAME.iwarp_nvme.tsv, made by
tests/lab/iwarp-nvme-fields), fio's JSON and the kernel's block statistics.

tshark 4.0 decodes MPA/DDP/RDMAP on these captures but not the NVMe capsules
inside (its nvme-rdma dissector is for InfiniBand/RoCE only) and shows the
payload of only the first FPDU of a segment. So the oracle cuts each segment
that carries a Send into FPDUs itself (MPA length, pad, CRC field; no markers)
and accepts the cut only where it gives exactly tshark's RDMAP opcodes and
DDP message numbers; it reads the SQE/CQE fields at the offsets of the NVMe
base specification (SQE: CID bytes 2-3, NSID 4-7, SGL 24-39, CDW10.. 40-63;
CQE: SQ head 8-9, SQID 10-11, CID 12-13, status 14-15; Connect: QID in CDW10
bits 31:16, SQSIZE in CDW11), binds each TCP connection to the QID of its
Connect, pairs command and completion by (connection, CID), and matches data
by STag and tagged offset from tshark's DDP/RDMAP fields (Write: STag = the
SGL key, offset inside the SGL; Read Request: source STag/offset, its
responses by sink STag/offset).

Checked: every capsule field by field and the command each completion pairs
with (and its latency from tshark's frame times); per command the data
operations, bytes, first and last data frame; completed I/O per direction and
size against fio's total_ios and the kernel's counts (nvme_crosscheck.check_counts);
transport events per command against tshark's own TCP analysis (retransmission
and out-of-order flags on the command's connection inside its window); every
queue's NQNs against the lab scripts' (nvme_crosscheck.check_nqns).

  nvme_iwarp_crosscheck.py --rdmadiag BIN PCAP_DIR
Exit 0 all agree, 1 a disagreement, 77 (skip) no NAME.iwarp_nvme.tsv.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvme_crosscheck as nc  # noqa: E402  (read_tsv, check_counts)

PORT = 4420
SENDS = {3, 4, 5, 6}
TAGGED = {0, 2}  # RDMA Write, Read Response


def le(b, off, n):
    return int.from_bytes(b[off:off + n], "little")


def split_list(v):
    return v.split(",") if v else []


def cut_fpdus(payload):
    """FPDUs of a segment from its first byte: [(ulpdu bytes)], or None if the bytes do not end on a boundary."""
    out, off = [], 0
    while off + 2 <= len(payload):
        n = int.from_bytes(payload[off:off + 2], "big")
        end = off + 2 + n + (-(2 + n) % 4) + 4
        if end > len(payload):
            return None
        out.append(payload[off + 2:off + 2 + n])
        off = end
    return out if off == len(payload) else None


def frame_fpdus(row):
    """tshark's FPDUs of one frame in order: dicts of opcode, tagged fields, untagged fields."""
    ops = [int(o, 16) for o in split_list(row["iwarp_rdma.opcode"])]
    stags, tos = split_list(row["iwarp_ddp.stag"]), split_list(row["iwarp_ddp.tagged_offset"])
    msns, mos, qns = split_list(row["iwarp_ddp.msn"]), split_list(row["iwarp_ddp.mo"]), split_list(row["iwarp_ddp.qn"])
    lasts, lens = split_list(row["iwarp_ddp.last_flag"]), split_list(row["iwarp_mpa.ulpdulength"])
    rr = [split_list(row[f]) for f in ("iwarp_rdma.sinkstag", "iwarp_rdma.sinkto", "iwarp_rdma.rdmardsz",
                                        "iwarp_rdma.srcstag", "iwarp_rdma.srcto")]
    out, t, u, r = [], 0, 0, 0
    for i, op in enumerate(ops):
        f = {"op": op, "last": lasts[i] in ("1", "True"), "ulpdu_len": int(lens[i])}
        if op in TAGGED:
            f.update(stag=int(stags[t], 16), to=int(tos[t], 16), payload=int(lens[i]) - 14)
            t += 1
        else:
            f.update(qn=int(qns[u]), msn=int(msns[u]), mo=int(mos[u]))
            u += 1
        if op == 1:
            f.update(sink_stag=int(rr[0][r], 16), sink_to=int(rr[1][r], 16), size=int(rr[2][r]),
                     src_stag=int(rr[3][r], 16), src_to=int(rr[4][r], 16))
            r += 1
        out.append(f)
    return out


def sqe_fields(b):
    c = {"cid": le(b, 2, 2), "opcode": b[0], "sgl_address": le(b, 24, 8), "sgl_type": b[39] >> 4,
         "sgl_subtype": b[39] & 15}
    if c["sgl_type"] == 4:  # keyed data block: 3-byte length, key (NVMe Base 1.4 figure 114)
        c.update(sgl_length=le(b, 32, 3), sgl_key=le(b, 35, 4))
    else:  # data block (in-capsule offset): 4-byte length
        c.update(sgl_length=le(b, 32, 4))
    if b[0] == 0x7F:
        c["fctype"] = b[4]
        if b[4] == 1:
            c.update(connect_qid=le(b, 42, 2), sqsize=le(b, 44, 2))
    else:
        c.update(nsid=le(b, 4, 4))
        if b[0] in (1, 2):
            c.update(slba=le(b, 40, 8), blocks=le(b, 48, 2) + 1)
    return c


def epoch_ns(s):
    sec, _, frac = s.partition(".")
    return int(sec) * 10**9 + int((frac + "000000000")[:9])


class Oracle:
    """Capsules, pairing and data from tshark's fields alone."""

    def __init__(self):
        self.capsules = {}      # frame -> [capsule dict]
        self.qid = {}           # connection (host ip, host port) -> QID from its Connect
        self.pending = {}       # (connection, cid) -> command dict
        self.commands = {}      # command frame -> command dict (with its completion)
        self.reads = []         # Read Requests: (conn, sink_stag, sink_to, size, command)
        self.uncut = 0          # Send FPDUs in segments the oracle could not cut

    def command_for(self, conn, key, address):
        for (c, _), cmd in self.pending.items():
            if c == conn and cmd.get("sgl_key") == key and 0 <= address - cmd["sgl_address"] < max(cmd["sgl_length"], 1):
                return cmd
        return None

    def data(self, cmd, frame, op_starts, end=None):
        cmd["data_first_frame"] = cmd["data_first_frame"] or frame
        cmd["data_last_frame"] = frame
        cmd["data_operations"] += op_starts
        if end is not None:
            cmd["data_moved_bytes"] = max(cmd["data_moved_bytes"], end - cmd["sgl_address"])

    def add_frame(self, row):
        frame, ns = int(row["frame.number"]), epoch_ns(row["frame.time_epoch"])
        to_ctrl = row["tcp.dstport"] == str(PORT)
        conn = (row["ip.src"], row["tcp.srcport"]) if to_ctrl else (row["ip.dst"], row["tcp.dstport"])
        fpdus = frame_fpdus(row)
        wire = row["tcp.reassembled.data"] or row["tcp.payload"]  # an FPDU spanning segments: tshark's reassembly
        cut = cut_fpdus(bytes.fromhex(wire)) if wire else None
        # The cut must give tshark's opcodes, and each Send's DDP MSN (bytes 10-13 of the ULPDU).
        if cut is not None and ([u[1] & 15 for u in cut] != [f["op"] for f in fpdus] or any(
                f["op"] in SENDS and int.from_bytes(u[10:14], "big") != f["msn"] for u, f in zip(cut, fpdus))):
            cut = None
        for i, f in enumerate(fpdus):
            if f["op"] in SENDS:
                if f["mo"] == 0 and f["qn"] == 0:
                    if cut is None:
                        self.uncut += 1
                    else:
                        self.capsule(frame, ns, conn, to_ctrl, f, cut[i][18:])
            elif f["op"] == 0 and not to_ctrl:
                cmd = self.command_for(conn, f["stag"], f["to"])
                if cmd:  # a Write message's first segment follows one with the Last flag
                    self.data(cmd, frame, 0 if cmd.get("write_open") else 1, f["to"] + f["payload"])
                    cmd["write_open"] = not f["last"]
            elif f["op"] == 1 and not to_ctrl:
                cmd = self.command_for(conn, f["src_stag"], f["src_to"])
                self.reads.append((conn, f["sink_stag"], f["sink_to"], f["size"], cmd))
                if cmd:
                    self.data(cmd, frame, 1, f["src_to"] + f["size"])
            elif f["op"] == 2 and to_ctrl:
                for c, stag, to, size, cmd in reversed(self.reads):
                    if c == conn and stag == f["stag"] and 0 <= f["to"] - to < max(size, 1):
                        if cmd and (conn, cmd["cid"]) in self.pending and self.pending[(conn, cmd["cid"])] is cmd:
                            self.data(cmd, frame, 0)
                        break

    def capsule(self, frame, ns, conn, to_ctrl, f, payload):
        if to_ctrl and f["ulpdu_len"] - 18 >= 64:
            c = sqe_fields(payload)
            if c.get("connect_qid") is not None:
                self.qid[conn] = c["connect_qid"]
            c.update(kind="command", frame=frame, ns=ns, qid=self.qid.get(conn), data_first_frame=0, data_last_frame=0,
                     data_operations=0, data_moved_bytes=0)
            self.pending[(conn, c["cid"])] = c
            self.commands[frame] = c
        elif not to_ctrl and f["last"] and f["ulpdu_len"] - 18 == 16:
            c = {"kind": "response", "frame": frame, "cid": le(payload, 12, 2), "sqid": le(payload, 10, 2),
                 "sqhd": le(payload, 8, 2), "status": le(payload, 14, 2) >> 1, "qid": self.qid.get(conn)}
            cmd = self.pending.pop((conn, c["cid"]), None)
            c["paired_frame"] = cmd["frame"] if cmd else None
            if cmd:
                cmd["response_frame"], cmd["latency_ns"] = frame, ns - cmd["ns"]
        else:
            return
        self.capsules.setdefault(frame, []).append(c)


def num(v):
    return None if v in ("", None) else int(v, 0)


def check_capsules(name, oracle, ours_rows, errors):
    ours = {}
    for r in ours_rows:
        ours.setdefault(int(r["frame"]), []).append(r)
    fields = {"command": ["cid", "opcode", "nsid", "slba", "blocks", "sgl_type", "sgl_subtype", "sgl_address",
                          "sgl_length", "sgl_key", "fctype", "connect_qid", "sqsize", "qid"],
              "response": ["cid", "sqid", "sqhd", "status", "paired_frame", "qid"]}
    checked = 0
    for frame in sorted(set(ours) | set(oracle.capsules)):
        mine, theirs = ours.get(frame, []), oracle.capsules.get(frame, [])
        if len(mine) != len(theirs):
            errors.append(f"{name}: frame {frame}: {len(mine)} capsules ours, {len(theirs)} the oracle's")
            continue
        for o, t in zip(mine, theirs):
            if o["kind"] != t["kind"]:
                errors.append(f"{name}: frame {frame}: ours a {o['kind']}, the oracle's a {t['kind']}")
                continue
            for k in fields[t["kind"]]:
                want = t.get(k)
                got = None if o.get(k) in ("", "unknown") else num(o[k]) if k != "qid" else int(o[k])
                if k in ("slba", "blocks", "nsid", "sgl_key") and want is None:
                    continue
                if got != want:
                    errors.append(f"{name}: frame {frame}: {t['kind']} {k} ours {got}, oracle {want}")
            checked += 1
    return checked


def check_commands(name, oracle, commands, errors):
    """Completed commands: response frame, latency, data against the oracle."""
    got = {int(r["command_frame"]): r for r in commands}
    want = {f: c for f, c in oracle.commands.items() if c.get("response_frame")}
    if set(got) != set(want):
        errors.append(f"{name}: completed commands ours {len(got)}, oracle {len(want)}; "
                      f"only ours {sorted(set(got) - set(want))[:5]}, only the oracle's {sorted(set(want) - set(got))[:5]}")
    with_data = 0
    for f in sorted(set(got) & set(want)):
        o, t = got[f], want[f]
        if int(o["response_frame"]) != t["response_frame"]:
            errors.append(f"{name}: command {f}: response ours {o['response_frame']}, oracle {t['response_frame']}")
        if abs(float(o["latency_us"]) - t["latency_ns"] / 1000) > 0.0015:
            errors.append(f"{name}: command {f}: latency ours {o['latency_us']} us, tshark's frame times {t['latency_ns'] / 1000}")
        for k in ("data_operations", "data_moved_bytes", "data_first_frame", "data_last_frame"):
            if (num(o[k]) or 0) != t[k]:
                errors.append(f"{name}: command {f}: {k} ours {o[k]}, oracle {t[k]}")
        with_data += t["data_operations"] > 0
    return len(set(got) & set(want)), with_data


class Coverage:
    """TCP sequence ranges seen per direction: a segment all of whose bytes
    were seen before is a copy (its FPDUs were decoded already); a
    retransmission of bytes lost before the capture point is not."""

    def __init__(self):
        self.seen = {}

    def is_copy(self, row):
        key = (row["ip.src"], row["tcp.srcport"], row["ip.dst"], row["tcp.dstport"])
        lo, n = int(row["tcp.seq"]), int(row["tcp.len"] or 0)
        ranges = self.seen.setdefault(key, [])
        copy = n > 0 and any(a <= lo and lo + n <= b for a, b in ranges)
        ranges.append((lo, lo + n))
        ranges.sort()
        merged = []
        for a, b in ranges:
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.seen[key] = merged
        return copy


def tcp_events(pcap):
    """frame -> connection, and connection -> frames tshark's TCP analysis flags as
    a retransmission or out of order (data segments only), from tshark alone;
    None when tshark is missing."""
    try:
        out = subprocess.run(["tshark", "-n", "-r", pcap, "-Y", "tcp", "-T", "fields", "-E", "separator=\t",
                              "-e", "frame.number", "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst",
                              "-e", "tcp.dstport", "-e", "tcp.len", "-e", "tcp.analysis.retransmission",
                              "-e", "tcp.analysis.out_of_order"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    conn_of, events = {}, {}
    for line in out.splitlines():
        f, src, sport, dst, dport, n, retx, ooo = (line.split("\t") + [""] * 8)[:8]
        conn = tuple(sorted([(src, sport), (dst, dport)]))
        conn_of[int(f)] = conn
        if int(n or 0) > 0 and (retx or ooo):
            events.setdefault(conn, []).append(int(f))
    return conn_of, events


def check_attribution(name, pcap, commands, errors):
    """A command is attributed TCP events (tcp_hole, retransmission) exactly when
    tshark flags a data segment of its connection between its capsule and its
    completion as a retransmission or out of order, and the first is the same frame."""
    oracle = tcp_events(pcap)
    if oracle is None:
        return "attribution not checked (no tshark)"
    conn_of, events = oracle
    agree = attributed = 0
    for c in commands:
        lo, hi = int(c["command_frame"]), int(c["response_frame"])
        inside = [f for f in events.get(conn_of.get(lo), []) if lo <= f < hi]
        ours = int(c["transport_events"]) > 0
        attributed += ours
        if bool(inside) != ours:
            errors.append(f"{name}: command frame {lo} (completion {hi}): transport events ours {c['transport_events']}, "
                          f"tshark's TCP analysis {inside}")
        elif ours and min(inside) != int(c["first_event_frame"]):
            errors.append(f"{name}: command frame {lo}: first transport event at frame {c['first_event_frame']} (ours), "
                          f"{min(inside)} (tshark)")
        else:
            agree += 1
    return f"attribution: {agree} of {len(commands)} commands agree with tshark's TCP analysis ({attributed} attributed)"


def run(rdmadiag, pcap_dir, name, errors):
    oracle, coverage = Oracle(), Coverage()
    for row in nc.read_tsv(os.path.join(pcap_dir, name + ".iwarp_nvme.tsv")):
        if coverage.is_copy(row) or not row["iwarp_rdma.opcode"]:
            continue
        if row["iwarp_mpa.marker_flag"] == "1":
            errors.append(f"{name}: MPA markers in use: the oracle cannot cut FPDUs")
            return None
        oracle.add_frame(row)
    with tempfile.TemporaryDirectory() as tmp:
        cmds = os.path.join(tmp, "c.tsv")
        out = subprocess.run([rdmadiag, "nvme", os.path.join(pcap_dir, name + ".pcap"), "--capsules", "-",
                              "--commands", cmds], capture_output=True, text=True)
        if out.returncode != 0:
            errors.append(f"{name}: rdmadiag nvme exited {out.returncode}: {out.stderr.strip()}")
            return None
        commands = nc.read_tsv(cmds)
    capsules = nc.read_tsv(out.stdout, is_path=False)
    if oracle.uncut:
        errors.append(f"{name}: {oracle.uncut} Send FPDUs in segments the oracle could not cut (not checked)")
    checked = check_capsules(name, oracle, capsules, errors)
    paired, with_data = check_commands(name, oracle, commands, errors)
    counts, want, kernel = nc.check_counts(name, pcap_dir, commands, errors)
    attribution = check_attribution(name, os.path.join(pcap_dir, name + ".pcap"), commands, errors)
    report = subprocess.run([rdmadiag, "nvme", os.path.join(pcap_dir, name + ".pcap"), "--json", "-"],
                            capture_output=True, text=True)
    nqns = nc.check_nqns(name, pcap_dir, json.loads(report.stdout) if report.returncode == 0 else {"queues": []}, errors)
    return (f"{name}: {checked} capsules field by field, {paired} commands paired with latency and data "
            f"({with_data} with RDMA data), I/O per size {dict(sorted(counts.items()))} vs fio {dict(sorted(want.items()))}, "
            f"kernel {kernel}; {attribution}; {nqns}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("pcap_dir")
    a = ap.parse_args()
    names = sorted(os.path.basename(p)[: -len(".iwarp_nvme.tsv")]
                   for p in glob.glob(os.path.join(a.pcap_dir, "*.iwarp_nvme.tsv")))
    if not names:
        print("nvme_iwarp_crosscheck: no NAME.iwarp_nvme.tsv in", a.pcap_dir)
        return 77
    errors = []
    for name in names:
        line = run(a.rdmadiag, a.pcap_dir, name, errors)
        if line:
            print(line)
    for e in errors[:50]:
        print("FAIL", e)
    if len(errors) > 50:
        print(f"... {len(errors) - 50} more")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
