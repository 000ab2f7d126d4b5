// UDP (RFC 768) and the TCP header (RFC 9293 section 3.1; streams are reassembled elsewhere).
#pragma once
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::uint16_t kRoceV2UdpPort = 4791;

struct UdpHeader {
  std::uint16_t src_port;
  std::uint16_t dst_port;
  std::uint16_t length;
  std::uint16_t checksum;
};

struct TcpHeader {
  std::uint16_t src_port;
  std::uint16_t dst_port;
  std::uint32_t seq;
  std::uint32_t ack;
  std::uint8_t header_len;  // data offset in bytes
  std::uint16_t flags;      // the 9 flag bits (NS..FIN)
  std::uint16_t window;
  std::uint16_t checksum;
  std::uint16_t urgent;
  bool syn() const { return flags & 0x02; }
  bool fin() const { return flags & 0x01; }
  bool rst() const { return flags & 0x04; }
  bool ack_flag() const { return flags & 0x10; }
};

ParseStatus parse_udp(Bytes l4, UdpHeader& out);
ParseStatus parse_tcp(Bytes l4, TcpHeader& out);

}  // namespace rdmadiag::decode
