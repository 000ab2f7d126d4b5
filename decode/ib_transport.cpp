#include "decode/ib_transport.h"

#include <array>

namespace rdmadiag::decode {

double Aeth::rnr_timer_ms() const {
  // IBA table 45: RNR NAK timer field encodings (code 0 is the longest, 655.36 ms).
  static constexpr std::array<double, 32> kMs = {
      655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32,
      0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36,
      20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};
  return kMs[value()];
}

std::string_view Aeth::kind_name() const {
  switch (kind()) {
    case AethKind::ack: return "ack";
    case AethKind::rnr_nak: return "rnr_nak";
    case AethKind::reserved: return "reserved";
    case AethKind::nak:
      switch (value()) {
        case 0: return "nak_psn_seq_error";
        case 1: return "nak_invalid_request";
        case 2: return "nak_remote_access";
        case 3: return "nak_remote_op";
        case 4: return "nak_invalid_rd_request";
        default: return "nak_reserved";
      }
  }
  return "?";
}

ParseStatus parse_ib_transport(Bytes b, IbTransport& out) {
  ByteReader r(b);
  out = IbTransport{};
  if (!r.has(0, kBthLength)) return ParseStatus::truncated;
  Bth& h = out.bth;
  h.opcode = r.u8(0);
  const std::uint8_t b1 = r.u8(1);
  h.solicited_event = b1 & 0x80;
  h.mig_req = b1 & 0x40;
  h.pad_count = (b1 >> 4) & 3;
  h.tver = b1 & 0x0F;
  h.pkey = r.be16(2);
  h.fecn = r.u8(4) & 0x80;
  h.becn = r.u8(4) & 0x40;
  h.dest_qp = r.be24(5);
  h.ack_req = r.u8(8) & 0x80;
  h.psn = r.be24(9);

  std::size_t off = kBthLength;
  const OpcodeInfo& info = opcode_info(h.opcode);
  // The opcode's extended headers in wire order (lowest bit first), visiting only those present.
  for (std::uint16_t left = info.ext_headers & ((kIeth << 1) - 1); left; left &= left - 1) {
    const auto bit = static_cast<std::uint16_t>(left & -left);
    const auto hdr = static_cast<ExtHeader>(bit);
    const std::size_t len = ext_header_length(hdr);
    if (!r.has(off, len)) {
      out.header_len = static_cast<std::uint16_t>(off);
      return ParseStatus::truncated;
    }
    switch (hdr) {
      case kRdeth: out.rdeth_ee_context = r.be24(off + 1); break;
      case kDeth: out.deth = Deth{r.be32(off), r.be24(off + 5)}; break;
      case kXrceth: out.xrc_srq = r.be24(off + 1); break;
      case kFeth: {
        const std::uint32_t v = r.be32(off);
        out.feth = Feth{static_cast<std::uint8_t>((v >> 4) & 3), static_cast<std::uint8_t>(v & 0x0F)};
        break;
      }
      case kReth: out.reth = Reth{r.be64(off), r.be32(off + 8), r.be32(off + 12)}; break;
      case kAtomicEth:
        out.atomic_eth = AtomicEth{r.be64(off), r.be32(off + 8), r.be64(off + 12), r.be64(off + 20)};
        break;
      case kAeth: out.aeth = Aeth{r.u8(off), r.be24(off + 1)}; break;
      case kAtomicAckEth: out.atomic_ack_orig_data = r.be64(off); break;
      case kImmDt: out.immediate = r.be32(off); break;
      case kIeth: out.invalidate_rkey = r.be32(off); break;
    }
    out.present |= bit;
    off += len;
  }
  out.header_len = static_cast<std::uint16_t>(off);
  return ParseStatus::ok;
}

}  // namespace rdmadiag::decode
