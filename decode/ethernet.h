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

struct VlanTag {
  std::uint16_t tpid;
  std::uint8_t pcp;
  bool dei;
  std::uint16_t vid;
};

struct EthernetHeader {
  std::array<std::uint8_t, 6> dst;
  std::array<std::uint8_t, 6> src;
  std::array<VlanTag, 2> vlans;
  std::uint8_t vlan_count;
  std::uint16_t ethertype;  // after the tags
  std::uint16_t header_len;
};

// Parses the header and up to two VLAN tags (a third tag stops the parse as malformed).
ParseStatus parse_ethernet(Bytes frame, EthernetHeader& out);

}  // namespace rdmadiag::decode
