#include "decode/ethernet.h"

namespace rdmadiag::decode {

static bool is_vlan_tpid(std::uint16_t t) {
  return t == kEthertypeVlan || t == kEthertypeQinQ || t == kEthertypeQinQOld;
}

ParseStatus parse_ethernet(Bytes frame, EthernetHeader& out) {
  ByteReader r(frame);
  out = EthernetHeader{};
  if (!r.has(0, 14)) return ParseStatus::truncated;
  for (std::size_t i = 0; i < 6; ++i) {
    out.dst[i] = r.u8(i);
    out.src[i] = r.u8(6 + i);
  }
  std::size_t off = 12;
  std::uint16_t type = r.be16(off);
  while (is_vlan_tpid(type)) {
    if (out.vlan_count == kMaxVlanTags) return ParseStatus::malformed;
    if (!r.has(off, 6)) return ParseStatus::truncated;
    const std::uint16_t tci = r.be16(off + 2);
    if (out.vlan_count < out.vlans.size())
      out.vlans[out.vlan_count] = VlanTag{type, static_cast<std::uint8_t>(tci >> 13), (tci & 0x1000) != 0,
                                          static_cast<std::uint16_t>(tci & 0x0FFF)};
    ++out.vlan_count;
    off += 4;
    type = r.be16(off);
  }
  out.ethertype = type;
  out.header_len = static_cast<std::uint16_t>(off + 2);
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
