// Ethernet II (IEEE 802.3 clause 3.1.1) with 802.1Q / 802.1ad VLAN tags (IEEE 802.1Q 9.6).
#pragma once
#include <array>
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::uint16_t kEthertypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEthertypeIpv6 = 0x86DD;
inline constexpr std::uint16_t kEthertypeRoceV1 = 0x8915;
inline constexpr std::uint16_t kEthertypeVlan = 0x8100;
inline constexpr std::uint16_t kEthertypeQinQ = 0x88A8;
inline constexpr std::uint16_t kEthertypeQinQOld = 0x9100;
// Stacked tags walked past: QinQ in QinQ exists; more than this is no real frame.
inline constexpr std::uint8_t kMaxVlanTags = 16;

struct VlanTag {
  std::uint16_t tpid;
  std::uint8_t pcp;
  bool dei;
  std::uint16_t vid;
};

struct EthernetHeader {
  std::array<std::uint8_t, 6> dst;
  std::array<std::uint8_t, 6> src;
  std::array<VlanTag, 2> vlans;  // the two outermost tags
  std::uint8_t vlan_count;       // all the tags (up to kMaxVlanTags)
  std::uint16_t ethertype;  // after the tags
  std::uint16_t header_len;
};

// For the per-record light parses (shard_key.cpp, icrc_hint.cpp): the Ethertype
// after up to two VLAN tags, and where the payload starts; false without a
// whole Ethernet header. parse_ethernet() walks more tags.
inline bool ethertype_after_tags(const ByteReader& r, std::size_t off, std::uint16_t& type, std::size_t& payload) {
  if (!r.has(off, 14)) return false;
  std::size_t at = off + 12;
  type = r.be16(at);
  for (int tags = 0; tags < 2 && (type == kEthertypeVlan || type == kEthertypeQinQ || type == kEthertypeQinQOld); ++tags) {
    at += 4;
    type = r.be16(at);
  }
  payload = at + 2;
  return true;
}

// Parses the header and its VLAN tags: the first two kept, up to kMaxVlanTags
// walked (one more stops the parse as malformed).
ParseStatus parse_ethernet(Bytes frame, EthernetHeader& out);

}  // namespace rdmadiag::decode
