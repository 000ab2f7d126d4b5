// Which addresses identify the two ends of RDMA traffic: the one rule the
// stateful analyses key their flows by and the sharded analysis (analyze -j)
// splits frames by (shard_key.h), so that everything one flow relates stays in
// one shard. In order: the IPv4 or IPv6 header (RoCEv2, iWARP), else the LRH's
// LIDs (native IB: what switches route on, IBA 7.7; a GRH may also be present),
// else the GRH's GIDs (RoCEv1, IBA Annex A16).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "decode/packet.h"

namespace rdmadiag::decode {

struct Endpoints {
  std::uint8_t addr_len = 0;  // 2 (LID), 4 (IPv4), 16 (IPv6 / GID); 0: none
  std::array<std::uint8_t, 16> src{};
  std::array<std::uint8_t, 16> dst{};
};

inline Endpoints endpoints_of(const DecodedPacket& p) {
  Endpoints e;
  if (p.ipv4) {
    e.addr_len = 4;
    std::copy(p.ipv4->src.begin(), p.ipv4->src.end(), e.src.begin());
    std::copy(p.ipv4->dst.begin(), p.ipv4->dst.end(), e.dst.begin());
  } else if (p.ipv6) {
    e.addr_len = 16;
    e.src = p.ipv6->src;
    e.dst = p.ipv6->dst;
  } else if (p.lrh) {
    e.addr_len = 2;
    e.src[0] = static_cast<std::uint8_t>(p.lrh->slid >> 8);
    e.src[1] = static_cast<std::uint8_t>(p.lrh->slid);
    e.dst[0] = static_cast<std::uint8_t>(p.lrh->dlid >> 8);
    e.dst[1] = static_cast<std::uint8_t>(p.lrh->dlid);
  } else if (p.grh) {
    e.addr_len = 16;
    e.src = p.grh->sgid;
    e.dst = p.grh->dgid;
  }
  return e;
}

// One end as a 16-byte address: IPv4 as IPv4-mapped IPv6 (RFC 4291 section
// 2.5.5.2), so that keys holding IPv4 and IPv6 ends never collide.
inline std::array<std::uint8_t, 16> address16(const Endpoints& e, bool source) {
  const auto& a = source ? e.src : e.dst;
  if (e.addr_len != 4) return a;
  std::array<std::uint8_t, 16> m{};
  m[10] = m[11] = 0xFF;
  std::copy(a.begin(), a.begin() + 4, m.begin() + 12);
  return m;
}

}  // namespace rdmadiag::decode
