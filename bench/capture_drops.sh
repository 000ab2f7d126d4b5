#!/usr/bin/env bash
# Kernel drops of `rdmadiag capture -w` and `tcpdump -w` on the same replayed
# burst: a veth pair in a fresh network namespace, tcpreplay --topspeed of a
# real RoCEv2 capture looped LOOPS times onto one end, each capturer on the
# other end in turn. Needs root. Prints one line per run.
#   bench/capture_drops.sh RDMADIAG [LOOPS] [RUNS] [extra capture options, e.g. -B 65536]
set -uo pipefail
rdmadiag=$1
loops=${2:-200}
runs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
extra=("$@")
pcap=$(cd "$(dirname "$0")/.." && pwd)/tests/pcaps/rxe_write_bw_loss.pcap
ns=rdmadiag_bench_$$
work=$(mktemp -d)
trap 'ip netns del $ns 2>/dev/null; rm -rf "$work"' EXIT
ip netns add $ns
ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n $ns link add va mtu 9000 type veth peer name vb mtu 9000
ip -n $ns link set va up
ip -n $ns link set vb up

run_one() {  # run_one NAME CMD...
  local name=$1
  shift
  ip netns exec $ns "$@" 2>"$work/err" >/dev/null &
  local pid=$!
  sleep 1
  local rate
  rate=$(ip netns exec $ns tcpreplay -i va --topspeed --loop "$loops" "$pcap" 2>&1 | awk '/Rated:/ {print $2, $3, $4, $5; exit}')
  sleep 1
  kill -INT $pid
  wait $pid
  local recv drop
  if [ "$name" = tcpdump ]; then
    recv=$(awk '/packets received by filter/ {print $1}' "$work/err")
    drop=$(awk '/packets dropped by kernel/ {print $1}' "$work/err")
  else
    recv=$(sed -n 's/.*: vb: \([0-9]*\) received, \([0-9]*\) dropped by kernel.*/\1/p' "$work/err")
    drop=$(sed -n 's/.*: vb: \([0-9]*\) received, \([0-9]*\) dropped by kernel.*/\2/p' "$work/err")
  fi
  local unanalysed=""
  [ "$name" = rdmadiag ] && unanalysed="  not analysed $(sed -n 's/^rdmadiag capture: \([0-9]*\) packets not analysed (.*/\1/p' "$work/err" | grep . || echo 0)"
  printf '%-9s sent %s  received %s  kernel drops %s (%s%%)%s\n' "$name" "$rate" "$recv" "$drop" \
    "$(awk -v d="$drop" -v r="$recv" 'BEGIN { printf "%.1f", r ? 100 * d / r : 0 }')" "$unanalysed"
}

echo "burst: $(basename "$pcap") x $loops loops ($(( loops * 984 )) packets), extra options: ${extra[*]:-none}"
for _ in $(seq "$runs"); do
  run_one rdmadiag "$rdmadiag" capture --no-status -q -i vb -w "$work/r.pcap" --force "${extra[@]}"
  run_one tcpdump tcpdump -i vb -w "$work/t.pcap" "${extra[@]}"
done
