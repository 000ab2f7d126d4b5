#include "decode/ib_link.h"

namespace rdmadiag::decode {

ParseStatus parse_lrh(Bytes b, Lrh& out) {
  ByteReader r(b);
  out = Lrh{};
  if (!r.has(0, 8)) return ParseStatus::truncated;
  out.vl = r.u8(0) >> 4;
  out.lver = r.u8(0) & 0x0F;
  out.sl = r.u8(1) >> 4;
  out.lnh = static_cast<Lnh>(r.u8(1) & 3);
  out.dlid = r.be16(2);
  out.pkt_len_words = r.be16(4) & 0x07FF;
  out.slid = r.be16(6);
  // The shortest legal packet is an LRH and a VCRC-less ICRC-less raw header: 6 words
  // is the IBA minimum for IBA transport; below the LRH itself is impossible.
  if (out.pkt_len_words < 2) return ParseStatus::malformed;
  return ParseStatus::ok;
}

ParseStatus parse_grh(Bytes b, Grh& out) {
  ByteReader r(b);
  out = Grh{};
  if (!r.has(0, 40)) return ParseStatus::truncated;
  const std::uint32_t first = r.be32(0);
  out.ip_version = static_cast<std::uint8_t>(first >> 28);
  out.traffic_class = static_cast<std::uint8_t>(first >> 20);
  out.flow_label = first & 0xFFFFF;
  out.payload_length = r.be16(4);
  out.next_header = r.u8(6);
  out.hop_limit = r.u8(7);
  for (std::size_t i = 0; i < 16; ++i) {
    out.sgid[i] = r.u8(8 + i);
    out.dgid[i] = r.u8(24 + i);
  }
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
