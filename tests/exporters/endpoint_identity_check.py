#!/usr/bin/env python3
"""One endpoint-identity rule (decode/endpoints.h): every packet a flow holds is shown
with that flow's two ends, in --packets JSON as in the flow table, on every capture kind:
RoCEv2, RoCEv1 (GRH only), native IB with and without a GRH (the LRH's LIDs win), ERF.

usage: endpoint_identity_check.py RDMADIAG PCAP...
Before the rule lived in one place, native IB packets with a GRH were shown by GID
while their flow was keyed and shown by LID.
"""
import json
import subprocess
import sys


def main():
    rdmadiag, pcaps = sys.argv[1], sys.argv[2:]
    for pcap in pcaps:
        r = json.loads(subprocess.run([rdmadiag, "analyze", pcap, "--packets", "--json", "-"], capture_output=True,
                                      text=True, check=True).stdout)
        flows, checked = r["flows"], 0
        for p in r["packets"]:
            f = (p.get("analysis") or {}).get("flow")
            if f is None or f >= len(flows) or flows[f].get("transport") == "iwarp":
                continue
            if (p.get("src"), p.get("dst")) != (flows[f]["src"], flows[f]["dst"]):
                sys.exit(f"{pcap} frame {p['frame']}: shown {p.get('src')} -> {p.get('dst')}, its flow {f} "
                         f"{flows[f]['src']} -> {flows[f]['dst']}")
            checked += 1
        if not checked:
            sys.exit(f"{pcap}: no packet of a flow to check")
        print(f"{pcap}: {checked} packets shown with their flow's ends")


if __name__ == "__main__":
    main()
