#include "decode/mac_control.h"

namespace rdmadiag::decode {

ParseStatus parse_mac_control(Bytes data, MacControl& out) {
  const ByteReader r(data);
  out = MacControl{};
  if (!r.has(0, 2)) return ParseStatus::truncated;
  out.opcode = r.be16(0);
  out.length = 2;
  if (out.is_pause()) {
    if (!r.has(2, 2)) return ParseStatus::truncated;
    out.pause_quanta = r.be16(2);
    out.length = 4;
  } else if (out.is_pfc()) {
    if (!r.has(2, 2 + 2 * kPriorities)) return ParseStatus::truncated;
    out.enable_vector = r.be16(2);
    out.reserved_bits = (out.enable_vector & 0xFF00) != 0;
    for (std::size_t n = 0; n < kPriorities; ++n) out.quanta[n] = r.be16(4 + 2 * n);
    out.length = 4 + 2 * kPriorities;
  }
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
