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
exit $fail
