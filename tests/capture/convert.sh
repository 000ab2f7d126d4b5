#!/usr/bin/env bash
# `rdmadiag convert`: LINKTYPE_INFINIBAND (247) -> ERF type 21 checked byte for
# byte against ERF records made independently (tests/pcaps/derived, Python
# script), and opened by tshark; pcap -> pcapng -> pcap keeps every packet.
#   convert.sh RDMADIAG PCAPDIR
set -uo pipefail
rdmadiag=$1
pcaps=$2
tool="python3 $(cd "$(dirname "$0")" && pwd)/pcaptool.py"
work=$(mktemp -d /tmp/rdmadiag-convert-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for v in lnh2 lnh3; do
  in="$pcaps/derived/rxe_ib_$v.pcap"
  ref="$pcaps/derived/rxe_ib_${v}_erf.pcap"
  "$rdmadiag" convert "$in" "$work/$v.pcap" --to erf || fail "$v: convert failed"
  [ "$($tool linktype "$work/$v.pcap")" = 197 ] || fail "$v: output link type is not ERF (197)"
  # Whole records (ERF header + packet) equal the independently made ones.
  $tool same "$work/$v.pcap" "$ref" || fail "$v: ERF records differ from $ref"
  $tool erfdata "$in" "$work/$v.pcap" || fail "$v: ERF payloads differ from the 247 packets"
  if command -v tshark >/dev/null; then
    n=$($tool count "$in")
    got=$(tshark -r "$work/$v.pcap" -Y infiniband.bth -T fields -e frame.number 2>/dev/null | wc -l)
    [ "$got" -eq "$n" ] || fail "$v: tshark decodes $got of $n packets as InfiniBand"
  fi
done
"$rdmadiag" convert "$pcaps/rxe_write_lat.pcap" "$work/x.pcap" --to erf >/dev/null 2>&1 && fail "Ethernet capture accepted for --to erf"

f="$pcaps/siw_write_lat.pcap"
"$rdmadiag" convert "$f" "$work/a.pcapng" || fail "pcap -> pcapng failed"
head -c 4 "$work/a.pcapng" | od -An -tx1 | grep -q "0a 0d 0d 0a" || fail "output is not pcapng"
"$rdmadiag" convert "$work/a.pcapng" "$work/b.pcap" || fail "pcapng -> pcap failed"
$tool same "$work/a.pcapng" "$f" || fail "pcapng packets differ"
$tool same "$work/b.pcap" "$f" || fail "round-trip packets differ"
"$rdmadiag" convert "$f" "$work/b.pcap" >/dev/null 2>&1 && fail "overwrote an existing file without --force"
echo "ok: ERF byte-equal, tshark reads it; pcap <-> pcapng round trip"
