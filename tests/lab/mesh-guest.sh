#!/bin/bash
# Runs inside each VM of tests/lab/mesh-lab (chrooted into the host's read-only root, see
# initramfs-init; copied into the VM's results share as guest.sh). VM 0 launches
# `mpirun` (cmd.N) once per step; the other VMs serve Open MPI's launcher through
# tests/lab/mpi_agent.py. Before each step every VM installs that step's impairments
# (netem.N: lines "DEST_IP OPTIONS" or "all OPTIONS") and marks itself ready in the
# shared rendezvous directory; VM 0 starts only when all are ready, the others move on
# once VM 0 marks the step done.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LC_ALL=C
cd /tmp/lab || exit 1
# shellcheck disable=SC1091
. ./job.env   # LAB_INDEX LAB_HOSTS LAB_MY_IP LAB_PEERS LAB_DEV LAB_STEPS LAB_STEP_TIMEOUT LAB_KMODS LAB_AGENT
export LAB_INDEX LAB_HOSTS LAB_MY_IP LAB_PEERS LAB_DEV

note() { echo "[$(cut -d' ' -f1 /proc/uptime)] $*"; }

note "guest $LAB_INDEX of $LAB_HOSTS up"
hostname "lab$LAB_INDEX"   # Open MPI refuses the initramfs's "(none)"
ip link set lo up
ip addr add "$LAB_MY_IP/24" dev eth0
ip link set eth0 up
# Per-destination impairments need the prio qdisc and the u32 classifier, which the lab's
# initramfs does not load: the same kernel's modules, read from the host over 9p.
for m in sch_prio cls_u32; do
  grep -q "^$m " /proc/modules || insmod "$LAB_KMODS/$m.ko" || echo "insmod $m failed" >>errors
done
rdma link add "$LAB_DEV" type rxe netdev eth0 || echo "rdma link add $LAB_DEV failed" >>errors

deadline=$(( $(date +%s) + 120 ))
for ip in $LAB_PEERS; do
  until busybox ping -c 1 -W 1 "$ip" >/dev/null 2>&1; do
    [ "$(date +%s)" -ge "$deadline" ] && { echo "peer $ip not reachable" >>errors; break; }
  done
done
: >reachable
note "peers reachable: $LAB_PEERS"

# set_impairments FILE: replaces eth0's root qdisc. "all OPTIONS": netem on every packet;
# "IP OPTIONS": a prio qdisc whose extra bands (4, 5, ...) hold a netem each, with a u32
# filter sending packets for IP there; everything else takes prio's usual bands.
set_impairments() {
  tc qdisc del dev eth0 root 2>/dev/null
  [ -s "$1" ] || return 0
  local dest opts band=4 lines
  lines=$(grep -c . "$1")
  if grep -q '^all ' "$1"; then
    read -r dest opts <"$1"
    # shellcheck disable=SC2086  # netem options are words
    tc qdisc add dev eth0 root handle 1: netem $opts || echo "netem $opts failed" >>errors
    return 0
  fi
  tc qdisc add dev eth0 root handle 1: prio bands $((3 + lines)) priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 \
    || echo "prio qdisc failed" >>errors
  while read -r dest opts; do
    # shellcheck disable=SC2086
    tc qdisc add dev eth0 parent "1:$band" handle "$((band * 10)):" netem $opts || echo "netem $opts failed" >>errors
    tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst "$dest/32" flowid "1:$band" \
      || echo "u32 filter for $dest failed" >>errors
    band=$((band + 1))
  done <"$1"
}

snapshot() {  # snapshot PREFIX: rxe port counters and eth0's qdiscs
  local f v
  for f in /sys/class/infiniband/*/ports/*/hw_counters/*; do
    v=; read -r v <"$f" 2>/dev/null
    printf '%s\t%s\n' "${f##*/}" "$v"
  done >"$1.counters"
  tc -s qdisc show dev eth0 >"$1.qdisc" 2>&1
}

wait_for() {  # wait_for SECONDS FILE...: true once every FILE exists
  local end=$(( $(date +%s) + $1 )) f; shift
  for f in "$@"; do
    until [ -e "$f" ]; do [ "$(date +%s)" -ge "$end" ] && return 1; sleep 0.2; done
  done
}

if [ "$LAB_INDEX" -ne 0 ]; then
  python3 "$LAB_AGENT" serve 2222 --sessions "$LAB_STEPS" --timeout "$LAB_STEP_TIMEOUT" >agent.log 2>&1 &
  agent=$!
fi
for i in $(seq 1 "$LAB_STEPS"); do
  set_impairments "netem.$i"
  snapshot "step$i.before"
  : >"/tmp/sync/ready.$i.$LAB_INDEX"
  if [ "$LAB_INDEX" -eq 0 ]; then
    all=(); for k in $(seq 0 $((LAB_HOSTS - 1))); do all+=("/tmp/sync/ready.$i.$k"); done
    wait_for 60 "${all[@]}" || echo "step $i: not every VM got ready" >>errors
    note "step $i: $(cat "cmd.$i")"
    timeout -k 5 "$LAB_STEP_TIMEOUT" bash -c "$(cat "cmd.$i")" >"step$i.stdout" 2>"step$i.stderr"
    echo $? >"step$i.rc"
    : >"/tmp/sync/done.$i"
  else
    wait_for $((LAB_STEP_TIMEOUT + 30)) "/tmp/sync/done.$i" || echo "step $i: VM 0 never finished" >>errors
  fi
  snapshot "step$i.after"
  note "step $i done"
done
: >"/tmp/sync/finished.$LAB_INDEX"
if [ "$LAB_INDEX" -eq 0 ]; then
  all=(); for k in $(seq 0 $((LAB_HOSTS - 1))); do all+=("/tmp/sync/finished.$k"); done
  wait_for 20 "${all[@]}"
else
  kill "$agent" 2>/dev/null
  wait_for 20 /tmp/sync/finished.0
fi
dmesg >dmesg.txt 2>&1
note "done"
sync
