#!/usr/bin/env bash
# The perftest timing acceptance (docs/perftest.md): on one rxe VM pair,
# `ib_X_lat -s 2 -n ITERS` and `rdmadiag perftest X-lat -s 2 -n ITERS`
# alternated ROUNDS times for X = write, read, send, then
# tests/perftest/lab_compare.py prints every run's t_typical, the medians,
# rdmadiag's median relative to perftest's and each tool's spread.
# A measurement, not a test: run it on an otherwise idle machine. RDMADIAG must
# be an absolute path (the VMs see the host's files at the same paths, but run
# the commands in another directory).
#   tests/perftest/lab_acceptance.sh RDMADIAG OUT_DIR [ITERS (400)] [ROUNDS (7)] [VERBS ("write read send")]
# With RDMADIAG_FIRST=1 each round runs rdmadiag before perftest (to rule out an order effect).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rd=$1 out=$2 iters=${3:-400} rounds=${4:-7} verbs=${5:-write read send}
case $rd in /*) ;; *) echo "lab_acceptance.sh: RDMADIAG must be an absolute path (the VMs run the commands in another directory): $rd" >&2; exit 2 ;; esac
dev='-d $LAB_DEV -x 1'
args=()
for _ in $(seq "$rounds"); do
  for v in $verbs; do
    ib=(--server "ib_${v}_lat $dev -F -s 2 -n $iters" --client "ib_${v}_lat $dev -F -s 2 -n $iters \$LAB_SERVER_IP")
    ours=(--server "$rd perftest ${v}-lat $dev -s 2 -n $iters" --client "$rd perftest ${v}-lat $dev -s 2 -n $iters \$LAB_SERVER_IP")
    if [ "${RDMADIAG_FIRST:-0}" = 1 ]; then args+=("${ours[@]}" "${ib[@]}"); else args+=("${ib[@]}" "${ours[@]}"); fi
  done
done
"$here/../lab/run" --mode rxe --out "$out" --replace --timeout 3600 -q "${args[@]}"
python3 "$here/lab_compare.py" "$out"
