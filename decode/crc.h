// Invariant and variant CRCs of InfiniBand packets (IBA Vol 1 section 7.8), with
// the RoCE masking rules of Annex A16 (RoCEv1) and A17.3.3 (RoCEv2). The masking
// and the byte order were verified on real rxe and native-IB captures (see
// docs/protocols.md): ICRC is zlib's CRC-32 over a masked copy, stored
// little-endian; VCRC is a CRC-16 (poly 0x100B, reflected) over LRH..ICRC.
#pragma once
#include <cstdint>
#include <string_view>

#include "decode/byte_reader.h"

namespace rdmadiag::decode {

enum class CrcStatus : std::uint8_t {
  not_present,   // this packet has no such CRC (e.g. no VCRC on RoCE)
  ok,
  bad,
  unverifiable,  // the frame was cut by the snap length: not all covered bytes are here
};
std::string_view to_string(CrcStatus s);

// CRC-32 (IEEE, reflected, as zlib's crc32): continue `crc` (0 to start) over `b`.
// Hardware-accelerated: ISA-L's (carry-less multiply folding, 512-bit where the
// CPU has it): about 3x libdeflate's on 1-4 KiB buffers here (bench/micro_bench),
// slower on calls of 64 bytes or less (12.5 against 9.3 ns).
std::uint32_t crc32_update(std::uint32_t crc, Bytes b);

// CRC-16 of the VCRC over `b`, complete (init and final XOR applied).
std::uint16_t vcrc16(Bytes b);

// What the ICRC covers, by encapsulation. The header regions are masked as the
// spec says; `rest` (from the byte after the BTH up to the ICRC) is unmasked.
struct IcrcInput {
  enum class Kind : std::uint8_t { roce_v2_ipv4, roce_v2_ipv6, roce_v1, ib_local, ib_global } kind;
  Bytes net;   // IPv4/IPv6 header (RoCEv2, options/extensions included), GRH (RoCEv1, IB global), LRH (IB local)
  Bytes udp;   // RoCEv2 only: the 8-byte UDP header
  Bytes bth;   // 12 bytes
  Bytes rest;  // everything after the BTH up to (not including) the ICRC
  Bytes lrh;   // native IB with GRH: the LRH (replaced by ones, only its presence matters)
};
std::uint32_t compute_icrc(const IcrcInput& in);
// Whether the ICRC `wire` holds for `in` with the BTH's destination QP (IBA
// 9.2, bytes 5-7) replaced by `dest_qp`: the QP number was what a bit error damaged.
bool icrc_holds_with_dest_qp(IcrcInput in, std::uint32_t wire, std::uint32_t dest_qp);

}  // namespace rdmadiag::decode
