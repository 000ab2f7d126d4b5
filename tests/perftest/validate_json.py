#!/usr/bin/env python3
"""Validate rdmadiag perftest JSON reports against docs/perftest-schema.json.

usage: validate_json.py SCHEMA REPORT... [--min-results N]
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
    schema = json.load(open(args[0]))
    for path in args[1:]:
        report = json.load(open(path))
        jsonschema.validate(report, schema)
        if len(report["results"]) < min_results:
            sys.exit(f"{path}: {len(report['results'])} results, expected at least {min_results}")
        print(f"{path}: valid ({len(report['results'])} results, ok={report['ok']})")


if __name__ == "__main__":
    main()
