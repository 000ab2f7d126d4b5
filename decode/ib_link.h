// InfiniBand link and network headers: the Local Route Header (IBA Vol 1 section
// 7.7) and the Global Route Header (section 8.3), which RoCEv1 also carries
// (Annex A16) after its Ethernet header.
#pragma once
#include <array>
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

// LNH: what follows the LRH (IBA 7.7.3).
enum class Lnh : std::uint8_t { raw = 0, ip_non_iba = 1, iba_local = 2, iba_global = 3 };

struct Lrh {
  std::uint8_t vl;
  std::uint8_t lver;
  std::uint8_t sl;
  Lnh lnh;
  std::uint16_t dlid;
  std::uint16_t pkt_len_words;  // LRH through ICRC in 4-byte words (excludes the VCRC)
  std::uint16_t slid;
  std::size_t packet_bytes() const { return std::size_t{pkt_len_words} * 4; }
};

inline constexpr std::uint8_t kGrhNextHeaderIba = 0x1B;

struct Grh {
  std::uint8_t ip_version;
  std::uint8_t traffic_class;
  std::uint32_t flow_label;
  std::uint16_t payload_length;
  std::uint8_t next_header;
  std::uint8_t hop_limit;
  std::array<std::uint8_t, 16> sgid;
  std::array<std::uint8_t, 16> dgid;
};

ParseStatus parse_lrh(Bytes b, Lrh& out);  // 8 bytes
ParseStatus parse_grh(Bytes b, Grh& out);  // 40 bytes

}  // namespace rdmadiag::decode
