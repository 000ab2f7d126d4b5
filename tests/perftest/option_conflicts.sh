#!/bin/sh
# usage: option_conflicts.sh RDMADIAG
# Option combinations perftest refuses (or rdmadiag does not support yet) fail at once, before
# any device is opened, with a message naming the options - never a hang or a device error.
bin=$1
fail=0
expect() {  # expect "MESSAGE PART" TEST OPTION...
  want=$1
  shift
  out=$(timeout 5 "$bin" perftest "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne 1 ] || ! printf '%s\n' "$out" | grep -qF -- "$want"; then
    echo "FAIL: $* -> rc=$rc: $out (wanted: $want)"
    fail=1
  else
    echo "ok: $*"
  fi
}
expect "-D cannot be combined with -a" write-lat -D 4 -a
expect "-D cannot be combined with -e" send-lat -D 4 -e
expect "-c UD allows only SEND tests" write-lat -c UD
expect "-c UD allows only SEND tests" read-bw -c UD
expect "-c UC cannot be used with -R" write-lat -R -c UC
expect "-c UD with -R/--rdma_cm is not supported yet" send-lat -R -c UD
expect "-c UC allows only WRITE and SEND tests" read-lat -c UC
# perftest 4.5 parser (perftest_parameters.c): case 'q' "Multiple QPs only available on bw tests",
# case 'b' "Bidirectional is only available in BW test", case 'N' "NoPeak only valid for BW tests",
# case 'r' "On RDMA verbs rx depth can be only 1".
expect "-q: multiple QPs only available on bandwidth tests" write-lat -q 2
expect "-b: bidirectional is only available in bandwidth tests" send-lat -b
expect "-N: noPeak is only valid for bandwidth tests" read-lat -N
expect "-r: on RDMA verbs the rx depth can only be 1" write-bw -r 8
# Not in rdmadiag yet: UD with -q; no GPU memory.
expect "-q with -c UD is not supported yet" send-bw -q 2 -c UD
expect "GPU memory is not supported in this build" write-bw --use_cuda 0
expect "GPU memory is not supported in this build" send-bw --use_rocm_dmabuf
# force_dependencies: "Number of iterations must be a multiple of post list size", "Post list size
# must be a multiple of CQ moderation"; latency_gap: "Latency gap feature is only for latency tests".
expect "-l: the number of iterations must be a multiple of the post list size" write-bw -l 3 -n 100
expect "-l: the post list size must be a multiple of the CQ moderation" write-bw -l 8 -Q 3 -n 96
expect "post list is supported in bandwidth tests only" write-lat -l 2
expect "--latency_gap: the latency gap is only for latency tests" write-bw --latency_gap 10
# run_infinitely_dependencies: "run_infinitely exists only in BW tests", "does not support events".
expect "--run_infinitely does not support -e" write-bw --run_infinitely -e
expect "--run_infinitely is not supported in the SEND bidirectional test" send-bw --run_infinitely -b
# perftest's parser: -C "Available only on Latency tests", -H and -U likewise.
expect "-C/--report-cycles: available only in latency tests" write-bw -C
expect "-U/--report-unsorted: available only in latency tests" read-bw -U
expect "-H/--report-histogram: available only in latency tests" send-bw -H
exit $fail
