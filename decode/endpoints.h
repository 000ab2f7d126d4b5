// Which addresses identify the two ends of RDMA traffic: the one rule the
// stateful analyses key their flows by and the sharded analysis (analyze -j)
// splits frames by (shard_key.h), so that everything one flow relates stays in
// one shard. In order: the IPv4 or IPv6 header (RoCEv2, iWARP), else the LRH's
// LIDs (native IB: what switches route on, IBA 7.7; a GRH may also be present),
// else the GRH's GIDs (RoCEv1, IBA Annex A16).
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "decode/packet.h"

namespace rdmadiag::decode {

struct Endpoints {
  std::uint8_t addr_len = 0;  // 2 (LID), 4 (IPv4), 16 (IPv6 / GID); 0: none
  std::array<std::uint8_t, 16> src{};
  std::array<std::uint8_t, 16> dst{};
};

// A 4-byte address into the first bytes of a 16-byte one, the rest zero, as
// two 8-byte stores: byte stores into a zeroed array, read back as 16-byte or
// 8-byte words by the key copy and hash, made every packet wait for the
// stores to drain (a store-forwarding stall).
inline void put_widened(std::array<std::uint8_t, 16>& out, const std::array<std::uint8_t, 4>& a) {
  std::uint32_t v;
  std::memcpy(&v, a.data(), 4);
  // v's bytes first in memory, whichever the byte order (memcpy in and out)
  const std::uint64_t first = std::endian::native == std::endian::little ? v : std::uint64_t{v} << 32;
  const std::uint64_t words[2] = {first, 0};
  std::memcpy(out.data(), words, 16);
}

// The rule, written into `out` (anything with 16-byte `src` and `dst` arrays
// that start zeroed): the address length goes through `set_len` (a flow key
// stores it together with its transport, in one store). Written in place: a
// copy of an Endpoints whose IPv4 addresses were just stored was read back 16
// bytes at a time, a stall on every packet. False when the packet has no ends.
template <class Out, class SetLen>
bool put_endpoints(const DecodedPacket& p, Out& out, SetLen set_len) {
  if (p.ipv4) {
    set_len(std::uint8_t{4});
    put_widened(out.src, p.ipv4->src);
    put_widened(out.dst, p.ipv4->dst);
  } else if (p.ipv6) {
    set_len(std::uint8_t{16});
    out.src = p.ipv6->src;
    out.dst = p.ipv6->dst;
  } else if (p.lrh) {
    set_len(std::uint8_t{2});
    out.src[0] = static_cast<std::uint8_t>(p.lrh->slid >> 8);
    out.src[1] = static_cast<std::uint8_t>(p.lrh->slid);
    out.dst[0] = static_cast<std::uint8_t>(p.lrh->dlid >> 8);
    out.dst[1] = static_cast<std::uint8_t>(p.lrh->dlid);
  } else if (p.grh) {
    set_len(std::uint8_t{16});
    out.src = p.grh->sgid;
    out.dst = p.grh->dgid;
  } else {
    set_len(std::uint8_t{0});
    return false;
  }
  return true;
}

inline Endpoints endpoints_of(const DecodedPacket& p) {
  Endpoints e;
  put_endpoints(p, e, [&e](std::uint8_t len) { e.addr_len = len; });
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
