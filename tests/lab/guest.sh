#!/bin/bash
# Runs inside a lab VM, chrooted into the host's read-only root (see
# initramfs-init). `tests/lab/run` copies it into the VM's results share
# (/tmp/lab) next to job.env and the commands (cmd.1, cmd.2 ...).
#
# Server and client step through the commands together: for step N the server
# starts its command, waits until it listens, then creates /tmp/sync/ready.N.R
# (R: the run of the step, 1 unless it runs again, see run_step); the client
# waits for that file before starting its own, and for the server's over.N (or
# again.N.R) after it. The rendezvous goes
# through a host directory both VMs mount, so it adds nothing to the wire.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LC_ALL=C
cd /tmp/lab || exit 1
# shellcheck disable=SC1091
. ./job.env   # LAB_ROLE LAB_MODE LAB_DEV LAB_TYPE LAB_MY_IP LAB_PEER_IP LAB_SERVER_IP LAB_NETEM LAB_STEPS LAB_STEP_TIMEOUT LAB_PEER_WAIT LAB_MARK_STEPS
export LAB_ROLE LAB_MODE LAB_DEV LAB_MY_IP LAB_PEER_IP LAB_SERVER_IP

# Every fork costs ~60 ms in an emulated VM, and a step's bookkeeping used to
# make dozens (1-2 s a step): the helpers below are bash builtins only.
note() { local up _; read -r up _ </proc/uptime; echo "[$up] $*"; }
# nap SECONDS: sleep without forking `sleep` (a read that times out on a FIFO
# this shell holds open at both ends, so it never sees data or EOF).
nap_fifo=/dev/shm/lab-nap.$$
if mkfifo "$nap_fifo" 2>/dev/null && exec {nap_fd}<>"$nap_fifo"; then
  rm -f "$nap_fifo"
  nap() { read -r -t "$1" -u "$nap_fd" _; true; }
else
  nap() { sleep "$1"; }
fi

note "guest $LAB_ROLE ($LAB_MODE) up"
ip link set lo up
ip addr add "$LAB_MY_IP/24" dev eth0
ip link set eth0 up

if [ -n "$LAB_NETEM" ]; then
  # shellcheck disable=SC2086  # the netem options are words on purpose
  if tc qdisc add dev eth0 root netem $LAB_NETEM; then note "netem: $LAB_NETEM"
  else note "netem setup failed: $LAB_NETEM"; echo "netem setup failed" >>errors; fi
fi

if rdma link add "$LAB_DEV" type "$LAB_TYPE" netdev eth0; then note "rdma link $LAB_DEV added"
else note "rdma link add $LAB_DEV failed"; echo "rdma link add $LAB_DEV type $LAB_TYPE failed" >>errors; fi

# Wait (bounded) until the peer answers; the host notes when "reachable" appears.
deadline=$(( $(date +%s) + LAB_PEER_WAIT ))
until busybox ping -c 1 -W 1 "$LAB_PEER_IP" >/dev/null 2>&1; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    note "peer $LAB_PEER_IP not reachable after ${LAB_PEER_WAIT}s"; echo "peer not reachable" >>errors; break
  fi
done
: >reachable
note "peer reachable"

# True once the server command has something listening: a new TCP listener
# (perftest's out-of-band port, siw's rdma_cm socket) or an rdma_cm LISTEN id.
# Only new ones count: a listener of the previous step that goes away (siw's
# rdma_cm socket lingers briefly after its server exits) must not make a server
# that starts slowly (e.g. after a capture) look ready before it listens.
# Each sets REPLY to its listeners, one per line (lines: a set, compared whole).
listeners() {  # local address of every TCP socket in LISTEN (state 0A)
  local f line fields lines out=$'\n'
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    mapfile -t lines <"$f"   # one read: the kernel makes the file anew per read
    for line in "${lines[@]:1}"; do
      read -ra fields <<<"$line"
      [ "${fields[3]:-}" = 0A ] && out+="${fields[1]}"$'\n'
    done
  done
  REPLY=$out
}
cm_listeners() {  # rdma_cm ids in LISTEN (the one fork: `rdma`; no /dev/fd here for <(...))
  local line lines out=$'\n'
  mapfile -t lines <<<"$(rdma resource show cm_id 2>/dev/null)"
  for line in "${lines[@]}"; do
    [[ $line == *LISTEN* ]] && out+="$line"$'\n'
  done
  REPLY=$out
}
has_new_line() {  # has_new_line BEFORE NOW: NOW has a line BEFORE lacks
  local line
  while IFS= read -r line; do
    [ -n "$line" ] && [[ $1 != *$'\n'"$line"$'\n'* ]] && return 0
  done <<<"$2"
  return 1
}
is_listening() {  # is_listening TCP-LISTENERS-BEFORE CM-LISTENERS-BEFORE
  listeners; has_new_line "$1" "$REPLY" && return 0
  cm_listeners; has_new_line "$2" "$REPLY"
}

