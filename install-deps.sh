#!/usr/bin/env bash
# Installs what rdmadiag needs to build and test, from Debian 12 packages only.
# Idempotent: does nothing when everything is already there. Run as root.
set -euo pipefail
packages=(
  build-essential cmake pkg-config python3
  libpcap-dev libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
  libcli11-dev nlohmann-json3-dev libisal-dev libdeflate-dev zlib1g-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  wireshark-dev tshark perftest
  tcpreplay
  openmpi-bin libopenmpi-dev
  clang-14 libclang-rt-14-dev
  python3-jsonschema python3-prometheus-client python3-scapy
  prometheus chromium
  universal-ctags
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root, or: sudo $0)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
