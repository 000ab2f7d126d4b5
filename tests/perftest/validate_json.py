#!/usr/bin/env python3
"""Validate rdmadiag perftest JSON reports against docs/perftest-schema.json.

usage: validate_json.py SCHEMA REPORT... [--min-results N] [--exchange tcp|rdma_cm] [--require-ok]
  --exchange     every report must say it exchanged its keys this way (test_info.exchange)
  --require-ok   every report must have ok=true (no errors)
"""
import json
import sys

import jsonschema


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
        print(f"{path}: valid ({len(report['results'])} results, ok={report['ok']})")


if __name__ == "__main__":
    main()
