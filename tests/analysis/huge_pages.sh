#!/bin/sh
# analyze -j 1 gives its flow state transparent huge pages where the kernel's
# THP mode is "madvise" (cli/heap_prefault.h): under a many-QP capture the
# kernel's own count (AnonHugePages, /proc/self/smaps_rollup) must show them;
# in any other mode the heap is pre-faulted in 4 KiB pages instead. The reports
# with and without (RDMADIAG_HUGE_PAGES=0, RDMADIAG_HEAP_PREFAULT=0) must be
# identical, text and JSON.
# usage: huge_pages.sh RDMADIAG GEN_CAPTURE WORK_DIR
set -u
bin=$1 gen=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
fail=0
"$gen" -o "$work/many.pcap" -n 60000 --qps 16384 --clients 1 --servers 1 --seed 5 > /dev/null 2>&1 || exit 1

run() {  # run NAME [env...]: text and JSON reports, the heap line on stderr
  name=$1
  shift
  env "$@" RDMADIAG_HUGE_PAGES_STATE=1 "$bin" analyze -j 1 --json "$work/$name.json" "$work/many.pcap" \
    > "$work/$name.txt" 2> "$work/$name.err"
  echo "exit $?" >> "$work/$name.txt"
}
run default
run small_pages RDMADIAG_HUGE_PAGES=0
run none RDMADIAG_HEAP_PREFAULT=0

grep -q '"flows"' "$work/default.json" || { echo "FAIL: no JSON report"; fail=1; }
for other in small_pages none; do
  for kind in txt json; do
    cmp -s "$work/default.$kind" "$work/$other.$kind" || { echo "FAIL: $kind report differs with $other"; fail=1; }
  done
done
grep -q "heap: THP mode '[a-z]*', pre-fault, 0 MiB marked huge, [1-9][0-9]* MiB pre-faulted; AnonHugePages: 0 kB" \
  "$work/small_pages.err" || { echo "FAIL: RDMADIAG_HUGE_PAGES=0:"; cat "$work/small_pages.err"; fail=1; }
grep -q "heap: THP mode '[a-z]*', off, 0 MiB marked huge, 0 MiB pre-faulted" "$work/none.err" ||
  { echo "FAIL: RDMADIAG_HEAP_PREFAULT=0:"; cat "$work/none.err"; fail=1; }

# What the default must be on this machine, read from the kernel here, not from rdmadiag.
mode=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "no THP")
echo "THP: $mode"
cat "$work/default.err"
if echo "$mode" | grep -q '\[madvise\]'; then
  kb=$(sed -n "s/.*heap: THP mode 'madvise', huge pages, [0-9]* MiB marked huge, 0 MiB pre-faulted; AnonHugePages: \([0-9]*\) kB.*/\1/p" \
    "$work/default.err")
  # 16,384 QPs: ~50 MB of flow state; the kernel must hold most of it in 2 MiB pages.
  [ -n "$kb" ] && [ "$kb" -ge 16384 ] || { echo "FAIL: expected huge pages (THP madvise)"; fail=1; }
else
  grep -q "heap: THP mode '[a-z]*', pre-fault, 0 MiB marked huge" "$work/default.err" ||
    { echo "FAIL: expected the 4 KiB pre-fault (THP not madvise)"; fail=1; }
fi
rm -f "$work/many.pcap"
[ "$fail" = 0 ] && echo "OK: the heap as the kernel's THP mode allows, reports identical"
exit "$fail"
