#!/bin/sh
# analyze -j N must print the very report -j 1 prints (issue 10: "merges results
# deterministically, identical output for any N"). For every capture in
# tests/pcaps and tests/pcaps/derived (real rxe/siw traffic: loss, reordering,
# iWARP, every encapsulation), a several-file run, and a generated capture with
# many connections of every encapsulation and loss: the text report and the
# --json report (which also carries the timeline and the latency histograms),
# plus --csv, --html and --metrics-file, are compared byte for byte for -j 1, 2, 3 and 4, and no run may
# have fallen back to one thread. The -j 1 reports themselves are checked
# against tshark and the lab's ground truth by the other tests.
# -j 1 and the split of -j N map the file (capture/file_reader.h, cli/split_read.h);
# "2c" is -j 2 with the parts copied instead (RDMADIAG_READ_COPY=1).
# usage: jobs_identical.sh RDMADIAG GEN_CAPTURE PCAP_DIR WORK_DIR
#   env RDMADIAG_JOBS_COMPARE: the -j values compared with -j 1 (default "2 2c 3 4";
#   tests/sanitize.sh, where every run is several times slower, compares "3" only)
set -u
bin=$1 gen=$2 pcaps=$3 work=$4
compare=${RDMADIAG_JOBS_COMPARE:-2 2c 3 4}
rm -rf "$work" && mkdir -p "$work" || exit 1
fail=0

# One run: its text report, its JSON, CSV, HTML and metrics reports, its stderr.
run() {  # name jobs files...
  name=$1 jobs=$2
  shift 2
  out="$work/$name.j$jobs"
  copy=
  case $jobs in *c) copy=1 jobs=${jobs%c} ;; esac
  env ${copy:+RDMADIAG_READ_COPY=1} "$bin" analyze -j "$jobs" "$@" > "$out.txt" 2> "$out.err"
  echo "exit $?" >> "$out.txt"
  env ${copy:+RDMADIAG_READ_COPY=1} "$bin" analyze -q -j "$jobs" --json "$out.json" --csv "$out.csv" --html "$out.html" \
    --metrics-file "$out.prom" "$@" 2>> "$out.err"
  echo "exit $?" >> "$out.json"
}

check() {  # name files...
  name=$1
  shift
  for j in 1 $compare; do run "$name" "$j" "$@"; done
  if [ ! -s "$work/$name.j1.json" ] || ! grep -q '"flows"' "$work/$name.j1.json"; then
    echo "FAIL $name: no JSON report from -j 1"
    fail=1
    return
  fi
  for j in $compare; do
    for kind in txt json csv html prom err; do
      if ! cmp -s "$work/$name.j1.$kind" "$work/$name.j$j.$kind"; then
        echo "FAIL $name: -j $j $kind differs from -j 1:"
        diff "$work/$name.j1.$kind" "$work/$name.j$j.$kind" | head -10
        fail=1
      fi
    done
    if grep -q "analysing on one thread\|flow-table bound" "$work/$name.j$j.err"; then
      echo "FAIL $name: -j $j did not run sharded:"
      cat "$work/$name.j$j.err"
      fail=1
    fi
  done
}

