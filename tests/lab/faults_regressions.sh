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
        --side "$side" --analyzer "$bin" 2>&1) || true  # non-zero with any false verdict: judged below
  line=$(grep -E "^faults: .* judged" <<<"$out" || true)
  echo "$name: $line"
  grep -qE "1 boots judged, 0 without a verdict, " <<<"$line" || status=1
  # Each false verdict must be a known defect (NAME.known: "step rule" lines, documented
  # in docs/fault-matrix.md); any other fails. Known ones that went away are only noted.
  known="$src/tests/pcaps/faults/$name.known"
  while read -r f; do
    [ -n "$f" ] || continue
    key=$(sed -E 's/^FALSE step ([0-9]+) .*\[([A-Z][0-9])\].*/\1 \2/' <<<"$f")
    if [ -f "$known" ] && grep -qx "$key" "$known"; then echo "  known defect: $f"; else echo "  NEW: $f"; status=1; fi
  done < <(grep -E "^FALSE" <<<"$out" || true)
  if [ -f "$known" ]; then
    while read -r k; do
      grep -qE "^FALSE step ${k% *} .*\[${k#* }\]" <<<"$out" || echo "  fixed (remove from $name.known): $k"
    done < <(grep -vE '^(#|$)' "$known")
  fi
done
exit $status
