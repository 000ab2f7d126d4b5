// Fuzz target: one frame through decode_frame, over every supported link type.
// Input: [link type selector][wire-length extra][option bits][frame bytes...].
// Besides the sanitizers, it checks what every caller relies on: the spans a
// decode returns lie inside the captured frame, the offsets stay within the
// wire length, a frame the snap length cut never gets an ICRC verdict, and an
// ICRC verified ahead (icrc_hint.h) gives the decode without it.
#include <cstdint>
#include <cstdlib>

#include "decode/packet.h"
#include "tests/fuzz/fuzz_input.h"

using namespace rdmadiag;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool inside(decode::Bytes part, decode::Bytes whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::InputCursor in(data, size);
  const std::uint32_t linktype = fuzz::pick_linktype(in.u8());
  const std::uint8_t extra_wire = in.u8();
  const std::uint8_t option_bits = in.u8();
  const decode::Bytes frame = in.rest();

  decode::DecodeOptions opts;
  opts.roce_heuristic = (option_bits & 1) == 0;
  if (option_bits & 2) opts.add_roce_port(4792);
  const auto caplen = static_cast<std::uint32_t>(frame.size());
  decode::DecodedPacket p;
  decode::decode_frame(linktype, frame, caplen + extra_wire, opts, p);

  // The packet's lengths: an ERF record header is not part of it (tshark's frame.len).
  const std::uint32_t link_header = p.erf ? p.erf->header_len : 0;
  if (p.erf && p.erf->wlen) {
    // ERF: the packet's wire length is the record's wlen; bytes past it are record padding.
    require(p.wirelen == p.erf->wlen);
    require(p.caplen <= caplen - link_header && p.caplen <= p.wirelen);
  } else {
    require(p.caplen == caplen - link_header);
    require(p.wirelen == caplen + extra_wire - link_header);
  }
  require(inside(p.payload, frame));
  require(inside(p.tcp_payload, frame));
  require(p.payload.size() <= p.payload_len);
  require(p.tcp_payload.size() <= p.tcp_payload_len);
  if (p.has_bth) require(p.bth_offset < caplen);
  // A CRC is judged only on bytes that were captured: a cut frame may still carry a
  // whole RoCE packet (only bytes after it are missing), but never a judged ICRC
  // whose bytes are not all there.
  if (p.icrc == decode::CrcStatus::ok || p.icrc == decode::CrcStatus::bad)
    require(std::size_t{p.icrc_offset} + 4 <= caplen);
  (void)p.opcode();
  for (const auto& d : p.diags) (void)decode::to_string(d.code);

  // An ICRC verified ahead (analyze -j's walker, icrc_hint.h) changes nothing
  // the decode says: a hint exists only where the ICRC holds, and is used only
  // on the spans it covered.
  const decode::IcrcHint hint = decode::verified_icrc_hint(linktype, frame);
  if (hint) {
    require(std::size_t{hint.icrc_off} + 4 <= caplen);
    decode::DecodedPacket h;
    decode::decode_frame(linktype, frame, caplen + extra_wire, opts, h, hint);
    require(h.icrc == p.icrc && h.icrc_wire == p.icrc_wire && h.icrc_computed == p.icrc_computed &&
            h.icrc_offset == p.icrc_offset && h.diags.size() == p.diags.size() && h.has_bth == p.has_bth &&
            h.transport == p.transport);
  }
  return 0;
}
