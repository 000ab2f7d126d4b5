#!/usr/bin/env python3
"""Validate rdmadiag perftest JSON reports against docs/perftest-schema.json.

usage: validate_json.py SCHEMA REPORT... [--min-results N] [--exchange tcp|rdma_cm] [--require-ok] [--negotiated]
  --exchange     every report must say it exchanged its keys this way (test_info.exchange)
  --require-ok   every report must have ok=true (no errors)
  --negotiated   every report must say upstream >= 6.28's parameter negotiation took place
                 (test_info.versions.parameter_negotiation) with a peer announcing >= 6.28
  --check-modes  a report with test_info.duration_s > 0 must have a duration object in every
                 result, with iterations > 0 and tps equal to iterations / measured seconds
                 (1 %); a UD report's sizes must not exceed its MTU
"""
import json
import sys

import jsonschema


def check_mode_fields(path, report):
    info = report["test_info"]
    for result in report["results"]:
        if info.get("duration_s", 0) > 0 and "remote_report" not in result:
            d = result.get("duration")
            if d is None:
                sys.exit(f"{path}: -D {info['duration_s']} but result for size {result['size']} has no duration")
            if result["iterations"] <= 0 or d["measured_seconds"] <= 0:
                sys.exit(f"{path}: -D result without iterations or window: {result}")
            expected_tps = result["iterations"] / d["measured_seconds"]
            if abs(d["tps"] - expected_tps) > 0.01 * expected_tps:
                sys.exit(f"{path}: tps {d['tps']} but {result['iterations']} iterations in {d['measured_seconds']} s")
        if info["transport"] == "UD" and result["size"] > info["mtu"]:
            sys.exit(f"{path}: UD message size {result['size']} above the MTU {info['mtu']}")


def main():
    args = sys.argv[1:]
    min_results = 0
    if "--min-results" in args:
        i = args.index("--min-results")
        min_results = int(args[i + 1])
        del args[i:i + 2]
    exchange = None
    if "--exchange" in args:
        i = args.index("--exchange")
        exchange = args[i + 1]
        del args[i:i + 2]
    require_ok = "--require-ok" in args
    if require_ok:
        args.remove("--require-ok")
    negotiated = "--negotiated" in args
    if negotiated:
        args.remove("--negotiated")
    check_modes = "--check-modes" in args
    if check_modes:
        args.remove("--check-modes")
    schema = json.load(open(args[0]))
    for path in args[1:]:
        report = json.load(open(path))
        jsonschema.validate(report, schema)
        if len(report["results"]) < min_results:
            sys.exit(f"{path}: {len(report['results'])} results, expected at least {min_results}")
        if exchange and report["test_info"]["exchange"] != exchange:
            sys.exit(f"{path}: exchange {report['test_info']['exchange']}, expected {exchange}")
        if require_ok and not report["ok"]:
            sys.exit(f"{path}: ok={report['ok']}, {len(report['results'])} results, errors {report['errors']}")
        versions = report["test_info"]["versions"]
        if negotiated and not (versions["parameter_negotiation"] and float(versions["peer_perftest"]) >= 6.28):
            sys.exit(f"{path}: no parameter negotiation with a peer announcing >= 6.28: {versions}")
        if check_modes:
            check_mode_fields(path, report)
        print(f"{path}: valid ({len(report['results'])} results, ok={report['ok']})")


if __name__ == "__main__":
    main()
