#!/usr/bin/env python3
"""Checks the sample outputs mesh_tests writes with parsers that are not ours.

usage: check_mesh_outputs.py SCHEMA PREFIX     (reads PREFIX.json .csv .html .prom)
- JSON: validates against docs/schema/mesh.schema.json (jsonschema).
- CSV: Python's csv module; one row per JSON pair with the same status and median.
- HTML: html.parser; an N x N table, no script, no external resource.
- Prometheus: prometheus_client's text parser; histogram buckets cumulative, +Inf == _count,
  and the outlier gauges agree with the JSON findings.
"""
import csv
import html.parser
import json
import sys

import jsonschema
from prometheus_client.parser import text_string_to_metric_families


def check_json(schema_path, report):
    with open(schema_path) as f:
        jsonschema.validate(report, json.load(f))


def check_csv(path, report):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(report["pairs"]), (len(rows), len(report["pairs"]))
    for row, pair in zip(rows, report["pairs"]):
        assert int(row["client_rank"]) == pair["client"] and int(row["server_rank"]) == pair["server"]
        assert row["status"] == pair["status"]
        if "latency_usec" in pair:
            assert abs(float(row["median_usec"]) - pair["latency_usec"]["median"]) < 1e-3 * pair["latency_usec"]["median"]
    verdicts = {(int(r["client_rank"]), int(r["server_rank"])) for r in rows if r["verdict"] == "bad_link"}
    assert verdicts == {(l["client"], l["server"]) for l in report["findings"]["bad_links"]}, verdicts


class TableParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.cells, self.external = 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows += 1
        if tag == "td":
            self.cells += 1
        if tag in ("script", "link", "img", "iframe"):
            self.external.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.external.append(value)


def check_html(path, report):
    p = TableParser()
    with open(path) as f:
        p.feed(f.read())
    n = len(report["hosts"])
    assert p.rows == n + 1 and p.cells == n * n, (p.rows, p.cells, n)
    assert not p.external, p.external


def check_prometheus(path, report):
    with open(path) as f:
        families = {fam.name: fam for fam in text_string_to_metric_families(f.read())}
    hist = families["rdmadiag_mesh_latency_seconds"]
    series = {}
    for s in hist.samples:
        key = (s.labels["client"], s.labels["server"])
        series.setdefault(key, {"buckets": [], "count": None})
        if s.name.endswith("_bucket"):
            series[key]["buckets"].append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            series[key]["count"] = s.value
    assert series
    for key, v in series.items():
        values = [c for _, c in sorted(v["buckets"])]
        assert values == sorted(values), (key, values)
        assert values[-1] == v["count"], key
    bad = {s.labels["client"] for s in families["rdmadiag_mesh_link_outlier"].samples if s.value == 1}
    assert len(bad) == len(report["findings"]["bad_links"]), bad
    hosts = [s for s in families["rdmadiag_mesh_host_outlier"].samples if s.value == 1]
    assert len(hosts) == len(report["findings"]["bad_hosts"]), hosts


def main():
    schema, prefix = sys.argv[1], sys.argv[2]
    with open(prefix + ".json") as f:
        report = json.load(f)
    check_json(schema, report)
    check_csv(prefix + ".csv", report)
    check_html(prefix + ".html", report)
    check_prometheus(prefix + ".prom", report)
    print(f"mesh outputs OK: {len(report['hosts'])} hosts, {len(report['pairs'])} pairs")


if __name__ == "__main__":
    main()
