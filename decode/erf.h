// Endace ERF records (LINKTYPE_ERF, 197), as ibdump writes them for InfiniBand
// ports: a 16-byte record header, optional 8-byte extension headers, then the
// packet; ERF type 21 carries a raw InfiniBand packet from the LRH. Layout per
// the ERF format description used by libpcap/Wireshark (erf.h, ERF_TYPE_*).
#pragma once
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::uint8_t kErfTypeEth = 2;
inline constexpr std::uint8_t kErfTypeInfiniband = 21;
inline constexpr std::uint8_t kErfTypeIpv4 = 22;
inline constexpr std::uint8_t kErfTypeIpv6 = 23;

struct ErfHeader {
  std::uint64_t timestamp;  // 32.32 fixed-point seconds, little-endian on the wire
  std::uint8_t type;        // without the extension bit
  std::uint8_t flags;
  std::uint16_t rlen;       // record length including this header
  std::uint16_t lctr;       // loss counter / colour
  std::uint16_t wlen;       // wire length
  std::uint8_t ext_headers;
  std::uint16_t header_len; // 16 + extension headers (+ 2 pad bytes for Ethernet)
};

ParseStatus parse_erf(Bytes b, ErfHeader& out);

}  // namespace rdmadiag::decode
