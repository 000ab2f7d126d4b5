#!/usr/bin/env bash
# `rdmadiag analyze` on inputs that are not (whole) captures: each gives one clear
# line naming the file and the documented exit status (README: 1 not readable or
# not a capture, 3 damaged: read up to the damage), never a crash.
set -u
bin=$1
pcaps=$(cd "$(dirname "$0")/../pcaps" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
pass=0

subcommand=analyze
# shellcheck source=expect.sh
. "$(dirname "$0")/expect.sh"

mkdir "$tmp/dir"
: >"$tmp/empty.pcap"
printf 'this is a text file, not a capture\n' >"$tmp/text.pcap"
printf '\xd4\xc3\xb2\xa1\x02\x00' >"$tmp/short-header.pcap"
gzip -c "$pcaps/rxe_read_lat.pcap" >"$tmp/capture.pcap.gz"
size=$(stat -c %s "$pcaps/rxe_read_lat.pcap")
head -c $((size / 2 + 7)) "$pcaps/rxe_read_lat.pcap" >"$tmp/cut.pcap"   # ends inside a record

expect directory 1 "is a directory" -- "$tmp/dir"
expect missing 1 "No such file" -- "$tmp/nope.pcap"
expect empty 1 "empty file" -- "$tmp/empty.pcap"
expect text 1 "not a pcap or pcapng" -- "$tmp/text.pcap"
expect short_header 1 "header is cut short|not a capture" -- "$tmp/short-header.pcap"
expect gzip 1 "not a pcap or pcapng" -- "$tmp/capture.pcap.gz"
expect cut_record 3 "damaged capture.*stopped after record" -- "$tmp/cut.pcap"
# The cut file is still read up to the damage, and the JSON report says where it stopped.
"$bin" analyze --json - "$tmp/cut.pcap" 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
i = r["inputs"][0]
assert i["complete"] is False and "stopped after record" in i["stop_reason"], i
assert r["summary"]["packets"] == i["records"] > 0, (r["summary"]["packets"], i)
print("ok   cut_record_report: %d records read, %s" % (i["records"], i["stop_reason"]))' && pass=$((pass + 1)) || { echo "FAIL cut_record_report"; fail=$((fail + 1)); }
# A good file after a bad one is still read, and the status is the worst of the two.
expect bad_then_good 1 "is a directory" -- "$tmp/dir" "$pcaps/rxe_read_lat.pcap"
# Bad command lines.
"$bin" analyze >/dev/null 2>&1; st=$?
if [ $st -ne 0 ]; then echo "ok   no_files: exit $st"; pass=$((pass + 1)); else echo "FAIL no_files: exit 0"; fail=$((fail + 1)); fi
expect dscp_out_of_range 2 "dscp-priority 64=1: expected DSCP=PRIORITY" -- --dscp-priority 64=1 "$pcaps/pfc/pfc_basic.pcap"
expect dscp_garbage 2 "dscp-priority 26=3x: expected" -- --dscp-priority 26=3x "$pcaps/pfc/pfc_basic.pcap"
expect link_speed_zero 2 "link-speed.*not in range" -- --link-speed 0 "$pcaps/pfc/pfc_basic.pcap"
expect roce_port_zero 2 "roce-port: Value 0 not in range 1 to 65535" -- --roce-port 0 "$pcaps/rxe_read_lat.pcap"
# A report that cannot be written fails the command (it was exit 0 with the
# JSON file or standard output short): /dev/full, where every write fails.
if [ -w /dev/full ]; then
  expect json_disk_full 1 "cannot write /dev/full" -- -q --json /dev/full "$pcaps/rxe_read_lat.pcap"
  for mode in text json; do
    args=("$pcaps/rxe_read_lat.pcap"); [ $mode = json ] && args+=(--json -)
    "$bin" analyze "${args[@]}" >/dev/full 2>"$tmp/err"; st=$?
    if [ $st -eq 1 ] && grep -q "cannot write standard output" "$tmp/err"; then
      echo "ok   stdout_disk_full_$mode: exit $st"; pass=$((pass + 1))
    else echo "FAIL stdout_disk_full_$mode: exit $st, stderr: $(head -c 300 "$tmp/err")"; fail=$((fail + 1)); fi
  done
fi
# A metrics file is replaced by a rename: never over a FIFO, a device or a
# directory (as root that replaced the node: /dev/null once was a metrics file).
mkfifo "$tmp/fifo"
expect metrics_not_regular 1 "is not a regular file" -- -q --metrics-file "$tmp/fifo" "$pcaps/rxe_read_lat.pcap"
if [ -p "$tmp/fifo" ]; then echo "ok   metrics_fifo_kept"; pass=$((pass + 1)); else echo "FAIL metrics_fifo_kept: the FIFO was replaced"; fail=$((fail + 1)); fi
# An output that is also an input (by any path: a symbolic link here) is
# refused before anything is opened: --json on the capture emptied it, and
# convert --force onto its input left 1 MB of an 80 MB capture, both exit 0.
cp "$pcaps/rxe_read_lat.pcap" "$tmp/own.pcap"
ln -s "$tmp/own.pcap" "$tmp/link.pcap"
expect output_is_input_json 2 "json .*own.pcap is also an input" -- -q --json "$tmp/own.pcap" "$tmp/own.pcap"
expect output_is_input_link 2 "csv .*link.pcap is also an input" -- -q --csv "$tmp/link.pcap" "$tmp/own.pcap"
expect output_is_input_metrics 2 "metrics-file .* is also an input" -- -q -j 2 --metrics-file "$tmp/own.pcap" "$tmp/own.pcap"
for cmd in "convert --force $tmp/own.pcap $tmp/link.pcap" "capture -q -r $tmp/own.pcap -w $tmp/own.pcap --force" \
           "capture -q -r $tmp/own.pcap --html $tmp/link.pcap" "nvme $tmp/own.pcap --capsules $tmp/own.pcap"; do
  # shellcheck disable=SC2086  # the words of the command line
  "$bin" $cmd >/dev/null 2>"$tmp/err"; st=$?
  if [ $st -eq 2 ] && grep -q "is also an input" "$tmp/err"; then
    echo "ok   output_is_input: $cmd: exit $st"; pass=$((pass + 1))
  else echo "FAIL output_is_input: $cmd: exit $st, stderr: $(head -c 300 "$tmp/err")"; fail=$((fail + 1)); fi
done
if cmp -s "$pcaps/rxe_read_lat.pcap" "$tmp/own.pcap"; then echo "ok   output_is_input_intact"; pass=$((pass + 1))
else echo "FAIL output_is_input_intact: the input was changed"; fail=$((fail + 1)); fi
# Two outputs on one file, or both on standard output, are refused (exit 2): with
# `--json r --csv r --html r` only the HTML was left, and `--json - --jsonl -`
# interleaved two formats, both with exit 0.
expect outputs_same_file 2 "json .*same.out is the same file as --csv" -- -q --json "$tmp/same.out" --csv "$tmp/same.out" "$pcaps/rxe_read_lat.pcap"
expect outputs_same_file_spelt_apart 2 "is the same file as --html" -- -q --csv "$tmp/x/../same2.out" --html "$tmp/same2.out" "$pcaps/rxe_read_lat.pcap"
expect outputs_both_stdout 2 "json - and --jsonl -: both on standard output" -- -q --json - --jsonl - "$pcaps/rxe_read_lat.pcap"
if [ ! -e "$tmp/same.out" ] && [ ! -e "$tmp/same2.out" ]; then echo "ok   outputs_same_file_nothing_written"; pass=$((pass + 1))
else echo "FAIL outputs_same_file_nothing_written"; fail=$((fail + 1)); fi
# "-" for an output that cannot write to standard output made a file named "-".
expect csv_to_stdout 2 "csv - cannot go to standard output" -- -q --csv - "$pcaps/rxe_read_lat.pcap"
expect html_to_stdout 2 "html - cannot go to standard output" -- -q --html - "$pcaps/rxe_read_lat.pcap"
if [ ! -e ./- ]; then echo "ok   no_file_named_dash"; pass=$((pass + 1)); else echo "FAIL no_file_named_dash"; fail=$((fail + 1)); fi
# NaN passed CLI11's ranges (every comparison is false): a link speed of 9.2e9 Gb/s.
expect link_speed_nan 2 "link-speed.*expected a number, got nan" -- --link-speed nan "$pcaps/pfc/pfc_basic.pcap"
expect pause_storm_nan 2 "pause-storm-ms.*expected a number, got nan" -- --pause-storm-ms nan "$pcaps/pfc/pfc_basic.pcap"
expect metrics_max_flows_negative 2 "metrics-max-flows" -- -q --metrics-max-flows -1 --metrics-file "$tmp/m.prom" "$pcaps/rxe_read_lat.pcap"
# report refuses --metrics-file for an analyze report before writing anything
# (it wrote the HTML, then failed with exit 2).
"$bin" analyze -q --json "$tmp/r.json" "$pcaps/rxe_read_lat.pcap" 2>/dev/null
subcommand=report
expect report_metrics_of_analyze 2 "metrics-file from a saved analyze report is not supported" -- "$tmp/r.json" --html "$tmp/r.html" --metrics-file "$tmp/r.prom"
if [ ! -e "$tmp/r.html" ]; then echo "ok   report_refused_before_writing"; pass=$((pass + 1))
else echo "FAIL report_refused_before_writing: r.html was written"; fail=$((fail + 1)); fi
subcommand=analyze
# capture's counts, times and sizes as tcpdump takes them: out-of-range values
# are refused (they were taken silently as "no limit" or the default).
subcommand=capture
r=(-q -r "$pcaps/rxe_read_lat.pcap")
expect capture_count_zero 2 "count: must be greater than 0" -- "${r[@]}" -c 0
expect capture_duration_negative 2 "duration: must be greater than 0" -- "${r[@]}" --duration -1
expect capture_file_count_zero 2 "file-count: must be greater than 0" -- "${r[@]}" -C 1k -W 0 -w "$tmp/ring.pcap"
expect capture_rotate_zero 2 "rotate-seconds: must be greater than 0" -- "${r[@]}" -G 0 -w "$tmp/rot.pcap"
expect capture_snaplen_negative 2 "snapshot-length: Value -5 not in range" -- "${r[@]}" -s -5
expect capture_buffer_negative 2 "buffer-size: Value -1 not in range" -- "${r[@]}" -B -1
expect capture_linger_negative 2 "linger: must be 0 or more" -- "${r[@]}" --linger -3 --metrics-listen 127.0.0.1:0
expect capture_count_five 0 "5 packets captured" -- "${r[@]}" -c 5
expect capture_jsonl_and_pcap_on_stdout 2 "both on standard output" -- "${r[@]}" --jsonl - -w -
subcommand=analyze
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
