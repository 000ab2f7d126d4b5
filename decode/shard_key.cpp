#include "decode/shard_key.h"

#include "decode/endpoints.h"
#include "decode/erf.h"
#include "decode/ethernet.h"
#include "decode/ib_link.h"
#include "decode/ip.h"
#include "decode/mac_control.h"
#include "decode/sll.h"

namespace rdmadiag::decode {

// The reader thread runs this for every frame, so it reads only the fields it
// needs, at the offsets the full parsers read them from (ethernet.cpp, ip.cpp,
// ib_link.cpp). It accepts at least every header those parsers accept, so a
// frame the analysis keys by its addresses always gets them here too; a header
// they would reject only costs a frame that relates to nothing a shard's choice.

namespace {

// One address as a number: the same for the same bytes, whichever side it is on.
std::uint64_t address_hash(const ByteReader& r, std::size_t off, std::size_t len) {
  std::uint64_t h;
  if (len == 2) h = r.be16(off);
  else if (len == 4) h = r.be32(off);
  else h = r.be64(off) * 0x9E3779B97F4A7C15ULL ^ r.be64(off + 8);
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 31);
}

// Symmetric in the two addresses (a sum), then mixed so that `% shards` spreads well.
ShardKey pair_key(std::uint64_t a, std::uint64_t b, std::size_t len) {
  std::uint64_t h = (a + b) ^ (len << 56);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return ShardKey{true, h};
}

ShardKey from_bytes(const ByteReader& r, std::size_t src, std::size_t dst, std::size_t len) {
  return pair_key(address_hash(r, src, len), address_hash(r, dst, len), len);
}

ShardKey ipv4_key(const ByteReader& r, std::size_t off) {
  if (!r.has(off, 20) || (r.u8(off) >> 4) != 4) return {};
  return from_bytes(r, off + 12, off + 16, 4);
}

ShardKey ipv6_key(const ByteReader& r, std::size_t off) {
  if (!r.has(off, 40) || (r.u8(off) >> 4) != 6) return {};
  return from_bytes(r, off + 8, off + 24, 16);
}

ShardKey grh_key(const ByteReader& r, std::size_t off) {
  if (!r.has(off, 40)) return {};
  return from_bytes(r, off + 8, off + 24, 16);
}

ShardKey lrh_key(const ByteReader& r, std::size_t off) {
  if (!r.has(off, 8)) return {};
  return from_bytes(r, off + 6, off + 2, 2);
}

ShardKey ethertype_key(const ByteReader& r, std::uint16_t type, std::size_t off) {
  switch (type) {
    case kEthertypeIpv4: return ipv4_key(r, off);
    case kEthertypeIpv6: return ipv6_key(r, off);
    case kEthertypeRoceV1: return grh_key(r, off);
    default: return {};
  }
}

ShardKey ethernet_key(const ByteReader& r, std::size_t off) {
  std::uint16_t type = 0;
  std::size_t payload = 0;
  if (!ethertype_after_tags(r, off, type, payload)) return {};
  return ethertype_key(r, type, payload);
}

}  // namespace

ShardKey shard_key(std::uint32_t lt, Bytes frame) {
  const ByteReader r(frame);
  switch (lt) {
    case linktype::kEthernet: return ethernet_key(r, 0);
    case linktype::kRawDlt12: case linktype::kRawDlt14: case linktype::kRaw:
      if (!r.has(0, 1)) return {};
      return (r.u8(0) >> 4) == 4 ? ipv4_key(r, 0) : ipv6_key(r, 0);
    case linktype::kIpv4: return ipv4_key(r, 0);
    case linktype::kIpv6: return ipv6_key(r, 0);
    case linktype::kLinuxSll: case linktype::kLinuxSll2: {
      SllHeader h;
      const auto st = lt == linktype::kLinuxSll ? parse_sll(frame, h) : parse_sll2(frame, h);
      if (st != ParseStatus::ok) return {};
      return ethertype_key(r, h.protocol, h.header_len);
    }
    case linktype::kInfiniband: return lrh_key(r, 0);
    case linktype::kErf: {
      ErfHeader h;
      if (parse_erf(frame, h) != ParseStatus::ok) return {};
      switch (h.type) {
        case kErfTypeInfiniband: return lrh_key(r, h.header_len);
        case kErfTypeEth: return ethernet_key(r, h.header_len);
        case kErfTypeIpv4: return ipv4_key(r, h.header_len);
        case kErfTypeIpv6: return ipv6_key(r, h.header_len);
        default: return {};
      }
    }
    default: return {};
  }
}

bool is_pause_state_frame(std::uint32_t lt, Bytes frame) {
  const ByteReader r(frame);
  std::size_t off = 0;
  if (lt == linktype::kErf) {
    ErfHeader h;
    if (parse_erf(frame, h) != ParseStatus::ok || h.type != kErfTypeEth) return false;
    off = h.header_len;
  } else if (lt != linktype::kEthernet) {
    return false;
  }
  std::uint16_t type = 0;
  std::size_t payload = 0;
  return ethertype_after_tags(r, off, type, payload) && type == kEthertypeMacControl;
}

namespace {
std::uint64_t address_hash(const std::uint8_t* a, std::size_t len) {
  const ByteReader r(Bytes(a, len));
  return address_hash(r, 0, len);
}
}  // namespace

// What the analyses key flows by: the one rule of endpoints.h.
ShardKey shard_key(const DecodedPacket& p) {
  const Endpoints e = endpoints_of(p);
  if (!e.addr_len) return {};
  return pair_key(address_hash(e.src.data(), e.addr_len), address_hash(e.dst.data(), e.addr_len), e.addr_len);
}

}  // namespace rdmadiag::decode
