// An ICRC verified ahead of the decode (IBA Vol 1 section 7.8.1; the RoCEv2
// masking of Annex A17.3.3): `analyze -j N`'s walker (cli/split_read.h) reads
// every record's bytes right after reading them from the file, while they are
// in its core's cache, so it checks the ICRC of RoCEv2 frames there. The shard
// that decodes the frame later then need not read its payload at all, and with
// one address pair (one busy shard) the other threads take the CRC off it.
//
// A hint names the spans the CRC covered. decode_frame() uses it only when the
// spans it would give compute_icrc() are exactly those (same offsets, same
// lengths, same encapsulation): compute_icrc() is a function of those bytes, so
// the result is the one it would compute. A walk that read a frame differently
// from the decoder only costs the hint, never the verdict. The bytes must be
// the same: a hint is made from, and given with, one record's bytes. It carries
// the ICRC's value too: reading it from the frame's end would be the one read
// of that line, a miss.
#pragma once
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/crc.h"

namespace rdmadiag::decode {

struct IcrcHint {
  enum class Kind : std::uint8_t { none, roce_v2_ipv4, roce_v2_ipv6 };
  static constexpr std::uint8_t kIpv6 = 0x80;
  std::uint32_t wire = 0;      // the ICRC, as the integer the CRC produces (= computed)
  std::uint16_t icrc_off = 0;  // the ICRC (the packet ends 4 bytes later)
  std::uint8_t net_off = 0;    // the IP header
  std::uint8_t net = 0;        // its length (bits 0-6; 0: no ICRC verified) | kIpv6; the UDP header follows it

  explicit operator bool() const { return net != 0; }
  Kind kind() const { return net == 0 ? Kind::none : (net & kIpv6) ? Kind::roce_v2_ipv6 : Kind::roce_v2_ipv4; }
  std::size_t udp_off() const { return net_off + std::size_t{net & 0x7Fu}; }
  // What compute_icrc() covered, in `frame`.
  IcrcInput input(Bytes frame) const;
  // Whether `in` (spans into `frame`) is what the hint's CRC covered.
  bool covers(const IcrcInput& in, Bytes frame) const;
};
static_assert(sizeof(IcrcHint) == 8);  // with a record's offset and shard key, 24 bytes a record

// A hint for a RoCEv2 frame (Ethernet, raw IP) whose ICRC holds and is captured
// whole; no hint for anything else (a bad ICRC is left to the decoder, which
// reports it). Parses with the decoders' own parsers (ethernet.h, ip.h, l4.h).
IcrcHint verified_icrc_hint(std::uint32_t linktype, Bytes frame);

}  // namespace rdmadiag::decode
