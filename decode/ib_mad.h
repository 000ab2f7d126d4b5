// Management datagrams on QP0/QP1: the common MAD header (IBA Vol 1 section
// 13.4.2) and the Communication Management messages of chapter 12 (section 12.6:
// REQ, MRA, REJ, REP, RTU, DREQ, DREP), which carry the QPNs and starting PSNs
// that pair the two directions of a connection.
#pragma once
#include <cstdint>
#include <string_view>

#include "decode/byte_reader.h"
#include "decode/parse_status.h"

namespace rdmadiag::decode {

inline constexpr std::size_t kMadLength = 256;
inline constexpr std::size_t kMadHeaderLength = 24;
inline constexpr std::uint8_t kMgmtClassCm = 0x07;

struct MadHeader {
  std::uint8_t base_version;
  std::uint8_t mgmt_class;
  std::uint8_t class_version;
  bool response;       // R bit of the method byte
  std::uint8_t method; // low 7 bits
  std::uint16_t status;
  std::uint16_t class_specific;
  std::uint64_t transaction_id;
  std::uint16_t attribute_id;
  std::uint32_t attribute_modifier;
};

enum class CmMessageType : std::uint8_t { none, req, mra, rej, rep, rtu, dreq, drep, sidr_req, sidr_rep, lap, apr, class_port_info };

// The fields of a CM message that connection pairing needs. Which ones are set
// depends on `type` (e.g. REQ/REP set local_qpn and starting_psn).
struct CmMessage {
  CmMessageType type = CmMessageType::none;
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::uint64_t service_id = 0;        // REQ
  std::uint32_t local_qpn = 0;         // REQ, REP; DREQ: remote QPN
  std::uint32_t starting_psn = 0;      // REQ, REP: the first PSN the sender will receive
  std::uint8_t transport_service = 0;  // REQ: 0 RC, 1 UC, 2 RD, 3 XRC (extended)
  std::uint16_t pkey = 0;              // REQ
  std::uint8_t path_mtu = 0;           // REQ: IBA MTU code (1=256 ... 5=4096)
  std::uint16_t reject_reason = 0;     // REJ
};

std::string_view mgmt_class_name(std::uint8_t mgmt_class);
std::string_view attribute_name(std::uint8_t mgmt_class, std::uint16_t attribute_id);
std::string_view to_string(CmMessageType t);

ParseStatus parse_mad_header(Bytes b, MadHeader& out);
// `b` starts at the MAD header; requires a CM-class MAD. Unknown attributes give type none.
ParseStatus parse_cm(Bytes b, const MadHeader& mad, CmMessage& out);

}  // namespace rdmadiag::decode