n=0
for f in "$pcaps"/*.pcap "$pcaps"/derived/*.pcap; do
  case "$f" in *corrupt_ip_*) continue ;; esac  # -j 2 falls back on these by design (below)
  check "$(basename "$f" .pcap)" "$f"
  n=$((n + 1))
done
[ "$n" -ge 20 ] || { echo "FAIL: only $n captures found in $pcaps"; fail=1; }

# Pause frames (no IP addresses: every shard keeps their state) among RoCE, with and without a link speed.
for f in "$pcaps"/pfc/*.pcap; do
  check "$(basename "$f" .pcap)_10g" --link-speed 10 --pause-storm-ms 20 "$f"
  check "$(basename "$f" .pcap)" "$f"
done

# ECN CE marks and CNPs (docs/congestion.md): each flow's marks and CNPs travel between the same two addresses.
for f in "$pcaps"/cc/*.pcap; do
  check "$(basename "$f" .pcap)" "$f"
done

# Several files, of different link types, numbered as one input.
check several "$pcaps/siw_read_bw.pcap" "$pcaps/derived/rxe_ib_lnh3.pcap" "$pcaps/rxe_write_bw_loss.pcap" \
  "$pcaps/derived/rxe_roce_v1.pcap" "$pcaps/lab_rxe_reorder.pcap"

# Many connections over every encapsulation, with loss: flows spread over the shards.
"$gen" -o "$work/mix.pcap" -n 200000 --qps 96 --encap mix --loss 0.002 --seed 7 > /dev/null 2>&1 || exit 1
check generated_mix "$work/mix.pcap"
"$gen" -o "$work/ib.pcap" -n 60000 --qps 48 --encap ib --loss 0.002 --seed 3 > /dev/null 2>&1 || exit 1
check generated_ib "$work/ib.pcap"
# Flows idle for more than 120 s are retired at the sweep after every 65,536th
# frame, and come back as new flows: A, then other traffic 300 s later across
# the sweep at frame 131,072, then A's connections again 600 s later.
"$gen" -o "$work/a.pcap" -n 100000 --qps 16 --seed 1 > /dev/null 2>&1 || exit 1
"$gen" -o "$work/b.pcap" -n 40000 --qps 16 --encap roce_v2_ipv6 --seed 2 > /dev/null 2>&1 || exit 1
python3 - "$work" <<'PY' || exit 1
import struct, sys
work = sys.argv[1]
def shift(src, dst, secs):  # classic pcap, little-endian (what gen_capture writes)
    d = open(f"{work}/{src}", "rb").read()
    assert struct.unpack("<I", d[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D)
    out, i = bytearray(d[:24]), 24
    while i + 16 <= len(d):
        ts, frac, cap, wire = struct.unpack("<IIII", d[i:i + 16])
        out += struct.pack("<IIII", ts + secs, frac, cap, wire) + d[i + 16:i + 16 + cap]
        i += 16 + cap
    open(f"{work}/{dst}", "wb").write(out)
shift("b.pcap", "b300.pcap", 300)
shift("a.pcap", "a600.pcap", 600)
PY
check idle_flows_retired "$work/a.pcap" "$work/b300.pcap" "$work/a600.pcap"
python3 - "$work/idle_flows_retired.j1.json" <<'PY' || fail=1
import json, sys
r = json.loads(open(sys.argv[1]).read().rsplit("exit", 1)[0])
a_flows = {(f["src"], f["dst"], f["dest_qp"]) for f in r["flows"] if f["first_frame"] <= 100000}
again = [f for f in r["flows"] if f["first_frame"] > 140000 and (f["src"], f["dst"], f["dest_qp"]) in a_flows]
assert again, "no flow of the first file was retired and seen again as a new flow"
PY
rm -f "$work/a.pcap" "$work/b.pcap" "$work/b300.pcap" "$work/a600.pcap"

# The generated report must hold what makes the merge non-trivial.
python3 - "$work/generated_mix.j1.json" <<'PY' || fail=1
import json, sys
r = json.loads(open(sys.argv[1]).read().rsplit("exit", 1)[0])
flows = r["flows"]
kinds = {f["transport"] for f in flows}
assert len(flows) >= 100, f"only {len(flows)} flows"
assert {"roce_v2", "roce_v1"} <= kinds, kinds  # native IB: the other capture (its own link type)
assert r["summary"]["anomalies"]["total"] > 0, "no anomalies (loss expected)"
assert len(r["iwarp"]["flows"]) > 0, "no iWARP flows"
assert any(f["peer_flow"] != f["flow"] for f in flows if "peer_flow" in f), "no paired flows"
PY

# The split read (cli/split_read.h) in small parts: many part boundaries, each
# confirmed by a walk; then the same file cut inside a record
# (damage: libpcap's verdict after the last whole record, as -j 1 says it).
export RDMADIAG_JOBS_PART_BYTES=40000
check small_parts "$work/mix.pcap"
python3 - "$work/mix.pcap" "$work/mix_cut.pcap" <<'PY' || exit 1
import sys
d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(d[:len(d) * 3 // 5 + 7])
PY
check small_parts_cut "$work/mix_cut.pcap"
grep -q "damaged capture" "$work/small_parts_cut.j1.err" || { echo "FAIL: the cut capture is not reported damaged"; fail=1; }
# Damage in the first of two inputs: each thread reads the rest of the first
# itself, then the second is split again; the shard assignment goes on across both.
check cut_then_more "$work/mix_cut.pcap" "$pcaps/rxe_write_bw_loss.pcap"
# pcapng, read in place too (capture/file_reader.h) and split the same way,
# written by tests/analysis/to_pcapng.py: with blocks to pass over and packet
# options, and big-endian. Its report must be the classic pcap file's (but for
# the file's name), for -j 1 as for -j N; cut inside a block, libpcap's verdict.
here=$(dirname "$0")
python3 "$here/to_pcapng.py" "$work/mix.pcap" "$work/mix.pcapng" --blocks --comments || exit 1
python3 "$here/to_pcapng.py" "$work/mix.pcap" "$work/mix_be.pcapng" --big-endian || exit 1
check small_parts_pcapng "$work/mix.pcapng"
check small_parts_pcapng_be "$work/mix_be.pcapng"
for name in small_parts_pcapng small_parts_pcapng_be; do
  for kind in txt json; do
    sed "s#$work/mix[_be]*.pcapng#MIX#" "$work/$name.j1.$kind" > "$work/$name.named.$kind"
    sed "s#$work/mix.pcap#MIX#" "$work/small_parts.j1.$kind" > "$work/small_parts.named.$kind"
    cmp -s "$work/$name.named.$kind" "$work/small_parts.named.$kind" ||
      { echo "FAIL: $name's $kind report differs from the classic pcap file's:"; diff "$work/$name.named.$kind" "$work/small_parts.named.$kind" | head; fail=1; }
  done
done
# Split to its end, as the classic file: the walk verified as many ICRCs.
for f in mix.pcap mix.pcapng mix_be.pcapng; do
  RDMADIAG_JOBS_STATS=1 "$bin" analyze -q -j 2 "$work/$f" 2>&1 | grep -o "ICRCs verified by the walk: [0-9]*" > "$work/$f.icrc"
done
if ! grep -q ": [1-9]" "$work/mix.pcap.icrc" || ! cmp -s "$work/mix.pcap.icrc" "$work/mix.pcapng.icrc" ||
   ! cmp -s "$work/mix.pcap.icrc" "$work/mix_be.pcapng.icrc"; then
  echo "FAIL: the pcapng files were not split to their end like the classic one:"; cat "$work"/mix*.icrc; fail=1
fi
python3 - "$work/mix.pcapng" "$work/mix_cut.pcapng" <<'PY' || exit 1
import sys
d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(d[:len(d) * 2 // 3 + 5])
PY
check small_parts_pcapng_cut "$work/mix_cut.pcapng"
grep -q "damaged capture" "$work/small_parts_pcapng_cut.j1.err" || { echo "FAIL: the cut pcapng file is not reported damaged"; fail=1; }
# A second interface of another link type described half-way: the split ends
# there and every thread reads on, each record with its own interface's link type.
python3 "$here/to_pcapng.py" "$pcaps/rxe_write_bw_loss.pcap" "$work/two_link_types.pcapng" --sll-half || exit 1
check two_link_types_pcapng "$work/two_link_types.pcapng"
rm -f "$work/mix.pcapng" "$work/mix_be.pcapng" "$work/mix_cut.pcapng" "$work/two_link_types.pcapng"
RDMADIAG_JOBS_STATS=1 "$bin" analyze -q -j 3 "$work/mix.pcap" 2> "$work/rewalks.err"
grep -q "split parts walked again: 0;" "$work/rewalks.err" || { echo "FAIL: split parts walked again:"; cat "$work/rewalks.err"; fail=1; }
# The walk verified RoCEv2 ICRCs ahead of the shards (decode/icrc_hint.h), and the reports above are -j 1's.
grep -q "ICRCs verified by the walk: [1-9]" "$work/rewalks.err" || { echo "FAIL: no ICRC verified by the walk:"; cat "$work/rewalks.err"; fail=1; }
# Frames whose payload is itself a chain of well-formed pcap record headers
# (ending exactly where the frame ends): a part of the file that starts inside
# one finds a false first record; the confirming walk must catch it (walk the part
# again) or the frame count, and so the report, would differ from -j 1's.
python3 - "$work/fake_chain.pcap" <<'PY' || exit 1
import struct, sys
out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
for i in range(300):
    ts = 1700000000 + i // 100
    fake = b"".join(struct.pack("<IIII", ts, 1000 * k, 48, 48) + bytes(48) for k in range(62))
    frame = bytes(12) + b"\x88\xb5" + bytes(50) + fake  # local experimental EtherType: counted only
    out += struct.pack("<IIII", ts, i, len(frame), len(frame)) + frame
open(sys.argv[1], "wb").write(out)
PY
check fake_record_chains "$work/fake_chain.pcap"
RDMADIAG_JOBS_STATS=1 "$bin" analyze -q -j 2 "$work/fake_chain.pcap" 2> "$work/fake.err"
grep -q "split parts walked again: [1-9]" "$work/fake.err" || { echo "FAIL: no false record start caught:"; cat "$work/fake.err"; fail=1; }
unset RDMADIAG_JOBS_PART_BYTES
rm -f "$work/mix_cut.pcap"

# A frame whose decoded addresses disagree with the reader's parse (simulated):
# the run is repeated on one thread, says so, and prints -j 1's report.
RDMADIAG_JOBS_TEST_BAD_KEY=5000 "$bin" analyze -j 2 "$work/mix.pcap" > "$work/bad_key.txt" 2> "$work/bad_key.err"
"$bin" analyze -j 1 "$work/mix.pcap" > "$work/bad_key.j1.txt" 2>/dev/null
if ! grep -q "analysing on one thread" "$work/bad_key.err" || ! cmp -s "$work/bad_key.txt" "$work/bad_key.j1.txt"; then
  echo "FAIL: a shard-key disagreement did not make -j 2 fall back to one thread with -j 1's report"
  cat "$work/bad_key.err"
  fail=1
fi

# A corrupt packet alone on its address pair (a bit error in an IPv4 address; real
# captures: tests/pcaps/*corrupt_ip_*.pcap): one analyzer ties it to the flow of the
# hosts one bit away, which -j 2 may have put in another shard, so -j 2 runs on one
# thread, says so, and prints -j 1's report (no false loss).
for f in "$pcaps"/*corrupt_ip_*.pcap; do
  "$bin" analyze -j 2 "$f" > "$work/ip_bit.txt" 2> "$work/ip_bit.err"
  "$bin" analyze -j 1 "$f" > "$work/ip_bit.j1.txt" 2>/dev/null
  if ! grep -q "analysing on one thread" "$work/ip_bit.err" || ! cmp -s "$work/ip_bit.txt" "$work/ip_bit.j1.txt"; then
    echo "FAIL $f: a corrupt packet with a damaged address did not make -j 2 fall back to one thread with -j 1's report"
    cat "$work/ip_bit.err"
    fail=1
  fi
done

# And the frames were spread: every shard has some (shard 0, the reader's own,
# a smaller share by design), each worker shard of -j 2 or -j 3 a quarter or more.
for j in 2 3; do
  RDMADIAG_JOBS_STATS=1 "$bin" analyze -q -j "$j" "$work/mix.pcap" 2> "$work/spread.err"
  python3 - "$j" "$work/spread.err" "$work/mix.pcap" <<'PY' || fail=1
import re, struct, sys
jobs, text = int(sys.argv[1]), open(sys.argv[2]).read()
d = open(sys.argv[3], "rb").read()  # classic pcap, little-endian: its records counted here
records, at = 0, 24
while at + 16 <= len(d):
    at += 16 + struct.unpack_from("<I", d, at + 8)[0]
    records += 1
m = re.search(r"frames per shard:([ 0-9]+)", text)
assert m, "no frames-per-shard line: " + text
counts = [int(x) for x in m.group(1).split()]
assert len(counts) == jobs and sum(counts) == records, (counts, records)
assert min(counts) * 50 > sum(counts), f"-j {jobs}: a shard (almost) without frames: {counts}"
assert all(c * 4 >= sum(counts) for c in counts[1:]), f"-j {jobs}: frames badly spread over the workers: {counts}"
PY
done

rm -f "$work/mix.pcap" "$work/ib.pcap"
[ "$fail" = 0 ] && echo "OK: -j $compare identical to -j 1 on $n captures, a several-file run and two generated captures"
exit "$fail"
