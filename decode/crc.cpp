#include "decode/crc.h"

#include <libdeflate.h>

#include <array>
#include <cstring>

namespace rdmadiag::decode {

std::string_view to_string(CrcStatus s) {
  switch (s) {
    case CrcStatus::not_present: return "none";
    case CrcStatus::ok: return "ok";
    case CrcStatus::bad: return "bad";
    case CrcStatus::unverifiable: return "unverifiable";
  }
  return "?";
}

std::uint32_t crc32_update(std::uint32_t crc, Bytes b) {
  if (b.empty()) return crc;
  return libdeflate_crc32(crc, b.data(), b.size());
}

namespace {
constexpr std::array<std::uint16_t, 256> make_vcrc_table() {
  // 0x100B reflected is 0xD008.
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t c = static_cast<std::uint16_t>(i);
    for (int k = 0; k < 8; ++k) c = (c & 1) ? static_cast<std::uint16_t>((c >> 1) ^ 0xD008) : static_cast<std::uint16_t>(c >> 1);
    t[i] = c;
  }
  return t;
}
constexpr auto kVcrcTable = make_vcrc_table();

// Masks a copy of a header region into `buf`, then returns the span used.
template <std::size_t N>
Bytes masked_copy(std::array<std::uint8_t, N>& buf, Bytes src) {
  const std::size_t n = src.size() < N ? src.size() : N;
  if (n) std::memcpy(buf.data(), src.data(), n);
  return Bytes(buf.data(), n);
}

// IPv6 header / GRH: traffic class, flow label and hop limit become ones.
void mask_ipv6_like(std::uint8_t* h, std::size_t n) {
  if (n < 8) return;
  h[0] |= 0x0F;
  h[1] = h[2] = h[3] = 0xFF;
  h[7] = 0xFF;
}
}  // namespace

std::uint16_t vcrc16(Bytes b) {
  std::uint16_t crc = 0xFFFF;
  for (std::uint8_t byte : b) crc = static_cast<std::uint16_t>((crc >> 8) ^ kVcrcTable[(crc ^ byte) & 0xFF]);
  return static_cast<std::uint16_t>(crc ^ 0xFFFF);
}

std::uint32_t compute_icrc(const IcrcInput& in) {
  static constexpr std::array<std::uint8_t, 8> kOnes = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  std::uint32_t crc = 0;
  std::array<std::uint8_t, 128> net{};
  Bytes masked_net;
  switch (in.kind) {
    case IcrcInput::Kind::roce_v2_ipv4: {
      crc = crc32_update(crc, kOnes);
      masked_net = masked_copy(net, in.net);
      if (masked_net.size() >= 20) {
        net[1] = 0xFF;                // TOS (DSCP + ECN)
        net[8] = 0xFF;                // TTL
        net[10] = net[11] = 0xFF;     // header checksum
      }
      break;
    }
    case IcrcInput::Kind::roce_v2_ipv6:
    case IcrcInput::Kind::roce_v1:
    case IcrcInput::Kind::ib_global:
      crc = crc32_update(crc, kOnes);  // the absent (or replaced) LRH
      masked_net = masked_copy(net, in.net);
      mask_ipv6_like(net.data(), masked_net.size());
      break;
    case IcrcInput::Kind::ib_local:
      masked_net = masked_copy(net, in.net);
      if (!masked_net.empty()) net[0] |= 0xF0;  // VL
      break;
  }
  crc = crc32_update(crc, masked_net);
  // Headers longer than the scratch buffer (long IPv6 extension chains) are covered unmasked past it.
  if (in.net.size() > net.size()) crc = crc32_update(crc, in.net.subspan(net.size()));
  if (!in.udp.empty()) {
    std::array<std::uint8_t, 8> udp{};
    Bytes u = masked_copy(udp, in.udp);
    if (u.size() == 8) udp[6] = udp[7] = 0xFF;  // UDP checksum
    crc = crc32_update(crc, u);
  }
  std::array<std::uint8_t, 12> bth{};
  Bytes b = masked_copy(bth, in.bth);
  if (b.size() > 4) bth[4] = 0xFF;  // FECN, BECN, reserved
  crc = crc32_update(crc, b);
  return crc32_update(crc, in.rest);
}

}  // namespace rdmadiag::decode
