#include "decode/sll.h"

namespace rdmadiag::decode {

ParseStatus parse_sll(Bytes frame, SllHeader& out) {
  ByteReader r(frame);
  out = SllHeader{};
  if (!r.has(0, 16)) return ParseStatus::truncated;
  out.packet_type = r.be16(0);
  out.arphrd_type = r.be16(2);
  out.protocol = r.be16(14);
  out.header_len = 16;
  return ParseStatus::ok;
}

ParseStatus parse_sll2(Bytes frame, SllHeader& out) {
  ByteReader r(frame);
  out = SllHeader{};
  if (!r.has(0, 20)) return ParseStatus::truncated;
  out.protocol = r.be16(0);
  out.ifindex = r.be32(4);
  out.arphrd_type = r.be16(8);
  out.packet_type = r.u8(10);
  out.header_len = 20;
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
