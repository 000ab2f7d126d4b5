#!/bin/sh
# usage: no_device_check.sh RDMADIAG TEST [OPTION...]
# On a host without RDMA devices: the test must exit non-zero with the driver hint.
bin=$1
test=$2
shift 2
out=$("$bin" perftest "$test" "$@" 2>&1)
rc=$?
[ "$rc" -ne 0 ] || { echo "exit status 0, expected failure"; exit 1; }
printf '%s\n' "$out" | grep -qF 'no RDMA devices found; is the rdma_rxe/siw/mlx5 driver loaded? see `rdmadiag devices`' ||
  { echo "message missing; got: $out"; exit 1; }
echo "ok: rc=$rc"