# The kernel's own counters at one moment: rxe/siw port counters, the IP/UDP/
# TCP MIB (siw recovers through TCP: RetransSegs), and netem's qdisc statistics
# (raw `tc -s qdisc`, parsed on the host). Taken before and after every step, so
# each step's deltas are the kernel's account of that step alone.
# (bash builtins for the counters: every fork is slow in an emulated VM)
snapshot() {  # snapshot FILE-PREFIX before|after
  local f v
  for f in /sys/class/infiniband/*/ports/*/hw_counters/* /sys/class/infiniband/*/ports/*/counters/*; do
    [ -f "$f" ] || continue
    v=; read -r v <"$f" 2>/dev/null
    printf '%s\t%s\n' "${f#/sys/class/infiniband/}" "$v"
  done >"$1.counters.$2"
  # /proc/net/snmp: per protocol a line of names, then a line of values with
  # the same "Proto:" prefix (a protocol may have no lines at all: IcmpMsg).
  # Read in one go (mapfile: one read of the ~1.5 KB file). `read` per line
  # seeks back to each line's end and the kernel makes the file anew at every
  # read: a counter that grew a digit in between shifts the text by a byte, and
  # the next line read was empty, which killed a step under `set -u` (CI).
  local line k prev=() n v lines=()
  mapfile -t lines </proc/net/snmp
  for line in "${lines[@]}"; do
    read -ra n <<<"$line"
    [ "${#n[@]}" -gt 0 ] || continue
    if [ "${#prev[@]}" -gt 0 ] && [ "${prev[0]}" = "${n[0]}" ]; then
      v=("${n[@]}")
      for k in "${!prev[@]}"; do
        [ "$k" -gt 0 ] && printf 'snmp/%s%s\t%s\n' "${prev[0]%:}" "${prev[$k]}" "${v[$k]:-}"
      done
      prev=()
    else
      prev=("${n[@]}")
    fi
  done >>"$1.counters.$2"
  # (no netem: nothing to count, and `tc` is a fork)
  if [ -n "$LAB_NETEM" ]; then tc -s qdisc show dev eth0 >"$1.qdisc.$2" 2>&1; else : >"$1.qdisc.$2"; fi
}

# With LAB_MARK_STEPS=1 the client puts one marker datagram on the wire before
# each step's command (three copies: netem may drop one), UDP to the peer's
# discard port, payload "rdmadiag-lab step N", so a checker can cut the
# capture into steps. Off by default: the committed captures carry no markers.
mark_step() {
  [ "${LAB_MARK_STEPS:-0}" = 1 ] || return 0
  local k
  for k in 1 2 3; do
    printf 'rdmadiag-lab step %s\n' "$1" >"/dev/udp/$LAB_PEER_IP/9" 2>/dev/null
  done
}

# perftest over rdma_cm on siw, now and then under emulation: the server
# fails the exchange it makes right after the connection ("Failed to sync
# between client and server after creating RDMA CM connection", errno
# ENOSPC) and its client hangs until the step timeout, and the steps after
# it with it. Not what a step tests: the server says "again", the client
# stops its command, and both run the step once more (at most 3 times).
perftest_sync_failed() {  # perftest_sync_failed RC STDERR-FILE
  [ "$1" -ne 0 ] && grep -q "Failed to sync between client and server" "$2"
}
wait_file() {  # wait_file FILE SECONDS: true once FILE exists
  local k
  for (( k = 0; k < $2 * 10; k++ )); do
    [ -e "$1" ] && return 0
    nap 0.1
  done
  [ -e "$1" ]
}

server_step() {  # server_step STEP ATTEMPT: runs the server's command; sets rc
  local i=$1 a=$2 before cm_before pid k
  listeners; before=$REPLY
  cm_listeners; cm_before=$REPLY
  note "step $i: $cmd"
  timeout -k 5 "$LAB_STEP_TIMEOUT" bash -c "$cmd" >"step$i.stdout" 2>"step$i.stderr" &
  pid=$!
  # Perftest needs a moment (emulated) to open its device; give up waiting after 30 s.
  for (( k = 0; k < 300; k++ )); do
    is_listening "$before" "$cm_before" && break
    kill -0 "$pid" 2>/dev/null || break
    nap 0.1
  done
  : >"/tmp/sync/ready.$i.$a"
  wait "$pid"; rc=$?
}

client_step() {  # client_step STEP ATTEMPT: runs the client's command; sets rc
  local i=$1 a=$2 attempt started pid watcher
  wait_file "/tmp/sync/ready.$i.$a" "$LAB_STEP_TIMEOUT" || true
  nap 0.3   # the listener exists; let the server reach accept()/rdma_get_cm_event
  mark_step "$i"
  # A client refused at once (an rdma_cm connect that raced the server's listen,
  # seen under heavy host load; perftest then gives up) is tried again, a few times.
  for attempt in 1 2 3 4 5; do
    note "step $i: $cmd"
    started=$SECONDS
    timeout -k 5 "$LAB_STEP_TIMEOUT" bash -c "$cmd" >"step$i.stdout" 2>"step$i.stderr" &
    pid=$!
    # A watcher (a fork a second: slow here) ends if the server asks for the step again.
    ( until [ -e "/tmp/sync/again.$i.$a" ]; do nap 1; done ) &
    watcher=$!
    wait -n "$pid" "$watcher"
    kill -0 "$pid" 2>/dev/null && kill "$pid" 2>/dev/null   # the watcher ended first
    kill "$watcher" 2>/dev/null
    wait "$pid"; rc=$?
    wait "$watcher" 2>/dev/null
    [ "$rc" -ne 0 ] && [ $((SECONDS - started)) -lt 10 ] && grep -q "Connection refused" "step$i.stderr" || break
    [ -e "/tmp/sync/again.$i.$a" ] && break
    cp "step$i.stderr" "step$i.stderr.refused$attempt"
    note "step $i: connection refused (attempt $attempt): trying again"
    nap 1
  done
}

# Runs step i on this side, again while the server says so; sets rc.
run_step() {
  local i=$1 a started=$SECONDS
  for a in 1 2 3; do
    snapshot "step$i" before   # a step that runs again counts its last run only
    if [ "$LAB_ROLE" = server ]; then
      server_step "$i" "$a"
      if [ "$a" -lt 3 ] && perftest_sync_failed "$rc" "step$i.stderr"; then
        cp "step$i.stderr" "step$i.stderr.sync$a"
        note "step $i: perftest's sync after the connection failed (run $a): once more, with the client"
        : >"/tmp/sync/again.$i.$a"
        wait_file "/tmp/sync/stopped.$i.$a" $(( LAB_STEP_TIMEOUT + 15 )) || true
        continue
      fi
      : >"/tmp/sync/over.$i"
      return
    fi
    client_step "$i" "$a"
    # The server's word on this run: over, or again (it knows once its command
    # ended; bounded, in case the server's VM is gone).
    until [ -e "/tmp/sync/over.$i" ] || [ -e "/tmp/sync/again.$i.$a" ] || [ -e /tmp/sync/server.finished ] ||
          [ $(( SECONDS - started )) -gt $(( LAB_STEP_TIMEOUT * 3 + 60 )) ]; do
      nap 0.1
    done
    [ -e "/tmp/sync/again.$i.$a" ] || return
    cp "step$i.stderr" "step$i.stderr.sync$a"
    note "step $i: the server runs it once more (run $a failed its sync)"
    : >"/tmp/sync/stopped.$i.$a"
  done
}

for i in $(seq 1 "$LAB_STEPS"); do
  IFS= read -r -d '' cmd <"cmd.$i"; cmd=${cmd%$'\n'}
  run_step "$i"
  snapshot "step$i" after
  echo "$rc" >"step$i.rc"
  note "step $i: exit $rc"
done

# Let the peer finish before counting (and before this VM leaves the wire).
: >"/tmp/sync/$LAB_ROLE.finished"
peer=client; [ "$LAB_ROLE" = client ] && peer=server
for (( k = 0; k < 100; k++ )); do [ -e "/tmp/sync/$peer.finished" ] && break; nap 0.1; done

# Kernel RDMA counters and netem statistics.
# (bash builtins only: every fork is slow in an emulated VM)
for f in /sys/class/infiniband/*/ports/*/hw_counters/* /sys/class/infiniband/*/ports/*/counters/*; do
  [ -f "$f" ] || continue
  v=; read -r v <"$f" 2>/dev/null
  printf '%s\t%s\n' "${f#/sys/class/infiniband/}" "$v"
done >counters.tsv
rdma statistic show >rdma-statistic.txt 2>&1
rdma link show >rdma-link.txt 2>&1
tc -s qdisc show dev eth0 >tc-qdisc.txt 2>&1
ip -s link show dev eth0 >ip-link.txt 2>&1
dmesg >dmesg.txt 2>&1
note "done"
sync
