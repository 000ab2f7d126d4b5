#!/bin/sh
# usage: option_conflicts.sh RDMADIAG
# Option combinations perftest refuses (or rdmadiag does not support yet) fail at once, before
# any device is opened, with a message naming the options - never a hang or a device error.
# Where perftest has the rule, the installed perftest (Debian's ib_*; its parser runs before any
# device is looked for) must refuse the same options too, with its own message: the independent
# check that the rule is perftest's. "-" marks rdmadiag's own limits (perftest goes on to the
# device there). Without perftest installed that half is skipped and said so.
bin=$1
fail=0
have_perftest=1
command -v ib_write_bw >/dev/null 2>&1 || { have_perftest=0; echo "note: perftest not installed, its half skipped"; }
expect() {  # expect "RDMADIAG MESSAGE PART" "PERFTEST MESSAGE PART"|- TEST OPTION...
  want=$1
  want_perftest=$2
  shift 2
  out=$(timeout 5 "$bin" perftest "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne 1 ] || ! printf '%s\n' "$out" | grep -qF -- "$want"; then
    echo "FAIL: $* -> rc=$rc: $out (wanted: $want)"
    fail=1
  else
    echo "ok: $*"
  fi
  [ "$want_perftest" = - ] || [ "$have_perftest" = 0 ] && return
  test=$1
  shift
  ib=ib_$(printf '%s' "$test" | tr - _)
  out=$(timeout 5 "$ib" "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || ! printf '%s\n' "$out" | grep -qF -- "$want_perftest"; then
    echo "FAIL: perftest $ib $* -> rc=$rc: $out (wanted: $want_perftest)"
    fail=1
  else
    echo "ok: perftest $ib $* refuses it too (rc=$rc)"
  fi
}
expect "-D cannot be combined with -a" "Duration mode currently doesn't support running on all sizes" write-lat -D 4 -a
expect "-D cannot be combined with -e" "Duration mode doesn't work with events" send-lat -D 4 -e
expect "-c UD allows only SEND tests" "UD connection only possible in SEND verb" write-lat -c UD
expect "-c UD allows only SEND tests" "UD connection only possible in SEND verb" read-bw -c UD
expect "-c UC cannot be used with -R" "UC is not supported in librdmacm" write-lat -R -c UC
expect "-c UD with -R/--rdma_cm is not supported yet" - send-lat -R -c UD
expect "-c UC allows only WRITE and SEND tests" "UC connection not possible in READ/ATOMIC verbs" read-lat -c UC
# perftest 4.5 parser (perftest_parameters.c): case 'q' "Multiple QPs only available on bw tests",
# case 'b' "Bidirectional is only available in BW test", case 'N' "NoPeak only valid for BW tests",
# case 'r' "On RDMA verbs rx depth can be only 1".
expect "-q: multiple QPs only available on bandwidth tests" "Multiple QPs only available on bw tests" write-lat -q 2
expect "-b: bidirectional is only available in bandwidth tests" "Bidirectional is only available in BW test" send-lat -b
expect "-N: noPeak is only valid for bandwidth tests" "NoPeak only valid for BW tests" read-lat -N
expect "-r: on RDMA verbs the rx depth can only be 1" "On RDMA verbs rx depth can be only 1" write-bw -r 8
# Not in rdmadiag yet: UD with -q; no GPU memory.
expect "-q with -c UD is not supported yet" - send-bw -q 2 -c UD
expect "GPU memory is not supported in this build" - write-bw --use_cuda 0
expect "GPU memory is not supported in this build" - send-bw --use_rocm_dmabuf
# force_dependencies: "Number of iterations must be a multiple of post list size", "Post list size
# must be a multiple of CQ moderation"; latency_gap: "Latency gap feature is only for latency tests".
expect "-l: the number of iterations must be a multiple of the post list size" "Number of iterations must be a multiple of post list size" write-bw -l 3 -n 100
expect "-l: the post list size must be a multiple of the CQ moderation" "Post list size must be a multiple of CQ moderation" write-bw -l 8 -Q 3 -n 96
expect "post list is supported in bandwidth tests only" "Post list is supported in BW tests only" write-lat -l 2
expect "--latency_gap: the latency gap is only for latency tests" "Latency gap feature is only for latency tests" write-bw --latency_gap 10
# run_infinitely_dependencies: "run_infinitely exists only in BW tests", "does not support events".
expect "--run_infinitely does not support -e" "run_infinitely does not support events feature yet" send-bw --run_infinitely -e
expect "--run_infinitely is not supported in the SEND bidirectional test" "run_infinitely mode is not supported in SEND Bidirectional BW test" send-bw --run_infinitely -b
# perftest's parser, case 'e': "Events feature not available on WRITE verb" (before any other rule).
expect "-e: events are not available on the WRITE verb" "Events feature not available on WRITE verb" write-lat -e
expect "-e: events are not available on the WRITE verb" "Events feature not available on WRITE verb" write-bw --run_infinitely -e
# perftest's parser: -C "Available only on Latency tests", -H and -U likewise.
expect "-C/--report-cycles: available only in latency tests" "Available only on Latency tests" write-bw -C
expect "-U/--report-unsorted: available only in latency tests" "Available only on Latency tests" read-bw -U
expect "-H/--report-histogram: available only in latency tests" "Available only on Latency tests" send-bw -H
exit $fail
