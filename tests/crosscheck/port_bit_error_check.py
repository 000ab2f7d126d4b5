#!/usr/bin/env python3
"""Issue 15, class 3 (corruption is not loss): a packet whose UDP or TCP port took the
bit error.

usage: port_bit_error_check.py RDMADIAG PCAP

RoCEv2 (UDP):

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

iWARP (TCP): tests/pcaps/siw_send_corrupt_port.pcap, cut from the siw corrupt-client
boot (ib_send_lat -s 2048): a segment's source port 53860 arrived as 49764 (bit 12);
rdmadiag used to call its 1448 bytes "lost before the capture point".
* the damaged segments: TCP checksum bad as captured (our Python sum and tshark's
  tcp.checksum.status) and good with one port bit flipped back;
* each is the damaged copy rdmadiag names in a `tcp_hole` with `fill` `corruption`,
  and that hole's bytes are the ones the damaged segment carried (tshark's seq/len);
  no hole that claims bytes were lost names bytes a damaged segment carried.
"""
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from derive_pcaps import csum16, icrc_roce_v2, read_pcap  # noqa: E402

ROCE_PORT = 4791
PSN_MOD = 1 << 24


def fail(message):
    sys.exit(f"port_bit_error_check: {message}")


def ipv4_packets(pcap, proto):
    """(frame, IPv4 header, L4 bytes) of the capture's Ethernet/IPv4 frames carrying `proto`."""
    _, _, recs = read_pcap(pcap)
    for n, (_s, _u, _w, pkt) in enumerate(recs, 1):
        if len(pkt) >= 34 and pkt[12:14] == b"\x08\x00" and pkt[23] == proto:
            ihl = (pkt[14] & 0x0F) * 4
            total = struct.unpack("!H", pkt[16:18])[0]
            yield n, pkt[14:14 + ihl], pkt[14 + ihl:14 + total]


def damaged_port_frames(pcap):
    """{frame: (ip id, port)} for IPv4/UDP frames whose ICRC holds only with 4791 put back."""
    found = {}
    for n, ip, l4 in ipv4_packets(pcap, 17):
        port = struct.unpack("!H", l4[2:4])[0] if len(l4) >= 8 else ROCE_PORT
        if bin(port ^ ROCE_PORT).count("1") != 1 or len(l4) < 8 + 12 + 4:
            continue
        udp = l4[:2] + struct.pack("!H", ROCE_PORT) + l4[4:8]
        if icrc_roce_v2(ip, udp, l4[8:-4], False) == l4[-4:]:
            found[n] = (struct.unpack("!H", ip[4:6])[0], port)
    return found


def damaged_tcp_frames(pcap):
    """{frame: (seq, length)} for IPv4/TCP segments on a 4-tuple no good segment uses, whose checksum
    holds with one port bit flipped back to a 4-tuple good segments use. (The ones' complement
    sum cannot tell a port bit from the same bit elsewhere: the tuples settle it.)"""
    segs, good_tuples = [], set()
    for n, ip, seg in ipv4_packets(pcap, 6):
        if len(seg) < 20:
            continue
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(seg))
        if csum16(pseudo + seg) == 0:
            good_tuples.add(ip[12:20] + seg[:4])
        else:
            segs.append((n, ip, pseudo, seg))
    found = {}
    for n, ip, pseudo, seg in segs:
        if ip[12:20] + seg[:4] in good_tuples:
            continue  # its own connection: damaged elsewhere
        for bit in range(32):
            ports = bytearray(seg[:4])
            ports[bit // 8] ^= 1 << (bit % 8)
            if ip[12:20] + bytes(ports) in good_tuples and csum16(pseudo + bytes(ports) + seg[4:]) == 0:
                found[n] = (struct.unpack("!I", seg[4:8])[0], len(seg) - (seg[12] >> 4) * 4)
                break
    return found


def check_tcp(rdmadiag, pcap, damaged):
    bad_sum = {int(r["frame.number"]) for r in tshark(pcap, [], ["frame.number", "tcp.checksum.status"], True)
               if r["tcp.checksum.status"] == "0"}
    report = json.loads(subprocess.run([rdmadiag, "analyze", pcap, "--json", "-"], capture_output=True,
                                       text=True, check=True).stdout)
    holes = [a for a in report["anomalies"] if a["kind"] == "tcp_hole"]
    copies = {a["related_frames"][-1]: a for a in holes if a.get("fill") == "corruption"}
    for n, (seq, length) in sorted(damaged.items()):
        print(f"frame {n}: TCP checksum good with one port bit flipped back; tshark's checksum status bad: {n in bad_sum}")
        if n not in bad_sum:
            fail(f"frame {n}: tshark finds its TCP checksum good")
        a = copies.get(n)
        if a is None or a["tcp_seq"] != seq or a["count"] != length:
            fail(f"frame {n} (seq {seq}, {length} bytes): no tcp_hole names it the damaged copy of those bytes: {a}")
    if set(copies) - set(damaged):
        fail(f"tcp_hole damaged copies at frames {sorted(set(copies) - set(damaged))} are not damaged-port segments")
    for a in holes:
        if a.get("fill") in ("corruption", "reordering"):
            continue
        for seq, length in damaged.values():
            if (a["tcp_seq"] - seq) % (1 << 32) < length:
                fail(f"a tcp_hole calls bytes lost that a damaged segment carried: {a['text']}")
    print(f"port_bit_error_check: {len(damaged)} damaged-port TCP segment(s) named as the captured copy of their hole")


def tshark(pcap, ports, fields, check_tcp_sums=False):
    cmd = ["tshark", "-r", pcap, "-n", "--disable-protocol", "rpcordma", "-o", "infiniband.identify_payload:FALSE",
           "-o", f"tcp.check_checksum:{'TRUE' if check_tcp_sums else 'FALSE'}", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
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
    damaged_tcp = damaged_tcp_frames(pcap)
    if damaged_tcp:
        return check_tcp(rdmadiag, pcap, damaged_tcp)
    damaged = damaged_port_frames(pcap)
    if not damaged:
        fail(f"{pcap}: no RoCEv2 frame or TCP segment with a one-bit-off port: the capture is not the regression")
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
