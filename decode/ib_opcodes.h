// The BTH opcode space: IBA Vol 1 section 9.2.1 (table 38, "OpCode field"), plus
// CNP from Annex A17 (RoCEv2) A17.9.2, and FLUSH / ATOMIC WRITE from the IBA 1.5
// memory-placement extensions. The top 3 bits select the transport service, the
// low 5 bits the operation; the operation fixes which extended headers follow
// (section 9.2, table 39 "Packet header sequence").
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace rdmadiag::decode {

enum class TransportService : std::uint8_t { rc, uc, rd, ud, cnp, xrc, vendor, reserved };
std::string_view to_string(TransportService s);

enum class OpKind : std::uint8_t {
  invalid,
  send_first, send_middle, send_last, send_only,
  write_first, write_middle, write_last, write_only,
  read_request, read_response_first, read_response_middle, read_response_last, read_response_only,
  acknowledge, atomic_acknowledge, compare_swap, fetch_add,
  resync, flush, atomic_write, cnp,
};

// Extended transport headers, in the order they appear on the wire.
enum ExtHeader : std::uint16_t {
  kRdeth = 1 << 0,      // 4 bytes, RD
  kDeth = 1 << 1,       // 8 bytes, RD requests and UD
  kXrceth = 1 << 2,     // 4 bytes, XRC requests
  kFeth = 1 << 3,       // 4 bytes, FLUSH (precedes its RETH)
  kReth = 1 << 4,       // 16 bytes
  kAtomicEth = 1 << 5,  // 28 bytes
  kAeth = 1 << 6,       // 4 bytes
  kAtomicAckEth = 1 << 7,  // 8 bytes
  kImmDt = 1 << 8,      // 4 bytes
  kIeth = 1 << 9,       // 4 bytes
};

struct OpcodeInfo {
  std::string_view name;  // e.g. "RC_RDMA_WRITE_ONLY" (the Linux kernel's IB_OPCODE_* spelling)
  TransportService service;
  OpKind kind;
  std::uint16_t ext_headers;  // ExtHeader bits
  bool with_immediate;
  bool with_invalidate;
  bool valid;
  // A request consumes requester PSNs; a response/ACK echoes them.
  constexpr bool is_request() const {
    return valid && kind != OpKind::acknowledge && kind != OpKind::atomic_acknowledge &&
           kind != OpKind::read_response_first && kind != OpKind::read_response_middle &&
           kind != OpKind::read_response_last && kind != OpKind::read_response_only &&
           kind != OpKind::cnp;
  }
  constexpr bool is_response() const { return valid && !is_request() && kind != OpKind::cnp; }
  // Packets whose payload must be exactly PMTU bytes (first/middle of a multi-packet message).
  constexpr bool full_mtu_payload() const {
    return kind == OpKind::send_first || kind == OpKind::send_middle || kind == OpKind::write_first ||
           kind == OpKind::write_middle || kind == OpKind::read_response_first ||
           kind == OpKind::read_response_middle;
  }
  // May this opcode carry a payload at all?
  constexpr bool carries_payload() const {
    switch (kind) {
      case OpKind::read_request: case OpKind::acknowledge: case OpKind::atomic_acknowledge:
      case OpKind::compare_swap: case OpKind::fetch_add: case OpKind::resync: case OpKind::flush:
      case OpKind::invalid:
        return false;
      default:
        return true;
    }
  }
};

// Every opcode's facts, built at compile time (ib_opcodes.cpp): a look-up is
// one load, and every packet makes several.
extern const std::array<OpcodeInfo, 256> kOpcodeInfo;
inline const OpcodeInfo& opcode_info(std::uint8_t opcode) { return kOpcodeInfo[opcode]; }
std::string_view to_string(OpKind kind);

// Byte length of one extended header.
std::size_t ext_header_length(ExtHeader h);

inline constexpr std::uint8_t kOpcodeCnp = 0x81;

}  // namespace rdmadiag::decode
