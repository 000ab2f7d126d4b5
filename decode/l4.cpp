#include "decode/l4.h"

namespace rdmadiag::decode {

ParseStatus parse_udp(Bytes l4, UdpHeader& out) {
  ByteReader r(l4);
  out = UdpHeader{};
  if (!r.has(0, 8)) return ParseStatus::truncated;
  out.src_port = r.be16(0);
  out.dst_port = r.be16(2);
  out.length = r.be16(4);
  out.checksum = r.be16(6);
  if (out.length < 8) return ParseStatus::malformed;
  return ParseStatus::ok;
}

ParseStatus parse_tcp(Bytes l4, TcpHeader& out) {
  ByteReader r(l4);
  out = TcpHeader{};
  if (!r.has(0, 20)) return ParseStatus::truncated;
  out.src_port = r.be16(0);
  out.dst_port = r.be16(2);
  out.seq = r.be32(4);
  out.ack = r.be32(8);
  const std::uint16_t off_flags = r.be16(12);
  out.header_len = static_cast<std::uint8_t>((off_flags >> 12) * 4);
  out.flags = off_flags & 0x01FF;
  out.window = r.be16(14);
  out.checksum = r.be16(16);
  out.urgent = r.be16(18);
  if (out.header_len < 20) return ParseStatus::malformed;
  if (!r.has(0, out.header_len)) return ParseStatus::truncated;
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
