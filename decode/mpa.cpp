#include "decode/mpa.h"

namespace rdmadiag::decode {

bool mpa_key_is(Bytes b, std::string_view key) {
  if (b.size() < kMpaKeyLen) return false;
  for (std::size_t i = 0; i < kMpaKeyLen; ++i)
    if (b[i] != static_cast<std::uint8_t>(key[i])) return false;
  return true;
}

ParseStatus parse_mpa_negotiation(Bytes b, MpaNegotiation& m) {
  m = MpaNegotiation{};
  if (b.size() < kMpaKeyLen) return ParseStatus::truncated;
  if (mpa_key_is(b, kMpaRequestKey)) m.type = MpaFrameType::request;
  else if (mpa_key_is(b, kMpaReplyKey)) m.type = MpaFrameType::reply;
  else return ParseStatus::malformed;
  const ByteReader r(b);
  if (!r.has(0, kMpaReqRepHeaderLen)) return ParseStatus::truncated;
  const std::uint8_t flags = r.u8(16);
  m.marker = flags & 0x80;
  m.crc = flags & 0x40;
  m.reject = flags & 0x20;
  m.res = flags & 0x1F;
  m.revision = r.u8(17);
  m.pd_length = r.be16(18);
  if (m.pd_length > kMpaMaxPrivateData) return ParseStatus::malformed;
  if (!r.has(kMpaReqRepHeaderLen, m.pd_length)) return ParseStatus::truncated;
  if (m.revision == 2 && m.pd_length >= 4) {
    m.enhanced = true;
    const std::uint16_t ird = r.be16(20), ord = r.be16(22);
    m.peer_to_peer = ird & 0x8000;
    m.zero_length_rtr = ird & 0x4000;
    m.ird = ird & 0x3FFF;
    m.rtr_write = ord & 0x8000;
    m.rtr_read = ord & 0x4000;
    m.ord = ord & 0x3FFF;
  }
  return ParseStatus::ok;
}

MpaSettlement mpa_settle(const MpaNegotiation* request, const MpaNegotiation& reply) {
  MpaSettlement s;
  s.rejected = reply.reject;
  if (s.rejected) return s;
  s.crc = reply.crc || (request && request->crc);
  s.markers_from_initiator = reply.marker;
  s.markers_from_responder = request && request->marker;
  return s;
}

MpaStreamStart mpa_classify_start(Bytes first, bool from_syn) {
  const auto is_prefix_of = [&](std::string_view key) {
    for (std::size_t i = 0; i < first.size() && i < key.size(); ++i)
      if (first[i] != static_cast<std::uint8_t>(key[i])) return false;
    return true;
  };
  const bool may_be_key = is_prefix_of(kMpaRequestKey) || is_prefix_of(kMpaReplyKey);
  if (first.size() < kMpaKeyLen) {
    if (from_syn && !first.empty() && !may_be_key) return MpaStreamStart::not_mpa;
    return MpaStreamStart::need_more;
  }
  if (may_be_key) return MpaStreamStart::negotiation;
  return from_syn ? MpaStreamStart::not_mpa : MpaStreamStart::hunt;
}

}  // namespace rdmadiag::decode
