#!/usr/bin/env python3
"""Issue 15, class 3 (corruption is not loss): a RoCEv2 packet whose UDP destination
port took the bit error.

usage: port_bit_error_check.py RDMADIAG PCAP

tests/pcaps/rxe_read_corrupt_port.pcap is cut from a fault-matrix boot (kernel
Soft-RoCE, ib_read_bw -s 16384, netem corrupt on the client's egress): a READ request
reached the wire with UDP destination port 4663 (4791 with bit 7 flipped). tshark
shows it as plain UDP, the server's kernel answered ICMP port unreachable, and the
requester re-issued the READ after the responder's NAK. rdmadiag used to call its 16
PSNs "lost before the capture point".

Checks, each against something rdmadiag did not compute:
* the damaged packets: UDP frames whose port is one bit off 4791 and whose ICRC,
  computed here in Python (derive_pcaps.py), holds with 4791 put back; the kernel
  answered each with ICMP port unreachable quoting its IPv4 ID (tshark's decode);
* rdmadiag reports each of them, and only them, as `icrc_bad` with `udp_dst_port`;
* no `psn_gap` of rdmadiag names a PSN that tshark (told the port) shows on the wire,
  in that direction and QP, before the gap's frame: a PSN the capture holds is not lost.
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from derive_pcaps import icrc_roce_v2, read_pcap  # noqa: E402

ROCE_PORT = 4791
PSN_MOD = 1 << 24


def fail(message):
    sys.exit(f"port_bit_error_check: {message}")


def damaged_port_frames(pcap):
    """{frame: (ip id, port)} for IPv4/UDP frames whose ICRC holds only with 4791 put back."""
    _, _, recs = read_pcap(pcap)
    found = {}
    for n, (_s, _u, _w, pkt) in enumerate(recs, 1):
        if len(pkt) < 34 or pkt[12:14] != b"\x08\x00" or pkt[23] != 17:
            continue
        ihl = (pkt[14] & 0x0F) * 4
        total = struct.unpack("!H", pkt[16:18])[0]
        ip, l4 = pkt[14:14 + ihl], pkt[14 + ihl:14 + total]
        port = struct.unpack("!H", l4[2:4])[0] if len(l4) >= 8 else ROCE_PORT
        if bin(port ^ ROCE_PORT).count("1") != 1 or len(l4) < 8 + 12 + 4:
            continue
        udp = l4[:2] + struct.pack("!H", ROCE_PORT) + l4[4:8]
        if icrc_roce_v2(ip, udp, l4[8:-4], False) == l4[-4:]:
            found[n] = (struct.unpack("!H", ip[4:6])[0], port)
    return found


def tshark(pcap, ports, fields):
    cmd = ["tshark", "-r", pcap, "-n", "--disable-protocol", "rpcordma", "-o", "infiniband.identify_payload:FALSE",
           "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for p in ports:
        cmd += ["-d", f"udp.port=={p},infiniband"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [dict(zip(fields, line.split("\t"))) for line in out.splitlines()]


def refused_ip_ids(pcap):
    """IPv4 IDs of the packets the kernel answered with ICMP port unreachable (the quoted header's ID)."""
    ids = set()
    for r in tshark(pcap, [], ["icmp.type", "icmp.code", "ip.id"]):
        if r["icmp.type"] == "3" and r["icmp.code"] == "3":
            ids.add(int(r["ip.id"].split(",")[-1], 16))
    return ids


def wire_psns(pcap, ports):
    """[(frame, src, dst, qp, psn)] of every BTH tshark decodes (not inside ICMP)."""
    rows = tshark(pcap, ports, ["frame.number", "ip.src", "ip.dst", "icmp.type", "infiniband.bth.destqp",
                                "infiniband.bth.psn"])
    return [(int(r["frame.number"]), r["ip.src"], r["ip.dst"], int(r["infiniband.bth.destqp"], 16),
             int(r["infiniband.bth.psn"])) for r in rows if r["infiniband.bth.psn"] and not r["icmp.type"]]


def main():
    rdmadiag, pcap = sys.argv[1], sys.argv[2]
    damaged = damaged_port_frames(pcap)
    if not damaged:
        fail(f"{pcap}: no RoCEv2 frame with a one-bit-off UDP port: the capture is not the regression")
    refused = refused_ip_ids(pcap)
    for n, (ip_id, port) in damaged.items():
        print(f"frame {n}: UDP port {port}, ICRC holds with 4791; kernel ICMP port unreachable: {ip_id in refused}")
        if ip_id not in refused:
            fail(f"frame {n} (IPv4 ID {ip_id:#06x}): the receiver's kernel sent no ICMP port unreachable for it")
    report = json.loads(subprocess.run([rdmadiag, "analyze", pcap, "--json", "-"], capture_output=True,
                                       text=True, check=True).stdout)
    flows = report["flows"]
    called = {a["frame"]: a for a in report["anomalies"] if a["kind"] == "icrc_bad" and "udp_dst_port" in a}
    if set(called) != set(damaged) or any(called[n]["udp_dst_port"] != damaged[n][1] for n in damaged):
        fail(f"icrc_bad with udp_dst_port at frames {sorted(called)}, damaged ports at {sorted(damaged)}")
    psns = wire_psns(pcap, sorted({port for _, port in damaged.values()}))
    gaps = [a for a in report["anomalies"] if a["kind"] == "psn_gap"]
    for g in gaps:
        f = flows[g["flow"]]
        named = {(g["expected_psn"] + k) % PSN_MOD for k in range(g["count"])}
        seen = [w for w in psns if w[0] < g["frame"] and w[1] == f["src"] and w[2] == f["dst"]
                and w[3] == g["dest_qp"] and w[4] in named]
        if seen:
            fail(f"psn_gap at frame {g['frame']} calls PSNs lost that tshark shows on the wire at frames "
                 f"{[w[0] for w in seen]}: {g['text']}")
    print(f"port_bit_error_check: {len(damaged)} damaged-port packet(s) reported as corrupt, "
          f"{len(gaps)} psn_gap(s), none naming a PSN on the wire")


if __name__ == "__main__":
    main()
