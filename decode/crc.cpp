#include "decode/crc.h"

#include <isa-l/crc.h>

#include <algorithm>
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
  return crc32_gzip_refl(crc, b.data(), b.size());
}

namespace {
// Slice-by-8 tables for the VCRC: kVcrcTables[k][x] is the CRC register after
// byte x followed by k zero bytes (0x100B reflected is 0xD008). Eight bytes per
// step instead of one: the VCRC covers the whole packet on native IB.
using VcrcTables = std::array<std::array<std::uint16_t, 256>, 8>;
constexpr VcrcTables make_vcrc_tables() {
  VcrcTables t{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t c = static_cast<std::uint16_t>(i);
    for (int k = 0; k < 8; ++k) c = (c & 1) ? static_cast<std::uint16_t>((c >> 1) ^ 0xD008) : static_cast<std::uint16_t>(c >> 1);
    t[0][i] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (unsigned i = 0; i < 256; ++i)
      t[k][i] = static_cast<std::uint16_t>((t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF]);
  return t;
}
constexpr VcrcTables kVcrcTables = make_vcrc_tables();

// IPv6 header / GRH: traffic class, flow label and hop limit become ones.
void mask_ipv6_like(std::uint8_t* h, std::size_t n) {
  if (n < 8) return;
  h[0] |= 0x0F;
  h[1] = h[2] = h[3] = 0xFF;
  h[7] = 0xFF;
}
}  // namespace

std::uint16_t vcrc16(Bytes b) {
  const auto& t = kVcrcTables;
  std::uint16_t crc = 0xFFFF;
  std::size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    crc = static_cast<std::uint16_t>(t[7][(crc ^ b[i]) & 0xFF] ^ t[6][((crc >> 8) ^ b[i + 1]) & 0xFF] ^ t[5][b[i + 2]] ^
                                     t[4][b[i + 3]] ^ t[3][b[i + 4]] ^ t[2][b[i + 5]] ^ t[1][b[i + 6]] ^ t[0][b[i + 7]]);
  }
  for (; i < b.size(); ++i) crc = static_cast<std::uint16_t>((crc >> 8) ^ t[0][(crc ^ b[i]) & 0xFF]);
  return static_cast<std::uint16_t>(crc ^ 0xFFFF);
}

// The masked header regions go into one scratch buffer, back to back, so that
// the CRC runs in two calls (headers, then the unmasked rest): a short call
// costs a library's CRC its set-up each, and a RoCE packet has four header regions.
std::uint32_t compute_icrc(const IcrcInput& in) {
  constexpr std::size_t kNetMax = 128;  // masked part of the network header
  std::array<std::uint8_t, 8 + kNetMax + 8 + 12> hdr;
  std::size_t n = 0;
  if (in.kind != IcrcInput::Kind::ib_local) {  // RoCE: the absent LRH; IB global: the LRH replaced by ones
    std::memset(hdr.data(), 0xFF, 8);
    n = 8;
  }
  std::uint8_t* net = hdr.data() + n;
  const std::size_t net_len = std::min(in.net.size(), kNetMax);
  if (net_len) std::memcpy(net, in.net.data(), net_len);
  n += net_len;
  switch (in.kind) {
    case IcrcInput::Kind::roce_v2_ipv4:
      if (net_len >= 20) {
        net[1] = 0xFF;             // TOS (DSCP + ECN)
        net[8] = 0xFF;             // TTL
        net[10] = net[11] = 0xFF;  // header checksum
      }
      break;
    case IcrcInput::Kind::roce_v2_ipv6:
    case IcrcInput::Kind::roce_v1:
    case IcrcInput::Kind::ib_global:
      mask_ipv6_like(net, net_len);
      break;
    case IcrcInput::Kind::ib_local:
      if (net_len) net[0] |= 0xF0;  // VL
      break;
  }
  std::uint32_t crc = 0;
  if (in.net.size() > kNetMax) {
    // Headers longer than the scratch buffer (long IPv6 extension chains) are covered unmasked past it.
    crc = crc32_update(crc, Bytes(hdr.data(), n));
    crc = crc32_update(crc, in.net.subspan(kNetMax));
    n = 0;
  }
  if (!in.udp.empty()) {
    const std::size_t len = std::min<std::size_t>(in.udp.size(), 8);
    std::memcpy(hdr.data() + n, in.udp.data(), len);
    if (len == 8) hdr[n + 6] = hdr[n + 7] = 0xFF;  // UDP checksum
    n += len;
  }
  const std::size_t bth_len = std::min<std::size_t>(in.bth.size(), 12);
  if (bth_len) std::memcpy(hdr.data() + n, in.bth.data(), bth_len);
  if (bth_len > 4) hdr[n + 4] = 0xFF;  // FECN, BECN, reserved
  n += bth_len;
  crc = crc32_update(crc, Bytes(hdr.data(), n));
  return crc32_update(crc, in.rest);
}

bool icrc_holds_with_dest_qp(IcrcInput in, std::uint32_t wire, std::uint32_t dest_qp) {
  std::array<std::uint8_t, 12> bth;
  if (in.bth.size() != bth.size()) return false;
  std::copy(in.bth.begin(), in.bth.end(), bth.begin());
  bth[5] = static_cast<std::uint8_t>(dest_qp >> 16);
  bth[6] = static_cast<std::uint8_t>(dest_qp >> 8);
  bth[7] = static_cast<std::uint8_t>(dest_qp);
  in.bth = bth;
  return compute_icrc(in) == wire;
}

}  // namespace rdmadiag::decode
