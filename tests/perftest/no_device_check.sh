#!/bin/sh
# usage: no_device_check.sh RDMADIAG TEST
# On a host without RDMA devices: the test must exit non-zero with the driver hint.
out=$("$1" perftest "$2" 2>&1)
rc=$?
[ "$rc" -ne 0 ] || { echo "exit status 0, expected failure"; exit 1; }
printf '%s\n' "$out" | grep -qF 'no RDMA devices found; is the rdma_rxe/siw/mlx5 driver loaded? see `rdmadiag devices`' ||
  { echo "message missing; got: $out"; exit 1; }
echo "ok: rc=$rc"
