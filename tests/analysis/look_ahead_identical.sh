#!/bin/sh
# Loading flow states ahead (cli/analysis_session.h frames(), decode::Analyzer::
# look_ahead) only starts loads: analyze must print the very same reports with
# it as without. For every capture in tests/pcaps (real rxe/siw traffic, every
# encapsulation, pause frames, CE marks), several files at once, generated
# captures with thousands of connections between two hosts (loss, CE marks and
# CNPs, every encapsulation), pcapng files (one with two link types) and one
# cut inside a record (damage): the text
# report, the JSON report and stderr, RDMADIAG_LOOK_AHEAD=always against never,
# byte for byte. The default (automatic) must load ahead on the many-connection
# captures and not on the small ones, and then print the same too; and so
# must the default with the file copied into a buffer (RDMADIAG_READ_COPY=1)
# instead of mapped (capture::FileReader::set_map_windows).
# usage: look_ahead_identical.sh RDMADIAG GEN_CAPTURE PCAP_DIR WORK_DIR
set -u
bin=$1 gen=$2 pcaps=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
fail=0

run() {  # name mode files...  (mode: always, never, automatic, or copied: automatic, not mapped)
  name=$1 mode=$2
  shift 2
  out="$work/$name.$mode"
  copy= ahead=$mode
  [ "$mode" = copied ] && copy=1 ahead=automatic
  set -- env ${copy:+RDMADIAG_READ_COPY=1} RDMADIAG_LOOK_AHEAD=$ahead "$bin" analyze "$@"
  "$@" > "$out.txt" 2> "$out.err"
  echo "exit $?" >> "$out.txt"
  "$@" -q --json "$out.json" 2>> "$out.err"
  echo "exit $?" >> "$out.json"
  RDMADIAG_LOOK_AHEAD_STATS=1 "$@" -q 2> "$out.stats" >/dev/null
  sed -n 's/^rdmadiag analyze: frames loaded ahead: //p' "$out.stats" > "$out.ahead"
  sed -n 's/^rdmadiag analyze: windows mapped: //p' "$out.stats" > "$out.mapped"
}

check() {  # name files...
  name=$1
  shift
  for mode in always never automatic copied; do run "$name" "$mode" "$@"; done
  grep -q '"flows"' "$work/$name.never.json" || { echo "FAIL $name: no JSON report"; fail=1; return; }
  [ "$(cat "$work/$name.always.ahead")" -gt 0 ] || { echo "FAIL $name: nothing loaded ahead with always"; fail=1; }
  [ "$(cat "$work/$name.never.ahead")" -eq 0 ] || { echo "FAIL $name: frames loaded ahead with never"; fail=1; }
  [ "$(cat "$work/$name.never.mapped")" -gt 0 ] || { echo "FAIL $name: no window mapped by default"; fail=1; }
  [ "$(cat "$work/$name.copied.mapped")" -eq 0 ] || { echo "FAIL $name: windows mapped with RDMADIAG_READ_COPY"; fail=1; }
  for mode in always automatic copied; do
    for kind in txt json err; do
      if ! cmp -s "$work/$name.never.$kind" "$work/$name.$mode.$kind"; then
        echo "FAIL $name: $kind with look-ahead $mode differs from never:"
        diff "$work/$name.never.$kind" "$work/$name.$mode.$kind" | head -10
        fail=1
      fi
    done
  done
}

n=0
for f in "$pcaps"/*.pcap "$pcaps"/derived/*.pcap "$pcaps"/pfc/*.pcap "$pcaps"/cc/*.pcap; do
  check "$(basename "$f" .pcap)" "$f"
  [ "$(cat "$work/$(basename "$f" .pcap).automatic.ahead")" -eq 0 ] ||
    { echo "FAIL $f: a small capture loaded ahead by default"; fail=1; }
  n=$((n + 1))
done
[ "$n" -ge 20 ] || { echo "FAIL: only $n captures found in $pcaps"; fail=1; }
check several "$pcaps/siw_read_bw.pcap" "$pcaps/derived/rxe_ib_lnh3.pcap" "$pcaps/rxe_write_bw_loss.pcap" \
  "$pcaps/derived/rxe_roce_v1.pcap" "$pcaps/lab_rxe_reorder.pcap"

# Thousands of connections between two hosts (the states outgrow the caches):
# the default loads ahead.
many() {  # name gen-options...
  name=$1
  shift
  "$gen" -o "$work/$name.pcap" --clients 1 --servers 1 --seed 5 "$@" > /dev/null 2>&1 || exit 1
  check "$name" "$work/$name.pcap"
  [ "$(cat "$work/$name.automatic.ahead")" -gt 0 ] ||
    { echo "FAIL $name: the default did not load ahead with many connections"; fail=1; }
}
# RDMADIAG_LOOK_AHEAD_PACKETS (default 120000): tests/sanitize.sh, where every run is
# several times slower, takes fewer; still about ten packets per connection.
packets=${RDMADIAG_LOOK_AHEAD_PACKETS:-120000}
many qps4096_loss -n "$packets" --qps 4096 --loss 0.003
many qps4096_ce -n "$packets" --qps 4096 --ce 0.02
"$gen" -o "$work/mix.pcap" -n $((packets * 5 / 4)) --qps 3000 --encap mix --loss 0.002 --seed 7 > /dev/null 2>&1 || exit 1
check mix "$work/mix.pcap"

# pcapng read in place (blocks to pass over, comments, big-endian) and one
# whose second interface has another link type (read by PcapngReader, which
# takes over from the window mid-file): each frame decoded with its own.
here=$(dirname "$0")
python3 "$here/to_pcapng.py" "$work/mix.pcap" "$work/mix.pcapng" --blocks --comments || exit 1
python3 "$here/to_pcapng.py" "$work/qps4096_loss.pcap" "$work/qps4096_be.pcapng" --big-endian || exit 1
python3 "$here/to_pcapng.py" "$pcaps/rxe_write_bw_loss.pcap" "$work/two_link_types.pcapng" --sll-half || exit 1
check mix_pcapng "$work/mix.pcapng"
check qps4096_be_pcapng "$work/qps4096_be.pcapng"
check two_link_types_pcapng "$work/two_link_types.pcapng"

# Cut inside a record: the same damage reported after the same records.
size=$(wc -c < "$work/qps4096_loss.pcap")
head -c $((size * 3 / 5 + 7)) "$work/qps4096_loss.pcap" > "$work/cut.pcap" || exit 1
check cut "$work/cut.pcap"
grep -q "damaged capture" "$work/cut.never.err" || { echo "FAIL: the cut capture is not reported damaged"; fail=1; }

[ "$fail" -eq 0 ] && echo "look-ahead: the same reports for $n captures and the generated ones"
exit "$fail"
