#!/usr/bin/env python3
"""NVMe-oF/RDMA decode and command pairing of `rdmadiag nvme` against tshark's
nvme / nvme-rdma decode, fio's JSON and the kernel's block statistics, on every
lab capture with an NVMe decode beside it (tests/pcaps/NAME.nvme.tsv, made by
tests/lab/regen-pcaps).

Field by field, for every capsule tshark decodes: opcode, CID, QID (tshark
binds a queue pair to its QID through the rdma_cm exchange, we through the
Connect command: two independent routes), namespace, SLBA, block count, the
keyed SGL (type, subtype, address, length, key), Fabrics type, Connect QID and
SQSIZE, property offset; for every completion: CID, SQID, SQ head, status, and
the command it completes. Capsules we decode that tshark does not must be the
first packet of a multi-packet SEND (tshark 4.0 decodes only SEND Only
capsules: in-capsule writes and the I/O queues' Connect are SEND First/Last),
or the completion of such a command (tshark leaves those undecoded too), or an
RDMA resend of a capsule (same QP and PSN as an earlier frame). Every
completion pairs with a command, except RDMA resends of completions.

Counts: I/O commands on the I/O queues per direction equal the kernel's read
and write I/O counts (NAME.blockstat.txt: /sys/block/nvme*/stat after the fio run; the path
device's counts under native multipath); per direction and size they equal fio's total_ios, except 4 KiB reads,
where the kernel's own reads (the partition scan after connect) come on top:
those must then be exactly the kernel's count minus fio's.

  nvme_crosscheck.py --rdmadiag BIN PCAP_DIR
Exit 0 all agree, 1 a disagreement, 77 (skip) no capture with an NVMe decode.
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import tempfile
import sys

SEND_FIRST = 0


def read_tsv(text_or_path, is_path=True):
    f = open(text_or_path) if is_path else None
    lines = f.read().splitlines() if f else text_or_path.splitlines()
    if f:
        f.close()
    return list(csv.DictReader(lines, delimiter="\t"))


def hexnum(s):
    return None if s in (None, "") else int(s, 16)


COMMAND_FIELDS = [  # (ours, tshark, how to read tshark's value)
    ("cid", "nvme.cmd.cid", hexnum), ("opcode", "nvme.cmd.opc", hexnum), ("nsid", "nvme.cmd.nsid", hexnum),
    ("slba", "nvme.cmd.slba", hexnum), ("blocks", "nvme.cmd.nlb", int),
    ("sgl_type", "nvme.cmd.sgl.type", hexnum), ("sgl_subtype", "nvme.cmd.sgl.subtype", hexnum),
    ("sgl_address", "nvme.cmd.sgl1.addr", hexnum), ("sgl_length", "nvme.cmd.sgl1.len", int),
    ("sgl_key", "nvme.cmd.sgl1.key", hexnum),
]
FABRICS_FIELDS = [
    ("cid", "nvme.fabrics.cmd.cid", hexnum), ("fctype", "nvme.fabrics.cmd.fctype", hexnum),
    ("connect_qid", "nvme.fabrics.cmd.connect.qid", int), ("sqsize", "nvme.fabrics.cmd.connect.sqsize", int),
    ("property_offset", "nvme.fabrics.cmd.prop_get_set.offset", hexnum),
    ("sgl_type", "nvme.cmd.sgl.type", hexnum), ("sgl_length", "nvme.cmd.sgl1.len", int),
    ("sgl_key", "nvme.cmd.sgl1.key", hexnum),
]
RESPONSE_FIELDS = [("cid", "nvme.cqe.cid", hexnum), ("sqid", "nvme.cqe.sqid", hexnum), ("sqhd", "nvme.cqe.sqhd", hexnum)]


def ours_value(row, field):
    v = row.get(field, "")
    return None if v == "" else int(v, 0)


def compare(frame, ours, tshark, fields, errors):
    for mine, theirs, conv in fields:
        t = tshark.get(theirs, "")
        if t == "":
            continue
        tv, ov = conv(t), ours_value(ours, mine)
        if tv != ov:
            errors.append(f"frame {frame}: {mine} ours {ov} tshark {tv} ({theirs})")


def resent_frames(frames):
    """Frames whose (destination, QPN, PSN) an earlier frame of the same opcode
    already had: RDMA resends (rxe's retransmission timer fires even on
    loss-free lab runs, docs/lab.md)."""
    seen, resent = set(), set()
    for r in frames:
        if not r["infiniband.bth.psn"]:
            continue
        key = (r["ip.dst"], r["infiniband.bth.destqp"], r["infiniband.bth.psn"], r["infiniband.bth.opcode"])
        if key in seen:
            resent.add(int(r["frame.number"]))
        seen.add(key)
    return resent


def check_capsules(name, ours, tshark, send_opcode, resent, errors):
    """Every capsule tshark decodes, field by field; our extra ones are SEND First packets."""
    by_frame = {int(r["frame"]): r for r in ours}
    seen = set()
    compared = 0
    for t in tshark:
        f = int(t["frame.number"])
        seen.add(f)
        o = by_frame.get(f)
        if o is None:
            errors.append(f"{name}: frame {f}: tshark decodes a capsule, rdmadiag none")
            continue
        is_cmd = t["nvme.cmd.opc"] != "" or t["nvme.fabrics.cmd.opc"] != ""
        if o["kind"] != ("command" if is_cmd else "response"):
            errors.append(f"{name}: frame {f}: kind ours {o['kind']}")
            continue
        if is_cmd and int(t["nvme-rdma.cmd.qid"], 16) != ours_value(o, "qid"):
            errors.append(f"{name}: frame {f}: qid ours {o['qid']} tshark {t['nvme-rdma.cmd.qid']}")
        if is_cmd:
            compare(f, o, t, FABRICS_FIELDS if t["nvme.fabrics.cmd.opc"] else COMMAND_FIELDS, errors)
        else:
            compare(f, o, t, RESPONSE_FIELDS, errors)
            if hexnum(t["nvme.cqe.status"]) >> 1 != ours_value(o, "status"):
                errors.append(f"{name}: frame {f}: status ours {o['status']} tshark {t['nvme.cqe.status']}")
            tcmd = t["nvme.cmd_pkt"] or t["nvme.fabrics.cmd_pkt"]
            if tcmd and int(tcmd) != ours_value(o, "paired_frame"):
                errors.append(f"{name}: frame {f}: completes frame {o['paired_frame']} (ours), {tcmd} (tshark)")
        compared += 1
    extra = sorted(f for f in by_frame if f not in seen)
    extra_commands = {f for f in extra if by_frame[f]["kind"] == "command" and send_opcode.get(f) == SEND_FIRST}
    for f in extra:
        if f in extra_commands:
            continue
        if by_frame[f]["kind"] == "response" and ours_value(by_frame[f], "paired_frame") in extra_commands:
            continue  # tshark leaves the completion of a command it did not decode undecoded too
        if f in resent:
            continue  # tshark does not decode an RDMA resend of a capsule
        errors.append(f"{name}: frame {f}: rdmadiag decodes a capsule tshark does not (not a SEND First command or its completion)")
    for f, o in by_frame.items():
        # Every completion pairs with its command, unless it is an RDMA resend of one that did.
        if o["kind"] == "response" and not o["paired_frame"] and f not in resent:
            errors.append(f"{name}: frame {f}: completion of CID {o['cid']} pairs with no command")
    return compared, len(extra)


def io_counts(commands):
    """(opcode, bytes) -> completed commands on I/O queues (a capsule RDMA resent counts once)."""
    counts = {}
    for r in commands:
        if r["qid"] in ("0", "unknown") or r["command"] not in ("read", "write"):
            continue
        key = ("0x02" if r["command"] == "read" else "0x01", int(r["blocks"]) * 512)
        counts[key] = counts.get(key, 0) + 1
    return counts


def check_counts(name, pcap_dir, commands, errors):
    counts = io_counts(commands)
    reads = sum(v for (op, _), v in counts.items() if op == "0x02")
    writes = sum(v for (op, _), v in counts.items() if op == "0x01")
    stat_path = os.path.join(pcap_dir, name + ".blockstat.txt")
    kernel = None
    if os.path.exists(stat_path):
        # "name: stat fields" per device; the path devices (nvmeXcYnZ) hold the
        # counts under native multipath (Linux 6.1 does not count on the head).
        devices = {l.split(":")[0]: [int(v) for v in l.split(":")[1].split()] for l in open(stat_path) if ":" in l}
        paths = [v for k, v in devices.items() if "c" in k[4:]] or list(devices.values())
        kernel = (sum(v[0] for v in paths), sum(v[4] for v in paths))
        if (reads, writes) != kernel:
            errors.append(f"{name}: I/O commands read/write ours {reads}/{writes}, kernel block stat {kernel[0]}/{kernel[1]}")
    fio = json.load(open(os.path.join(pcap_dir, name + ".fio.json")))
    want = {}
    for job in fio["jobs"]:
        bs = {"4k": 4096, "128k": 131072}[job["job options"]["bs"]]
        want[("0x02", bs)] = want.get(("0x02", bs), 0) + job["read"]["total_ios"]
        want[("0x01", bs)] = want.get(("0x01", bs), 0) + job["write"]["total_ios"]
    for key, n in sorted(want.items()):
        got = counts.get(key, 0)
        extra_ok = key == ("0x02", 4096) and kernel is not None and got - n == kernel[0] - sum(
            v for (op, _), v in want.items() if op == "0x02")
        if got != n and not extra_ok:
            errors.append(f"{name}: {key[0]} of {key[1]} bytes: ours {got}, fio {n}")
    return counts, want, kernel


REQUEST_OPCODES = set(range(0, 13)) | {0x16, 0x17}  # RC SEND, RDMA WRITE, RDMA READ request, SEND with Invalidate (IBA table 38)
READ_RESPONSE_OPCODES = {13, 14, 15, 16}  # first, middle, last, only
PMTU = 1024                            # rxe over a 1500-byte Ethernet MTU


def transport_events(frames):
    """(destination, QPN) -> frames with an event, from tshark's fields alone: a
    request whose PSN is not the next expected one (a gap, or a resend), a READ
    response middle/last packet whose PSN does not follow the previous one, and
    a NAK or RNR NAK (AETH syndrome bits 6:5 = 11b / 01b)."""
    expected, events, last_read_psn = {}, {}, {}
    for r in frames:
        if not r["infiniband.bth.opcode"]:
            continue
        f, op = int(r["frame.number"]), int(r["infiniband.bth.opcode"])
        qp = (r["ip.dst"], int(r["infiniband.bth.destqp"], 16))
        psn = int(r["infiniband.bth.psn"])
        if op in REQUEST_OPCODES:
            if qp in expected and psn != expected[qp]:
                events.setdefault(qp, []).append(f)
            span = -(-int(r["infiniband.reth.dmalen"] or 0) // PMTU) if op == 12 else 1
            if qp not in expected or ((psn - expected[qp]) & 0xFFFFFF) < 0x800000:
                expected[qp] = (psn + max(span, 1)) & 0xFFFFFF
        if op in READ_RESPONSE_OPCODES:
            # Inside one READ's response the PSNs run consecutively.
            if op in (14, 15) and qp in last_read_psn and psn != (last_read_psn[qp] + 1) & 0xFFFFFF:
                events.setdefault(qp, []).append(f)
            last_read_psn[qp] = psn
        syn = r["infiniband.aeth.syndrome"]
        if syn and ((int(syn, 16) if syn.startswith("0x") else int(syn)) >> 5) & 3 in (1, 3):
            events.setdefault(qp, []).append(f)
    return events


def cause_kinds(frames):
    """(destination, QPN) -> [(frame, kind)] from tshark's fields alone, kinds as
    the transport analysis names them: a request whose PSN is ahead of the next
    expected one is a psn_gap, behind it a retransmission (a resend); a READ
    response whose (QP, PSN) an earlier response had is a retransmission, a
    middle/last response more than one PSN past the highest seen a psn_gap (a
    response to a READ re-requested from a lost PSN on fills the hole: neither)."""
    expected, high, seen, out = {}, {}, set(), {}
    for r in frames:
        if not r["infiniband.bth.opcode"]:
            continue
        f, op = int(r["frame.number"]), int(r["infiniband.bth.opcode"])
        qp, psn = (r["ip.dst"], int(r["infiniband.bth.destqp"], 16)), int(r["infiniband.bth.psn"])
        if op in REQUEST_OPCODES:
            ahead = (psn - expected.get(qp, psn)) & 0xFFFFFF
            if ahead:
                out.setdefault(qp, []).append((f, "psn_gap" if ahead < 0x800000 else "retransmission"))
            span = -(-int(r["infiniband.reth.dmalen"] or 0) // PMTU) if op == 12 else 1
            if ahead < 0x800000:
                expected[qp] = (psn + max(span, 1)) & 0xFFFFFF
        if op in READ_RESPONSE_OPCODES:
            past = (psn - high.get(qp, psn)) & 0xFFFFFF
            if (qp, psn) in seen:
                out.setdefault(qp, []).append((f, "retransmission"))
            elif 1 < past < 0x800000 and op in (14, 15):
                out.setdefault(qp, []).append((f, "psn_gap"))
            if qp not in high or 0 < past < 0x800000:
                high[qp] = psn
            seen.add((qp, psn))
    return out


def nak_frames(frames):
    """kind -> (destination, QPN) -> frames whose AETH syndrome is a NAK (bits 6:5 = 11b) or RNR NAK (01b)."""
    out = {"nak": {}, "rnr_nak": {}}
    for r in frames:
        syn = r.get("infiniband.aeth.syndrome", "")
        if not syn or not r["infiniband.bth.destqp"]:
            continue
        bits = ((int(syn, 16) if syn.startswith("0x") else int(syn)) >> 5) & 3
        kind = {3: "nak", 1: "rnr_nak"}.get(bits)
        if kind:
            out[kind].setdefault((r["ip.dst"], int(r["infiniband.bth.destqp"], 16)), []).append(int(r["frame.number"]))
    return out


def check_attribution(name, commands, frames, errors):
    """A command is attributed transport events exactly when the independent
    event list has one on its queue pairs between its capsule and its completion,
    and the first of them is the same frame."""
    if not frames or "infiniband.bth.psn" not in frames[0]:
        return "attribution not checked (no RoCE fields)"
    events = transport_events(frames)
    qp_of = {int(r["frame.number"]): (r["ip.dst"], int(r["infiniband.bth.destqp"], 16))
             for r in frames if r["infiniband.bth.destqp"]}
    naks = nak_frames(frames)
    kinds = cause_kinds(frames)
    agree = attributed = kinds_checked = 0
    for c in commands:
        lo, hi = int(c["command_frame"]), int(c["response_frame"])
        qps = {qp_of.get(lo), qp_of.get(hi)}
        inside = [f for qp in qps for f in events.get(qp, []) if lo <= f < hi]
        oracle = bool(inside)
        ours = int(c["transport_events"]) > 0
        causes = dict(kv.split("=") for kv in c["causes"].split(";") if kv)
        for kind in ("nak", "rnr_nak"):
            want = sum(1 for qp in qps for f in naks[kind].get(qp, []) if lo <= f < hi)
            if int(causes.get(kind, 0)) != want:
                errors.append(f"{name}: command frame {lo}: {kind} ours {causes.get(kind, 0)}, AETH syndromes {want}")
        for kind in ("psn_gap", "retransmission", "duplicate", "out_of_order"):
            want = sum(1 for qp in qps for f, k in kinds.get(qp, []) if k == kind and lo <= f < hi)
            if int(causes.get(kind, 0)) != want:
                errors.append(f"{name}: command frame {lo}: {kind} ours {causes.get(kind, 0)}, tshark's PSNs {want}")
        kinds_checked += any(int(v) for v in causes.values())
        if oracle and ours and min(inside) != int(c["first_event_frame"]):
            errors.append(f"{name}: command frame {lo}: first transport event at frame {c['first_event_frame']} (ours), "
                          f"{min(inside)} (independent list)")
        attributed += ours
        if oracle != ours:
            errors.append(f"{name}: command frame {lo} (completion {hi}): transport events ours "
                          f"{c['transport_events']}, independent list {'some' if oracle else 'none'}")
        else:
            agree += 1
    return (f"attribution: {agree} of {len(commands)} commands agree ({attributed} attributed); per kind (psn_gap, "
            f"retransmission, duplicate, out_of_order from tshark's PSNs; nak, rnr_nak from its AETHs) on every command, "
            f"{kinds_checked} with causes")


WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY, READ_REQUEST = 6, 7, 8, 10, 12


def keyed_commands(nvme_rows):
    """tshark's own pairing (the completion's nvme.cmd_pkt) of commands with a
    keyed SGL: command frame -> (command row, completion row)."""
    by_frame = {int(r["frame.number"]): r for r in nvme_rows}
    out = {}
    for r in nvme_rows:
        cmd = r["nvme.cmd_pkt"] or r["nvme.fabrics.cmd_pkt"]
        if not cmd or int(cmd) not in by_frame:
            continue
        c = by_frame[int(cmd)]
        if hexnum(c["nvme.cmd.sgl.type"]) == 4:
            out[int(cmd)] = (c, r)
    return out


def data_oracle(command, completion, frames):
    """The RDMA data of one keyed-SGL command from tshark's IB fields alone:
    operations are RETH packets to the host naming the SGL's key and an address
    inside it, between the capsule and the completion; their other packets are
    the WRITE middle/last (on the host's QP) or READ responses (on the
    controller's QP) whose PSN lies in [PSN, PSN + ceil(length / PMTU))."""
    lo, hi = int(command["frame.number"]), int(completion["frame.number"])
    host, ctrl, ctrl_qp = command["ip.src"], command["ip.dst"], int(command["infiniband.bth.destqp"], 16)
    key, addr, length = hexnum(command["nvme.cmd.sgl1.key"]), hexnum(command["nvme.cmd.sgl1.addr"]), int(command["nvme.cmd.sgl1.len"])
    assert int(frames[lo]["frame.number"]) == lo + 1, "tshark.tsv: one row per frame, in order"
    window = [r for r in frames[lo:hi - 1] if r["infiniband.bth.opcode"]]
    ops, data = [], []
    for r in window:
        op = int(r["infiniband.bth.opcode"])
        if op in (WRITE_FIRST, WRITE_ONLY, READ_REQUEST) and r["ip.dst"] == host and r["infiniband.reth.r_key"]:
            va = hexnum(r["infiniband.reth.va"])
            if hexnum(r["infiniband.reth.r_key"]) == key and addr <= va < addr + max(length, 1):
                ops.append((op, int(r["infiniband.bth.psn"]), int(r["infiniband.reth.dmalen"]), va,
                            int(r["infiniband.bth.destqp"], 16)))
                data.append(r)
    for r in window:
        op, psn = int(r["infiniband.bth.opcode"]), int(r["infiniband.bth.psn"])
        qp = int(r["infiniband.bth.destqp"], 16)
        for kind, start, dmalen, _, host_qp in ops:
            n = max(-(-dmalen // PMTU), 1)
            inside = 0 <= (psn - start) & 0xFFFFFF < n
            if kind == WRITE_FIRST and op in (WRITE_MIDDLE, WRITE_LAST) and r["ip.dst"] == host and qp == host_qp and inside:
                data.append(r)
            if kind == READ_REQUEST and op in READ_RESPONSE_OPCODES and r["ip.dst"] == ctrl and qp == ctrl_qp and inside:
                data.append(r)
    if not data:
        return None
    first = min(data, key=lambda r: int(r["frame.number"]))
    last = max(data, key=lambda r: int(r["frame.number"]))
    return {"data_operations": len(ops), "data_moved_bytes": max(va + d for _, _, d, va, _ in ops) - addr,
            "data_first_frame": int(first["frame.number"]), "data_last_frame": int(last["frame.number"]),
            "data_transfer_us": (float(last["frame.time_relative"]) - float(first["frame.time_relative"])) * 1e6}


def check_data(name, commands, nvme_rows, frames, errors):
    """Every keyed-SGL command tshark pairs: its RDMA data (operations, bytes,
    first and last frame, transfer time) and the key a SEND with Invalidate
    completing it names (IETH) against ours."""
    ours = {int(c["command_frame"]): c for c in commands}
    agree = invalidates = 0
    keyed = keyed_commands(nvme_rows)
    for f, (cmd, cqe) in sorted(keyed.items()):
        o = ours.get(f)
        if o is None:
            errors.append(f"{name}: keyed command frame {f}: not among our completed commands")
            continue
        want = data_oracle(cmd, cqe, frames) or {"data_operations": 0, "data_moved_bytes": 0}
        bad = [k for k, v in want.items() if k != "data_transfer_us" and int(o[k] or 0) != v]
        if "data_transfer_us" in want and abs(float(o["data_transfer_us"]) - want["data_transfer_us"]) > 0.01:
            bad.append("data_transfer_us")
        ieth = cqe["infiniband.ieth"].split(",")[0]
        if (int(ieth, 16) if ieth else None) != (int(o["invalidated_key"], 16) if o["invalidated_key"] else None):
            bad.append("invalidated_key")
        invalidates += bool(ieth)
        if bad:
            errors.append(f"{name}: command frame {f}: data {', '.join(f'{k} ours {o[k]} independent {want.get(k, ieth)}' for k in bad)}")
        else:
            agree += 1
    return f"data: {agree} of {len(keyed)} keyed-SGL commands agree ({invalidates} completed by SEND with Invalidate)"


SEND_ONLY, SEND_ONLY_INVALIDATE = 4, 23
TIMELINE_BINS, FIRST_BIN_NS = 128, 1_000_000


def queue_events(nvme_rows, frames):
    """Controller (address, QPN) -> [(frame, ns, +1 command / -1 completion)]
    from tshark's fields alone: a command is a SEND First/Only to a queue pair
    tshark's nvme-rdma decode names a command queue pair (nvme-rdma.cmd.qid), a
    completion a 16-byte SEND Only (with Invalidate) to the host queue pair
    tshark pairs with it (nvme.cmd_pkt); RDMA resends (same QP and PSN) once."""
    rows = {int(r["frame.number"]): r for r in nvme_rows}
    ctrl_qps, host_to_ctrl = set(), {}
    for r in nvme_rows:
        if r["nvme-rdma.cmd.qid"] and (r["nvme.cmd.opc"] or r["nvme.fabrics.cmd.opc"]):
            ctrl_qps.add((r["ip.dst"], r["infiniband.bth.destqp"]))
        cmd = r["nvme.cmd_pkt"] or r["nvme.fabrics.cmd_pkt"]
        if cmd and int(cmd) in rows:
            c = rows[int(cmd)]
            host_to_ctrl[(r["ip.dst"], r["infiniband.bth.destqp"])] = (c["ip.dst"], c["infiniband.bth.destqp"])
    events, seen = {}, set()
    for r in frames:
        if not r["infiniband.bth.opcode"]:
            continue
        op, qp = int(r["infiniband.bth.opcode"]), (r["ip.dst"], r["infiniband.bth.destqp"])
        if (qp, r["infiniband.bth.psn"]) in seen:
            continue
        ns = round(float(r["frame.time_relative"]) * 1e9)
        if qp in ctrl_qps and op in (SEND_FIRST, SEND_ONLY):
            events.setdefault(qp, []).append((int(r["frame.number"]), ns, 1))
        elif qp in host_to_ctrl and op in (SEND_ONLY, SEND_ONLY_INVALIDATE) and r["data.len"] == "16":
            events.setdefault(host_to_ctrl[qp], []).append((int(r["frame.number"]), ns, -1))
        else:
            continue
        seen.add((qp, r["infiniband.bth.psn"]))
    return events


def timeline_oracle(events):
    """Most outstanding, completions per bin: bins of 1 ms doubled until 128 hold the span."""
    start, end = events[0][1], events[-1][1]
    width = FIRST_BIN_NS
    while (end - start) // width >= TIMELINE_BINS:
        width *= 2
    n = (end - start) // width + 1
    depth_bins, done_bins = [0] * n, [0] * n
    depth, last_bin = 0, 0
    for _, ns, step in events:
        b = (ns - start) // width
        for i in range(last_bin + 1, b + 1):
            depth_bins[i] = depth  # carried into bins without an event
        last_bin = b
        depth = max(depth + step, 0)
        depth_bins[b] = max(depth_bins[b], depth)
        done_bins[b] += step < 0
    return width, depth_bins, done_bins


def check_queues(name, report, nvme_rows, frames, errors):
    """Per queue: the most commands outstanding and the timeline (bin width,
    most outstanding and completions per bin) against the queue events from
    tshark's fields."""
    events = queue_events(nvme_rows, frames)
    oracle = {ev[0][0]: ev for ev in events.values() if ev[0][2] > 0}
    agree = undecoded = 0
    for q in report["queues"]:
        ev = oracle.get(q["first_frame"])
        if ev is None and q["commands"] == 1:
            undecoded += 1  # only its Connect, a SEND First: tshark decodes no command on the queue pair
            continue
        if ev is None:
            errors.append(f"{name}: queue {q['qid']} from frame {q['first_frame']}: no queue pair in tshark's decode starts there")
            continue
        width, depth, done = timeline_oracle(ev)
        t = q["timeline"]
        got = (round(t["bin_us"] * 1e3), t["max_outstanding"], t["completions"], q["max_outstanding"])
        want = (width, depth, done, max(depth))
        if got != want:
            errors.append(f"{name}: queue {q['qid']} from frame {q['first_frame']}: timeline ours (bin ns, most outstanding, "
                          f"completions, max) {got}, independent {want}")
        else:
            agree += 1
    return (f"queues: {agree} of {len(report['queues'])} timelines agree"
            f"{f' ({undecoded} with only a Connect tshark does not decode)' if undecoded else ''}")


def size_class(n):
    c, upper = 0, 512
    while c + 1 < 13 and n > upper:
        c, upper = c + 1, upper * 2
    return c


def check_sizes(name, report, nvme_rows, errors):
    """Latency by I/O size class against tshark's frame times of the commands
    tshark pairs: count, min, max exactly; p50/p90/p99 (nearest rank) within
    the histogram's bucket (ours is the bucket's upper bound: at most 2^(1/4)
    above). Classes with commands tshark does not decode (4 KiB in-capsule
    writes: SEND First) are left out."""
    rows = {int(r["frame.number"]): r for r in nvme_rows}
    lat = {}
    for r in nvme_rows:
        c = rows.get(int(r["nvme.cmd_pkt"])) if r["nvme.cmd_pkt"] else None
        if not c or c["nvme-rdma.cmd.qid"] in ("", "0x0000") or hexnum(c["nvme.cmd.opc"]) not in (1, 2):
            continue
        key = ("read" if hexnum(c["nvme.cmd.opc"]) == 2 else "write", size_class(int(c["nvme.cmd.nlb"]) * 512))  # tshark shows the count
        lat.setdefault(key, []).append((float(r["frame.time_relative"]) - float(c["frame.time_relative"])) * 1e6)
    checked = 0
    for row in report["by_size"]:
        key = (row["command"], size_class(row["size_le"] or 1 << 40))
        want = sorted(lat.get(key, []))
        if len(want) != row["completed"]:
            continue
        l = row["latency_us"]
        bad = [] if abs(l["min"] - want[0]) < 0.01 and abs(l["max"] - want[-1]) < 0.01 else ["min/max"]
        for p in (50, 90, 99):
            exact = want[max(-(-p * len(want) // 100), 1) - 1]
            if not exact - 0.01 <= l[f"p{p}_le"] <= exact * 2 ** 0.25 + 0.01:
                bad.append(f"p{p} ours {l[f'p{p}_le']} exact {exact}")
        if bad:
            errors.append(f"{name}: {key}: latency {bad}")
        checked += 1
    return f"by size: {checked} of {len(report['by_size'])} classes checked (fully decoded by tshark), agree unless listed"


def parse_prometheus(text):
    """name -> [(labels dict, value)] from the text exposition format."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        labels = dict(kv.split("=", 1) for kv in rest.rstrip("}").split(",") if kv) if rest else {}
        out.setdefault(name, []).append(({k: v.strip('"') for k, v in labels.items()}, float(value)))
    return out


def check_outputs(name, pcap_dir, report, metrics, html, nvme_rows, frames, errors):
    """--csv, --metrics-file and --html against independent views: the CSV rows
    are what the data check above compared with tshark (same rows as
    --commands); the metrics' completed I/O reads/writes against the kernel's
    block statistics and each latency histogram's count; queue max outstanding
    against the queue events from tshark's fields; the HTML shows one histogram
    per command kind with completions and the slowest commands with the
    latency tshark's frame times give (those tshark pairs)."""
    m = parse_prometheus(metrics)
    done = {(l["queue_kind"], l["command"]): v for l, v in m.get("rdmadiag_nvme_completed_total", [])}
    counts = {(l["queue_kind"], l["command"]): v for l, v in m.get("rdmadiag_nvme_command_latency_seconds_count", [])}
    if done != counts:
        errors.append(f"{name}: metrics: histogram counts {counts} != completed {done}")
    stat_path = os.path.join(pcap_dir, name + ".blockstat.txt")
    if os.path.exists(stat_path):
        devices = {l.split(":")[0]: [int(v) for v in l.split(":")[1].split()] for l in open(stat_path) if ":" in l}
        paths = [v for k, v in devices.items() if "c" in k[4:]] or list(devices.values())
        kernel = (sum(v[0] for v in paths), sum(v[4] for v in paths))
        if (done.get(("io", "read"), 0), done.get(("io", "write"), 0)) != kernel:
            errors.append(f"{name}: metrics: completed io read/write {done.get(('io', 'read'))}/{done.get(('io', 'write'))}, kernel {kernel}")
        # IOPS counts I/O commands only, as the kernel does: not the Fabrics Connect, not admin commands.
        ios = sum(round(q["iops"] * q["active_s"]) for q in report["queues"])
        if ios != sum(kernel):
            errors.append(f"{name}: queues: iops x active_s gives {ios} I/O commands, kernel block stat {sum(kernel)}")
    # A kind none of whose commands tshark pairs with a completion (the admin
    # Asynchronous Event Request: no nvme.cqe_pkt) has no latency: null, not 0 us.
    for row in report["by_command"]:
        if row["completed"] == 0 and row["latency_us"] is not None:
            errors.append(f"{name}: {row['queue_kind']} {row['command']}: none completed, latency_us {row['latency_us']} (want null)")
    depth = {ev[0][0]: max(timeline_oracle(ev)[1]) for ev in queue_events(nvme_rows, frames).values() if ev[0][2] > 0}
    for l, v in m.get("rdmadiag_nvme_queue_max_outstanding", []):
        f = int(l["first_frame"])
        if f in depth and depth[f] != v:
            errors.append(f"{name}: metrics: queue from frame {f}: max outstanding {v}, tshark's fields {depth[f]}")
    rows = {int(r["frame.number"]): r for r in nvme_rows}
    tshark_latency = {}
    for r in nvme_rows:
        cmd = r["nvme.cmd_pkt"] or r["nvme.fabrics.cmd_pkt"]
        if cmd and int(cmd) in rows:
            tshark_latency[int(cmd)] = (float(r["frame.time_relative"]) - float(rows[int(cmd)]["frame.time_relative"])) * 1e6
    shown = 0
    for c in report["slowest"]:
        cell = f'<td data-v="{c["command_frame"]}">'
        if cell not in html:
            errors.append(f"{name}: html: slowest command frame {c['command_frame']} not shown")
        if c["command_frame"] in tshark_latency and abs(tshark_latency[c["command_frame"]] - c["latency_us"]) > 0.01:
            errors.append(f"{name}: slowest command frame {c['command_frame']}: latency {c['latency_us']}, tshark's frame times "
                          f"{tshark_latency[c['command_frame']]}")
        shown += c["command_frame"] in tshark_latency
    plots = html.count('<svg xmlns="http://www.w3.org/2000/svg"')  # one per plot (its clip area is a nested svg)
    want = sum(1 for r in report["by_command"] if r["completed"]) + (1 if report["queues"] else 0)
    if plots != want:
        errors.append(f"{name}: html: {plots} plots, want {want} (a histogram per command kind with completions, a depth plot)")
    return f"outputs: metrics io completions = kernel, html {plots} plots, {shown} of {len(report['slowest'])} slowest checked against tshark"


def lab_setting(pcap_dir, script, name):
    """NAME=value from a lab script (what the lab gave nvmet / nvme connect)."""
    for line in open(os.path.join(pcap_dir, "..", "lab", script)):
        if line.startswith(name + "="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def check_nqns(name, pcap_dir, report, errors):
    """Every queue's Connect data (in the capsule on I/O queues; read by RDMA
    READ on the admin queue) names the NQNs the lab scripts configured."""
    want = (lab_setting(pcap_dir, "nvme-target", "nqn"), lab_setting(pcap_dir, "nvme-host", "hostnqn"))
    named = 0
    for q in report["queues"]:
        got = (q.get("subnqn"), q.get("hostnqn"))
        if got == (None, None):
            errors.append(f"{name}: queue {q['qid']} from frame {q['first_frame']}: no NQNs")
        elif got != want:
            errors.append(f"{name}: queue {q['qid']} from frame {q['first_frame']}: NQNs {got}, lab scripts {want}")
        else:
            named += 1
    return f"NQNs: {named} of {len(report['queues'])} queues (admin ones by RDMA READ) name the lab's"


def check_iwarp(rdmadiag, pcap_dir, errors):
    """NVMe over iWARP captures (a fio run, no RoCE NVMe decode beside them):
    `rdmadiag nvme` counts the TCP segments with data on port 4420 exactly as
    tshark's tcp fields do (the capsules: nvme_iwarp_crosscheck.py)."""
    lines = []
    for fio in sorted(glob.glob(os.path.join(pcap_dir, "*.fio.json"))):
        name = os.path.basename(fio)[: -len(".fio.json")]
        if os.path.exists(os.path.join(pcap_dir, name + ".nvme.tsv")):
            continue
        frames = read_tsv(os.path.join(pcap_dir, name + ".tshark.tsv"))
        want = sum(1 for r in frames if r.get("tcp.len") not in (None, "", "0") and "4420" in (r["tcp.srcport"], r["tcp.dstport"]))
        out = subprocess.run([rdmadiag, "nvme", os.path.join(pcap_dir, name + ".pcap"), "--json", "-"], capture_output=True, text=True)
        got = json.loads(out.stdout)["totals"]["iwarp_segments"] if out.returncode == 0 else None
        if got != want:
            errors.append(f"{name}: iWARP segments on port 4420 ours {got}, tshark {want}")
        lines.append(f"{name}: {got} iWARP segments on port 4420 (tshark: {want})")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rdmadiag", required=True)
    ap.add_argument("pcap_dir")
    a = ap.parse_args()
    decodes = sorted(glob.glob(os.path.join(a.pcap_dir, "*.nvme.tsv")))
    if not decodes:
        print("nvme_crosscheck: no NAME.nvme.tsv in", a.pcap_dir)
        return 77
    errors = []
    for tsv in decodes:
        name = os.path.basename(tsv)[: -len(".nvme.tsv")]
        pcap = os.path.join(a.pcap_dir, name + ".pcap")
        with tempfile.TemporaryDirectory() as tmp:
            cmds, csv_path, prom, html_path = (os.path.join(tmp, f) for f in ("c.tsv", "c.csv", "m.prom", "r.html"))
            out = subprocess.run([a.rdmadiag, "nvme", pcap, "--capsules", "-", "--commands", cmds, "--csv", csv_path,
                                  "--metrics-file", prom, "--html", html_path], capture_output=True, text=True)
            if out.returncode != 0:
                errors.append(f"{name}: rdmadiag nvme exited {out.returncode}: {out.stderr.strip()}")
                continue
            commands = read_tsv(cmds)
            commands_csv = list(csv.DictReader(open(csv_path)))
            metrics, html = open(prom).read(), open(html_path).read()
        if commands_csv != commands:
            errors.append(f"{name}: --csv rows differ from --commands rows")
        report = subprocess.run([a.rdmadiag, "nvme", pcap, "--json", "-"], capture_output=True, text=True)
        report = json.loads(report.stdout) if report.returncode == 0 else {"queues": [], "by_size": []}
        ours = read_tsv(out.stdout, is_path=False)
        frames = read_tsv(os.path.join(a.pcap_dir, name + ".tshark.tsv"))
        send_opcode = {int(r["frame.number"]): int(r["infiniband.bth.opcode"]) for r in frames if r["infiniband.bth.opcode"]}
        compared, extra = check_capsules(name, ours, read_tsv(tsv), send_opcode, resent_frames(frames), errors)
        counts, want, kernel = check_counts(name, a.pcap_dir, commands, errors)
        attributed = check_attribution(name, commands, frames, errors)
        data = check_data(name, commands_csv, read_tsv(tsv), frames, errors)
        queues = check_queues(name, report, read_tsv(tsv), frames, errors)
        sizes = check_sizes(name, report, read_tsv(tsv), errors)
        nqns = check_nqns(name, a.pcap_dir, report, errors)
        outputs = check_outputs(name, a.pcap_dir, report, metrics, html, read_tsv(tsv), frames, errors)
        print(f"nvme_crosscheck: {name}: {compared} capsules agree with tshark field by field, {extra} more "
              f"(SEND First commands, their completions, RDMA resends) decoded by rdmadiag only; I/O commands {dict(sorted(counts.items()))}, "
              f"fio {dict(sorted(want.items()))}, kernel read/write {kernel}; {attributed}; {data}; {queues}; {sizes}; {outputs}; {nqns}")
    for line in check_iwarp(a.rdmadiag, a.pcap_dir, errors):
        print("nvme_crosscheck:", line)
    for e in errors[:50]:
        print("nvme_crosscheck: MISMATCH", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
