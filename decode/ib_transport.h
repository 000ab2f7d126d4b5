// InfiniBand transport headers: the Base Transport Header (IBA Vol 1 section
// 9.2) and the extended transport headers of section 9.3 (RDETH, DETH, XRCETH,
// RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, and FETH from the IBA 1.5
// memory-placement extensions), which the opcode selects (ib_opcodes.h).
#pragma once
#include <cstdint>
#include <string_view>

#include "decode/byte_reader.h"
#include "decode/ib_opcodes.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::size_t kBthLength = 12;
inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;

struct Bth {
  std::uint8_t opcode;
  bool solicited_event;
  bool mig_req;
  std::uint8_t pad_count;
  std::uint8_t tver;
  std::uint16_t pkey;
  bool fecn;
  bool becn;
  std::uint32_t dest_qp;  // 24 bits
  bool ack_req;
  std::uint32_t psn;      // 24 bits
};

struct Reth {
  std::uint64_t va;
  std::uint32_t rkey;
  std::uint32_t dma_len;
};

struct AtomicEth {
  std::uint64_t va;
  std::uint32_t rkey;
  std::uint64_t swap_add;
  std::uint64_t compare;
};

// AETH syndrome (IBA 9.7.5.1, table 43): bits 6:5 select ACK / RNR NAK / NAK.
enum class AethKind : std::uint8_t { ack, rnr_nak, reserved, nak };
// NAK codes (IBA table 44).
enum class NakCode : std::uint8_t {
  psn_sequence_error = 0,
  invalid_request = 1,
  remote_access_error = 2,
  remote_operational_error = 3,
  invalid_rd_request = 4,
};

struct Aeth {
  std::uint8_t syndrome;
  std::uint32_t msn;  // 24 bits
  AethKind kind() const { return static_cast<AethKind>((syndrome >> 5) & 3); }
  std::uint8_t value() const { return syndrome & 0x1F; }  // credits, RNR timer code or NAK code
  // A NAK for a PSN sequence error: its PSN is the one the responder expected.
  bool psn_sequence_nak() const {
    return kind() == AethKind::nak && value() == static_cast<std::uint8_t>(NakCode::psn_sequence_error);
  }
  // RNR NAK: the minimum wait the responder asks for (IBA table 45), in milliseconds.
  double rnr_timer_ms() const;
  std::string_view kind_name() const;  // "ack", "rnr_nak", "nak_psn_seq_error", ...
};

struct Deth {
  std::uint32_t qkey;
  std::uint32_t src_qp;
};

struct Feth {
  std::uint8_t selectivity_level;
  std::uint8_t placement_type;
};

// BTH plus whatever extended headers the opcode selects. `present` holds ExtHeader bits.
struct IbTransport {
  Bth bth{};
  std::uint16_t present = 0;
  std::uint32_t rdeth_ee_context = 0;
  Deth deth{};
  std::uint32_t xrc_srq = 0;
  Feth feth{};
  Reth reth{};
  AtomicEth atomic_eth{};
  Aeth aeth{};
  std::uint64_t atomic_ack_orig_data = 0;
  std::uint32_t immediate = 0;
  std::uint32_t invalidate_rkey = 0;
  std::uint16_t header_len = 0;  // BTH + extended headers
  bool has(ExtHeader h) const { return (present & h) != 0; }
};

// Parses the BTH and the extended headers at the start of `b`. Stops at the
// first header that is not wholly captured (truncated); `out.present` says what
// was decoded.
ParseStatus parse_ib_transport(Bytes b, IbTransport& out);

// 24-bit PSN arithmetic (wraps from 0xFFFFFF to 0): a - b in [-2^23, 2^23).
inline std::int32_t psn_diff(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d = (a - b) & kPsnMask;
  return d & 0x800000 ? static_cast<std::int32_t>(d) - 0x1000000 : static_cast<std::int32_t>(d);
}

}  // namespace rdmadiag::decode
