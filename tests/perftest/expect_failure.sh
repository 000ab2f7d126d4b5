#!/bin/sh
# usage: expect_failure.sh TEXT COMMAND [ARG...]
# Runs COMMAND; succeeds only when it exits 1 and its output (stdout or stderr) contains TEXT.
# For lab steps whose point is the error message (refused, timeout, mismatch).
want=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 1 ] || { echo "expect_failure: exit status $rc, expected 1"; exit 1; }
printf '%s\n' "$out" | grep -qF -- "$want" || { echo "expect_failure: no '$want' in the output"; exit 1; }
echo "expect_failure: ok (exit 1, '$want')"
