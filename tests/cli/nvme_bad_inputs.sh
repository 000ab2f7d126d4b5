#!/usr/bin/env bash
# `rdmadiag nvme` on bad inputs: a clear line and the documented exit status
# (1 not readable / cannot write, 3 damaged: analysed up to the damage), never
# a crash; and on captures cut to a short snap length (capsules truncated, the
# rdma_cm exchange lost) or with random bytes changed: exit 0 and a report.
set -u
bin=$1
pcap=$(cd "$(dirname "$0")/../pcaps" && pwd)/lab_rxe_nvme.pcap
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

pass=0
subcommand=nvme
expect_stdout=1   # the report (stdout) must be there
# shellcheck source=expect.sh
. "$(dirname "$0")/expect.sh"

printf 'not a capture\n' >"$tmp/text.pcap"
size=$(stat -c %s "$pcap")
head -c $((size / 2 + 7)) "$pcap" >"$tmp/cut.pcap"
expect missing 1 "No such file" -- "$tmp/nope.pcap"
expect text 1 "not a pcap or pcapng" -- "$tmp/text.pcap"
expect cut_record 3 "damaged capture" -- "$tmp/cut.pcap"
expect json_unwritable 1 "cannot write" -- "$pcap" --json "$tmp/no/such/dir.json"
expect whole 0 "completed 130" -- "$pcap"
# Responses counted once, as commands are: the controller sent 131 16-byte
# SENDs, one an RC resend (tshark: 130 distinct destination QP and PSN).
expect responses_once 0 "commands 131  responses 130  completed 130" -- "$pcap"
# SQSIZE is 0's based: the text says the field as the JSON does (tshark:
# nvme.fabrics.cmd.connect.sqsize 31 at frame 37), and what it means.
# The AER (frame 133) never completes: its row has no latency, not 0 us.
expect aer_no_latency 0 "async_event_request +0 done, err +0  \\(1 sent, none completed in the capture\\)" -- "$pcap"
expect sqsize 0 "sqsize 31 \\(32 entries\\)" -- "$pcap"
expect port_zero 2 "port: Value 0 not in range 1 to 65535" -- "$pcap" --port 0
# A report that cannot be written (every write to /dev/full fails) fails the command.
[ -w /dev/full ] && expect json_disk_full 1 "cannot write /dev/full" -- "$pcap" --json /dev/full
if command -v editcap >/dev/null; then
  for s in 60 70 90 120; do
    editcap -s "$s" "$pcap" "$tmp/snap$s.pcap" >/dev/null 2>&1
    expect "snaplen_$s" 0 "NVMe over Fabrics" -- "$tmp/snap$s.pcap" --assume-all --capsules /dev/null
  done
  # The text says what it could not decode: at 90 bytes every command capsule
  # is cut (tshark: 131 SEND First/Only frames of 122 bytes or more, the
  # headers, an SQE and the ICRC).
  expect snaplen_90_said 0 "capsules not decoded: 131 cut short by the snap length" -- \
    "$tmp/snap90.pcap" --assume-all
  # iWARP cut to 200 bytes: several capsules share a TCP segment, so
  # completions are cut away. 23 commands stay unanswered; the whole capture
  # completes 22 of them (its pairing: nvme_iwarp_crosscheck, against tshark's
  # fields), the 23rd is the AER. Each must say its completion may be in the
  # bytes cut, not that it has none.
  siw=$(dirname "$pcap")/lab_siw_nvme.pcap
  editcap -s 200 "$siw" "$tmp/siw200.pcap" >/dev/null 2>&1
  expect siw_snaplen_200 0 "23 of the unanswered were outstanding while bytes from the controller were cut" -- \
    "$tmp/siw200.pcap"
  expect siw_snaplen_200_html 0 "none captured \\(bytes cut by the snap length\\)" -- "$tmp/siw200.pcap" --html -
  # Every frame again 50 ms later (a late copy of each, PSN kept): the same
  # commands and completions as the capture alone (130 completed: tshark's
  # pairing of lab_rxe_nvme; the kernel's block stats 29 reads, 66 writes).
  if command -v mergecap >/dev/null; then
    editcap -t 0.05 "$pcap" "$tmp/later.pcap" >/dev/null 2>&1
    mergecap -w "$tmp/copies.pcap" "$pcap" "$tmp/later.pcap"
    expect late_copies 0 "commands 131  responses 130  completed 130" -- "$tmp/copies.pcap"
    # iWARP the same (lab_siw_nvme alone: 128 commands, 127 completed; its
    # pairing: nvme_iwarp_crosscheck). The last exchange's copies come after
    # the connection's FINs (tshark flags them tcp.analysis.retransmission).
    editcap -t 0.05 "$siw" "$tmp/siw_later.pcap" >/dev/null 2>&1
    mergecap -w "$tmp/siw_copies.pcap" "$siw" "$tmp/siw_later.pcap"
    expect siw_late_copies 0 "commands 128  responses 127  completed 127" -- "$tmp/siw_copies.pcap"
  fi
  for seed in 1 2 3 4 5; do
    editcap --seed "$seed" -E 0.02 "$pcap" "$tmp/fuzz$seed.pcap" >/dev/null 2>&1
    expect "random_bytes_$seed" 0 "NVMe over Fabrics" -- "$tmp/fuzz$seed.pcap" --assume-all --capsules /dev/null
  done
fi
[ "$fail" = 0 ]
