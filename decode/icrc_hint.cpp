#include "decode/icrc_hint.h"

#include <algorithm>

#include "decode/ethernet.h"
#include "decode/ib_transport.h"
#include "decode/ip.h"
#include "decode/l4.h"
#include "decode/packet.h"

namespace rdmadiag::decode {

namespace {

bool same_span(Bytes a, Bytes b) { return a.data() == b.data() && a.size() == b.size(); }

// Per record of the walk, so the fields are read where ip.h and l4.h read them,
// without building the headers; a layout read differently from the decoder's
// only loses the hint (covers()).

// The IP header's offset and which one it is; false for any other link or network layer.
bool network_start(std::uint32_t lt, const ByteReader& r, std::size_t& off, IcrcHint::Kind& kind) {
  std::uint16_t type = 0;
  switch (lt) {
    case linktype::kEthernet:
      if (!ethertype_after_tags(r, 0, type, off)) return false;
      break;
    case linktype::kIpv4: type = kEthertypeIpv4; off = 0; break;
    case linktype::kIpv6: type = kEthertypeIpv6; off = 0; break;
    case linktype::kRaw: case linktype::kRawDlt12: case linktype::kRawDlt14:
      if (!r.has(0, 1)) return false;
      type = (r.u8(0) >> 4) == 4 ? kEthertypeIpv4 : kEthertypeIpv6;
      off = 0;
      break;
    default: return false;
  }
  if (type == kEthertypeIpv4) kind = IcrcHint::Kind::roce_v2_ipv4;
  else if (type == kEthertypeIpv6) kind = IcrcHint::Kind::roce_v2_ipv6;
  else return false;
  return true;
}

// The UDP header's offset and the end of the IP packet; false for a fragment, options or extension
// headers in IPv6 (no hint: rare), or not UDP (RFC 791 section 3.1, RFC 8200 section 3).
bool udp_start(const ByteReader& r, std::size_t ip, IcrcHint::Kind kind, std::size_t& udp, std::size_t& ip_end) {
  if (kind == IcrcHint::Kind::roce_v2_ipv4) {
    if (!r.has(ip, 20) || (r.u8(ip) >> 4) != 4 || (r.be16(ip + 6) & 0x3FFF) != 0 || r.u8(ip + 9) != kIpProtoUdp)
      return false;
    const std::size_t ihl = (r.u8(ip) & 0x0F) * std::size_t{4};
    if (ihl < 20) return false;
    udp = ip + ihl;
    ip_end = ip + r.be16(ip + 2);
  } else {
    if (!r.has(ip, 40) || (r.u8(ip) >> 4) != 6 || r.u8(ip + 6) != kIpProtoUdp) return false;
    udp = ip + 40;
    ip_end = udp + r.be16(ip + 4);
  }
  return true;
}

}  // namespace

IcrcInput IcrcHint::input(Bytes frame) const {
  const std::size_t udp = udp_off(), bth = udp + 8u;
  return IcrcInput{(net & kIpv6) ? IcrcInput::Kind::roce_v2_ipv6 : IcrcInput::Kind::roce_v2_ipv4,
                   frame.subspan(net_off, udp - net_off),
                   frame.subspan(udp, 8),
                   frame.subspan(bth, kBthLength),
                   frame.subspan(bth + kBthLength, icrc_off - bth - kBthLength),
                   {}};
}

bool IcrcHint::covers(const IcrcInput& in, Bytes frame) const {
  // (in the order verified_icrc_hint() makes them: a hint of another frame, or altered, is not taken apart)
  if (net == 0 || udp_off() + 8 + kBthLength > icrc_off || icrc_off + std::size_t{4} > frame.size() || !in.lrh.empty())
    return false;
  const IcrcInput mine = input(frame);
  return in.kind == mine.kind && same_span(in.net, mine.net) && same_span(in.udp, mine.udp) &&
         same_span(in.bth, mine.bth) && same_span(in.rest, mine.rest);
}

IcrcHint verified_icrc_hint(std::uint32_t lt, Bytes frame) {
  const ByteReader r(frame);
  IcrcHint::Kind kind = IcrcHint::Kind::none;
  std::size_t net_off = 0, udp_off = 0, ip_end = 0;
  if (!network_start(lt, r, net_off, kind) || !udp_start(r, net_off, kind, udp_off, ip_end) ||
      ip_end > frame.size() || udp_off + 8 > ip_end || r.be16(udp_off + 2) != kRoceV2UdpPort)
    return {};
  // The packet ends where UDP says, or where IP does if that is first (as packet.cpp takes it).
  const std::size_t end = std::min<std::size_t>(udp_off + r.be16(udp_off + 4), ip_end);
  if (end < udp_off + 8 + kBthLength + 4 || end > UINT16_MAX || net_off > UINT8_MAX) return {};
  IcrcHint h;
  h.net_off = static_cast<std::uint8_t>(net_off);
  h.net = static_cast<std::uint8_t>((udp_off - net_off) | (kind == IcrcHint::Kind::roce_v2_ipv6 ? IcrcHint::kIpv6 : 0));
  h.icrc_off = static_cast<std::uint16_t>(end - 4);
  h.wire = r.le32(h.icrc_off);
  if (compute_icrc(h.input(frame)) != h.wire) return {};
  return h;
}

}  // namespace rdmadiag::decode
