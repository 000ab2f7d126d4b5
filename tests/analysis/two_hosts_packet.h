// A RoCEv2/IPv4 packet between the two hosts of the analysis tests:
// A 10.0.0.1 and B 10.0.0.2; the caller fills in the transport fields it tests.
#pragma once
#include <array>
#include <cstdint>

#include "decode/packet.h"

namespace rdmadiag::decode::test {

inline DecodedPacket two_hosts_packet(bool a_to_b, std::uint8_t opcode, std::uint16_t ip_id, std::uint8_t ecn = 0) {
  DecodedPacket p;
  p.linktype = 1;
  p.transport = Transport::roce_v2;
  p.wirelen = p.caplen = 100;
  Ipv4Header ip{};
  ip.src = a_to_b ? std::array<std::uint8_t, 4>{10, 0, 0, 1} : std::array<std::uint8_t, 4>{10, 0, 0, 2};
  ip.dst = a_to_b ? std::array<std::uint8_t, 4>{10, 0, 0, 2} : std::array<std::uint8_t, 4>{10, 0, 0, 1};
  ip.id = ip_id;
  ip.ecn = ecn;
  p.ipv4 = ip;
  p.has_bth = true;
  p.ib.bth.opcode = opcode;
  p.icrc = CrcStatus::ok;
  return p;
}

}  // namespace rdmadiag::decode::test
