#!/usr/bin/python3
"""Writes the pause test captures in tests/pcaps/pfc/ (committed; rerun to remake).

The MAC Control frames come from scapy's own layers (Debian's python3-scapy,
scapy.contrib.mac_control: MACControlPause for IEEE 802.3 Annex 31B PAUSE,
MACControlClassBasedFlowControl for the 802.3 Annex 31D / 802.1Qbb PFC frame),
a generator written and tuned by nobody here. The RoCEv2 frames are real
(tests/pcaps/rxe_write_lat.pcap, Soft-RoCE between two VMs), copied byte for
byte; some get an 802.1Q tag inserted after the MAC addresses to carry a PCP
(the ICRC does not cover the Ethernet header, so it stays valid).

Run with Debian's interpreter, which has scapy:  /usr/bin/python3 tests/pfc/make_pfc_pcaps.py
Each capture is described in tests/pcaps/pfc/README.md.
"""
import os
import struct
import sys

from scapy.contrib.mac_control import (MACControlClassBasedFlowControl, MACControlGate, MACControlPause)
from scapy.layers.l2 import Dot1Q, Ether
from scapy.utils import RawPcapReader

HERE = os.path.dirname(os.path.abspath(__file__))
PCAPS = os.path.join(HERE, "..", "pcaps")
OUT = os.path.join(PCAPS, "pfc")
MULTICAST = "01:80:c2:00:00:01"
SWITCH = "02:00:00:00:00:aa"   # a switch port pausing the hosts
SWITCH_B = "02:00:00:00:00:bb"
SERVER = "52:54:00:77:00:01"   # the RoCE server of rxe_write_lat.pcap


def pause(src, quanta, dst=MULTICAST):
    return bytes(Ether(dst=dst, src=src) / MACControlPause(pause_time=quanta))


def pfc(src, times, reserved=0, vlan_pcp=None):
    """times: {priority: quanta}; each listed priority is enabled."""
    fields = {"_reserved": reserved}
    for n, q in times.items():
        fields[f"c{n}_enabled"] = 1
        fields[f"c{n}_pause_time"] = q
    body = MACControlClassBasedFlowControl(**fields)
    if vlan_pcp is None:
        return bytes(Ether(dst=MULTICAST, src=src) / body)
    return bytes(Ether(dst=MULTICAST, src=src) / Dot1Q(prio=vlan_pcp, vlan=0) / body)


def pfc_with_disabled_time(src, enabled, disabled):
    """PFC enabling priority `enabled` only, with a non-zero time in `disabled`'s field (ignored by receivers)."""
    body = MACControlClassBasedFlowControl(**{f"c{enabled}_enabled": 1, f"c{enabled}_pause_time": 100,
                                              f"c{disabled}_pause_time": 4242})
    return bytes(Ether(dst=MULTICAST, src=src) / body)


def real_roce_frames():
    """The RoCEv2 frames (UDP port 4791) of rxe_write_lat.pcap, as bytes."""
    frames = []
    for data, _meta in RawPcapReader(os.path.join(PCAPS, "rxe_write_lat.pcap")):
        if len(data) > 37 and data[12:14] == b"\x08\x00" and data[23] == 17 and data[36:38] == b"\x12\xb7":
            frames.append(bytes(data))
    return frames


def tagged(frame, pcp, vid=100):
    return frame[:12] + struct.pack("!HH", 0x8100, pcp << 13 | vid) + frame[12:]


