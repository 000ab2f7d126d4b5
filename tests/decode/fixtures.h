// Helpers to derive byte fixtures from the real frames: the same transport bytes
// under another link layer (VLAN tags, Linux cooked headers). The ICRC does not
// cover the link layer, so a real frame's ICRC stays valid.
#pragma once
#include <cstdint>
#include <vector>

#include "decode/packet.h"

namespace fixtures {

using Frame = std::vector<std::uint8_t>;

inline Frame with_vlan_tags(const Frame& eth, std::initializer_list<std::pair<std::uint16_t, std::uint16_t>> tags) {
  Frame f(eth.begin(), eth.begin() + 12);
  for (auto [tpid, tci] : tags) {
    f.push_back(static_cast<std::uint8_t>(tpid >> 8));
    f.push_back(static_cast<std::uint8_t>(tpid));
    f.push_back(static_cast<std::uint8_t>(tci >> 8));
    f.push_back(static_cast<std::uint8_t>(tci));
  }
  f.insert(f.end(), eth.begin() + 12, eth.end());
  return f;
}

// Linux SLL2 (20 bytes) in place of the Ethernet header.
inline Frame as_sll2(const Frame& eth) {
  Frame f = {eth[12], eth[13], 0, 0, 0, 0, 0, 3, 0, 1, 0, 6};
  f.insert(f.end(), eth.begin() + 6, eth.begin() + 12);
  f.push_back(0);
  f.push_back(0);
  f.insert(f.end(), eth.begin() + 14, eth.end());
  return f;
}

// Linux SLL (16 bytes) in place of the Ethernet header.
inline Frame as_sll(const Frame& eth) {
  Frame f = {0, 0, 0, 1, 0, 6};
  f.insert(f.end(), eth.begin() + 6, eth.begin() + 12);
  f.push_back(0);
  f.push_back(0);
  f.push_back(eth[12]);
  f.push_back(eth[13]);
  f.insert(f.end(), eth.begin() + 14, eth.end());
  return f;
}

inline Frame without_ethernet(const Frame& eth) { return Frame(eth.begin() + 14, eth.end()); }

inline rdmadiag::decode::DecodedPacket decode(std::uint32_t lt, const Frame& f, std::size_t caplen = SIZE_MAX) {
  rdmadiag::decode::DecodedPacket p;
  const std::size_t n = caplen < f.size() ? caplen : f.size();
  rdmadiag::decode::decode_frame(lt, rdmadiag::decode::Bytes(f.data(), n), static_cast<std::uint32_t>(f.size()), {}, p);
  return p;
}

}  // namespace fixtures
