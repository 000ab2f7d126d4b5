#!/usr/bin/env python3
"""Checks a tests/lab/mesh-lab run against the faults it injected (the truth is the
impairment each step installed, not our own output): every pair measured; a step with
"A>B" impairments names exactly those links and no host; a step with "A>*" names exactly
host A and no link; a clean step names nothing. netem's own counters (tc -s qdisc in the
impaired VM) must show the impairment carried the traffic: at least the 2 x n RDMA packets
(WRITEs and ACKs) one side sends the other in a write-lat pair.

usage: lab_mesh_check.py MESH_LAB_OUT SCHEMA ITERATIONS
"""
import json
import re
import sys

import jsonschema


def netem_sent(qdisc_text):
    """{handle: packets sent} of every netem qdisc in `tc -s qdisc` output."""
    out = {}
    for m in re.finditer(r"qdisc netem (\w+):.*?Sent \d+ bytes (\d+) pkt", qdisc_text, re.S):
        out[m.group(1)] = int(m.group(2))
    return out


def expected_findings(impairments, addresses):
    hosts, links = set(), set()
    for vm, lines in impairments.items():
        for dest, _ in lines:
            if dest == "all":
                hosts.add(int(vm))
            else:
                peer = addresses.index(dest)
                links.add((min(int(vm), peer), max(int(vm), peer)))
    return hosts, links


def check_step(out, run, s, step, schema, n):
    report = json.load(open(f"{out}/h0/step{s}.json"))
    jsonschema.validate(report, schema)
    hosts = run["hosts"]
    assert len(report["pairs"]) == hosts * (hosts - 1) // 2, report["pairs"]
    for p in report["pairs"]:
        assert p["status"] == "ok", p
        assert p["latency_usec"]["samples"] == n - 1, p
    want_hosts, want_links = expected_findings(step["impairments"], run["addresses"])
    got_hosts = {h["rank"] for h in report["findings"]["bad_hosts"]}
    got_links = {(l["client"], l["server"]) for l in report["findings"]["bad_links"]}
    medians = {f'{p["client"]}-{p["server"]}': round(p["latency_usec"]["median"]) for p in report["pairs"]}
    print(f"step {s} ({step['spec']}): medians {medians}; bad hosts {sorted(got_hosts)}, bad links {sorted(got_links)}")
    assert got_hosts == want_hosts and got_links == want_links, (step["spec"], report["findings"])
    for vm in step["impairments"]:
        sent = netem_sent(open(f"{out}/h{vm}/step{s}.after.qdisc").read())
        print(f"  netem in VM {vm}: packets sent per qdisc {sent}")
        assert sent and all(v >= 2 * n for v in sent.values()), sent


def main():
    out, schema_path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    run = json.load(open(f"{out}/run.json"))
    schema = json.load(open(schema_path))
    assert not run["errors"], run["errors"]
    for s, step in enumerate(run["steps"], 1):
        check_step(out, run, s, step, schema, n)
    print(f"mesh lab OK: {run['hosts']} VMs, {len(run['steps'])} steps, every verdict as injected")


if __name__ == "__main__":
    main()
