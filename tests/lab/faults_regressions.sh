#!/usr/bin/env bash
# Re-judges fault-matrix boots that once gave false verdicts (tests/pcaps/faults/*.tar.xz:
# a boot's wire capture, its netem and kernel counters, perftest's output) with the
# fault-matrix checker: every verdict of `rdmadiag analyze` must hold against tshark,
# the ICRC, netem's and the kernel's counters. Runs without the lab.
#   faults_regressions.sh RDMADIAG SOURCE_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
command -v tshark >/dev/null || { echo "tshark missing: skipped"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
status=0
for t in "$src"/tests/pcaps/faults/*.tar.xz; do
  name=$(basename "$t" .tar.xz)
  mkdir -p "$work/$name"
  tar -xJf "$t" -C "$work/$name"
  boot=$(ls "$work/$name")                 # mode-fault-side, as tests/lab/faults names it
  IFS=- read -r mode fault side <<<"$boot"
  out=$(python3 "$src/tests/lab/faults" --check-only --out "$work/$name" --mode "$mode" --fault "$fault" \
        --side "$side" --analyzer "$bin" 2>&1) || status=1
  line=$(grep -E "^faults: .* judged" <<<"$out" || true)
  echo "$name: $line"
  grep -E "^FALSE" <<<"$out" || true
  grep -qE "1 boots judged, 0 without a verdict, 0 false verdicts" <<<"$line" || status=1
done
exit $status
