#include "decode/erf.h"

namespace rdmadiag::decode {

ParseStatus parse_erf(Bytes b, ErfHeader& out) {
  ByteReader r(b);
  out = ErfHeader{};
  if (!r.has(0, 16)) return ParseStatus::truncated;
  out.timestamp = r.le64(0);
  const std::uint8_t type = r.u8(8);
  out.type = type & 0x7F;
  out.flags = r.u8(9);
  out.rlen = r.be16(10);
  out.lctr = r.be16(12);
  out.wlen = r.be16(14);
  std::size_t off = 16;
  bool more = type & 0x80;
  while (more) {
    if (out.ext_headers == 16) return ParseStatus::malformed;
    if (!r.has(off, 8)) return ParseStatus::truncated;
    more = r.u8(off) & 0x80;
    off += 8;
    ++out.ext_headers;
  }
  if (out.type == kErfTypeEth) off += 2;  // Ethernet records carry an offset/pad pair
  out.header_len = static_cast<std::uint16_t>(off);
  if (out.rlen != 0 && out.rlen < off) return ParseStatus::malformed;
  if (!r.has(0, off)) return ParseStatus::truncated;
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
