// IPv4 (RFC 791, with options) and IPv6 (RFC 8200, with extension headers).
// Both report the payload the length fields promise, clipped to the captured bytes.
#pragma once
#include <array>
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::uint8_t kIpProtoTcp = 6;
inline constexpr std::uint8_t kIpProtoUdp = 17;

struct Ipv4Header {
  std::uint8_t ihl_bytes;     // header length including options
  std::uint8_t dscp;
  std::uint8_t ecn;
  std::uint16_t total_length;
  std::uint16_t id;
  bool dont_fragment;
  bool more_fragments;
  std::uint16_t fragment_offset;  // in 8-byte units
  std::uint8_t ttl;
  std::uint8_t protocol;
  std::uint16_t checksum;
  std::array<std::uint8_t, 4> src;
  std::array<std::uint8_t, 4> dst;
  bool is_fragment() const { return more_fragments || fragment_offset != 0; }
};

struct Ipv6Header {
  std::uint8_t traffic_class;
  std::uint32_t flow_label;
  std::uint16_t payload_length;
  std::uint8_t next_header;   // of the fixed header
  std::uint8_t hop_limit;
  std::array<std::uint8_t, 16> src;
  std::array<std::uint8_t, 16> dst;
  // After walking the extension headers:
  std::uint8_t upper_protocol;    // the first non-extension next header
  std::uint16_t header_len;       // 40 + extension headers
  bool fragment;                  // a Fragment header not atomic: offset or M set
  std::uint8_t dscp() const { return traffic_class >> 2; }
  std::uint8_t ecn() const { return traffic_class & 3; }
};

// `ip` starts at the IPv4 header.
ParseStatus parse_ipv4(Bytes ip, Ipv4Header& out);
// RFC 791 §3.1 / RFC 1071: the ones' complement sum of the header's 16-bit words
// (its checksum included) is all ones. `ip` holds at least `ihl_bytes`.
bool ipv4_header_checksum_ok(Bytes ip, std::size_t ihl_bytes);
// `ip` starts at the IPv6 header; extension headers are walked (at most 8).
ParseStatus parse_ipv6(Bytes ip, Ipv6Header& out);

}  // namespace rdmadiag::decode