class Pcap:
    """Classic pcap, nanosecond time stamps, Ethernet; a record may be cut (caplen < wire length)."""

    def __init__(self):
        self.records = []

    def add(self, ts, frame, caplen=None, wirelen=None):
        self.records.append((ts, frame[:caplen] if caplen is not None else frame,
                             wirelen if wirelen is not None else len(frame)))

    def write(self, name):
        self.records.sort(key=lambda r: r[0])
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
            for ts, data, wirelen in self.records:
                ns = round(ts * 1e9)
                f.write(struct.pack("<IIII", 1_700_000_000 + ns // 1_000_000_000, ns % 1_000_000_000, len(data), wirelen))
                f.write(data)
        print(f"{name}: {len(self.records)} frames")


def basic(roce):
    """PAUSE, XON, PFC on two priorities, a tagged refresh, XON per priority, a disabled
    priority's time, another opcode; RoCE frames inside and outside the pauses."""
    p = Pcap()
    p.add(0.001000, pause(SWITCH, 0x0200))            # 512 quanta: 2.62144 us at 100 Gb/s
    p.add(0.0010005, pause(SWITCH, 0))                 # XON 0.5 us later
    p.add(0.002000, pfc(SWITCH, {3: 0xFFFF, 4: 0x1000}))
    p.add(0.002005, pfc(SWITCH, {4: 0x0010}))              # a shorter refresh of 4: replaces the time left
    p.add(0.002100, pfc(SWITCH, {3: 0xFFFF}, vlan_pcp=7))  # refresh of 3, tagged
    p.add(0.002200, pfc(SWITCH, {3: 0}))                   # XON of 3
    p.add(0.003000, pfc_with_disabled_time(SERVER, 0, 5))
    p.add(0.004000, bytes(Ether(dst=MULTICAST, src=SWITCH) / MACControlGate()))
    p.add(0.005000, pfc(SWITCH, {0: 10, 1: 20, 2: 30, 3: 40, 4: 50, 5: 60, 6: 70, 7: 80}))
    # RoCE, the real conversation's first frames in order: tagged PCP 3 inside the 3-pause
    # (2.0 .. 2.2 ms) and outside it, PCP 4 inside 4's first 5 us and after its shortening refresh,
    # untagged (DSCP 0: priority 0) during the PAUSE (1.0 ms + 0.5 us) and after the XON.
    schedule = [(0.0005, 3), (0.0010001, None), (0.0010002, 3), (0.0020005, 3), (0.002001, 4), (0.002010, 4),
                (0.002030, 4), (0.00205, 3), (0.00215, 3), (0.00225, 3), (0.0030001, 3), (0.0030002, None),
                (0.006, 3)]
    for frame, (ts, pcp) in zip(roce, sorted(schedule)):
        p.add(ts, frame if pcp is None else tagged(frame, pcp))
    p.write("pfc_basic.pcap")


def storm(roce):
    """At 10 Gb/s (0xFFFF quanta = 3.3554 ms): the switch refreshes priority 3 every 2 ms
    for 200 ms (one continuous 203 ms pause: a storm at the default 100 ms), then a short
    pause; a second switch refreshes priority 4 for 20 ms; tagged RoCE every millisecond."""
    p = Pcap()
    for k in range(101):
        p.add(0.010 + k * 0.002, pfc(SWITCH, {3: 0xFFFF}))
    p.add(0.300, pfc(SWITCH, {3: 1000}))
    for k in range(11):
        p.add(0.0105 + k * 0.002, pfc(SWITCH_B, {4: 0xFFFF}))
    p.add(0.0315, pfc(SWITCH_B, {4: 0}))
    for k in range(340):
        p.add(0.0002 + k * 0.001, tagged(roce[k], 3 if k % 4 else 4))
    p.write("pfc_storm.pcap")


def malformed():
    """Cut and malformed MAC Control frames among good ones."""
    p = Pcap()
    good = pfc(SWITCH, {3: 0x0100})
    p.add(0.001, good)
    p.add(0.002, good, caplen=22)                      # snap length inside the PFC fields
    p.add(0.003, pause(SWITCH, 0x0300), caplen=15)      # snap length inside the opcode
    p.add(0.004, good[:18], caplen=18)                 # the frame itself ends inside the fields (a runt)
    p.add(0.005, pfc(SWITCH, {0: 0x0010}, reserved=0x80))  # reserved octet of the vector set
    p.add(0.006, pause(SWITCH, 0x0400, dst="02:00:00:00:00:01"))  # unicast destination (Annex 31B allows it)
    p.add(0.007, good)
    p.write("pfc_malformed.pcap")


def main():
    os.makedirs(OUT, exist_ok=True)
    roce = real_roce_frames()
    if len(roce) < 340:
        sys.exit(f"only {len(roce)} RoCEv2 frames in rxe_write_lat.pcap")
    basic(roce)
    storm(roce)
    malformed()


if __name__ == "__main__":
    main()
