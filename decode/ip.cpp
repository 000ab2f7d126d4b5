#include "decode/ip.h"

namespace rdmadiag::decode {

ParseStatus parse_ipv4(Bytes ip, Ipv4Header& out) {
  ByteReader r(ip);
  out = Ipv4Header{};
  if (!r.has(0, 20)) return ParseStatus::truncated;
  const std::uint8_t vihl = r.u8(0);
  if ((vihl >> 4) != 4) return ParseStatus::malformed;
  out.ihl_bytes = static_cast<std::uint8_t>((vihl & 0x0F) * 4);
  const std::uint8_t tos = r.u8(1);
  out.dscp = tos >> 2;
  out.ecn = tos & 3;
  out.total_length = r.be16(2);
  out.id = r.be16(4);
  const std::uint16_t frag = r.be16(6);
  out.dont_fragment = (frag & 0x4000) != 0;
  out.more_fragments = (frag & 0x2000) != 0;
  out.fragment_offset = frag & 0x1FFF;
  out.ttl = r.u8(8);
  out.protocol = r.u8(9);
  out.checksum = r.be16(10);
  for (std::size_t i = 0; i < 4; ++i) {
    out.src[i] = r.u8(12 + i);
    out.dst[i] = r.u8(16 + i);
  }
  if (out.ihl_bytes < 20 || out.total_length < out.ihl_bytes) return ParseStatus::malformed;
  if (!r.has(0, out.ihl_bytes)) return ParseStatus::truncated;
  return ParseStatus::ok;
}

bool ipv4_header_checksum_ok(Bytes ip, std::size_t ihl_bytes) {
  ByteReader r(ip);
  if (!r.has(0, ihl_bytes)) return false;
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < ihl_bytes; i += 2) sum += r.be16(i);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return sum == 0xFFFF;
}

static bool is_ipv6_extension(std::uint8_t nh) {
  // Hop-by-hop, Routing, Fragment, Destination Options, Mobility, HIP, Shim6.
  return nh == 0 || nh == 43 || nh == 44 || nh == 60 || nh == 135 || nh == 139 || nh == 140 || nh == 51;
}

ParseStatus parse_ipv6(Bytes ip, Ipv6Header& out) {
  ByteReader r(ip);
  out = Ipv6Header{};
  if (!r.has(0, 40)) return ParseStatus::truncated;
  const std::uint32_t first = r.be32(0);
  if ((first >> 28) != 6) return ParseStatus::malformed;
  out.traffic_class = static_cast<std::uint8_t>(first >> 20);
  out.flow_label = first & 0xFFFFF;
  out.payload_length = r.be16(4);
  out.next_header = r.u8(6);
  out.hop_limit = r.u8(7);
  for (std::size_t i = 0; i < 16; ++i) {
    out.src[i] = r.u8(8 + i);
    out.dst[i] = r.u8(24 + i);
  }
  std::size_t off = 40;
  std::uint8_t nh = out.next_header;
  for (int n = 0; is_ipv6_extension(nh); ++n) {
    if (n == 8) return ParseStatus::malformed;
    if (!r.has(off, 8)) return ParseStatus::truncated;
    std::size_t len;
    if (nh == 44) {
      len = 8;
      // Offset 0 and M clear: an atomic fragment, the whole packet, processed
      // as unfragmented (RFC 6946 section 4), as IPv4 checks MF and offset.
      const std::uint16_t offset_m = r.be16(off + 2);
      out.fragment = (offset_m >> 3) != 0 || (offset_m & 1) != 0;
    } else if (nh == 51) {
      len = (std::size_t{r.u8(off + 1)} + 2) * 4;  // AH counts 4-byte units
    } else {
      len = (std::size_t{r.u8(off + 1)} + 1) * 8;
    }
    nh = r.u8(off);
    off += len;
    if (off > 40 + std::size_t{out.payload_length}) return ParseStatus::malformed;
  }
  out.upper_protocol = nh;
  out.header_len = static_cast<std::uint16_t>(off);
  if (!r.has(0, off)) return ParseStatus::truncated;
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
