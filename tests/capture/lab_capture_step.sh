#!/usr/bin/env bash
# Runs inside a lab VM (tests/lab/run --server ...): captures eth0 with
# `rdmadiag capture` while a perftest server runs, then stops the capture with
# SIGINT as a user would. Files land in the current directory (the VM's
# results share): NAME.pcap, NAME.json, NAME.capture.err.
#   lab_capture_step.sh RDMADIAG NAME PERFTEST-COMMAND...
set -u
rdmadiag=$1
name=$2
shift 2
# --duration only bounds a run that goes wrong; SIGINT ends it normally.
"$rdmadiag" capture -i eth0 -w "$name.pcap" --force --json "$name.json" --no-status --duration 600 \
  >"$name.capture.out" 2>"$name.capture.err" &
cap=$!
# Start the perftest server (which the client waits for) only once the capture runs.
for _ in $(seq 600); do
  grep -q "capturing on" "$name.capture.err" && break
  kill -0 $cap 2>/dev/null || { cat "$name.capture.err" >&2; exit 1; }
  sleep 0.1
done
"$@"
rc=$?
sleep 2  # the client's last packets (its final ACKs, the connection teardown)
kill -INT $cap
wait $cap
cap_rc=$?
cat "$name.capture.err" >&2
[ $rc -eq 0 ] || exit $rc
exit $cap_rc
