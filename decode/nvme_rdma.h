// The NVMe over Fabrics RDMA transport binding (NVMe-oF 1.1 section 7.3; NVM
// Express RDMA Transport Binding): which RDMA messages on an NVMe queue pair
// carry what.
//  - Command capsules go host -> controller as an RDMA SEND (its first packet
//    holds the 64-byte SQE; in-capsule data follows it in the same message).
//  - Response capsules go controller -> host as an RDMA SEND or SEND with
//    Invalidate (the host's key named by the command's keyed SGL), 16 bytes.
//  - Data moves by RDMA READ (the controller reads host memory: writes, and
//    the Connect data of the admin queue) and RDMA WRITE (the controller writes
//    host memory: reads), addressed by the keyed SGL's key and address.
// The NVMe-oF port of rdma_cm is 4420 (service ID 0x0106xxxx: RDMA_PS_TCP).
// Over iWARP (RFC 5040 RDMAP on RFC 5041 DDP): the same messages, as RDMAP
// Send / Send with Invalidate (the Invalidate STag in DDP's ULP field, RFC
// 5040 section 4.2), RDMA Write and Read Request / Response segments; a
// Send's first DDP segment (MO 0) begins the capsule.
// One packet at a time and stateless: which queue pair belongs to NVMe, and
// which NVMe queue it is, is the analysis' business (nvme_analysis.h).
#pragma once
#include <cstdint>

#include "decode/byte_reader.h"
#include "decode/ddp_rdmap.h"
#include "decode/packet.h"

namespace rdmadiag::decode {

inline constexpr std::uint16_t kNvmeRdmaPort = 4420;
// rdma_cm service IDs for the TCP port space: 0x0000000001060000 | port.
inline constexpr std::uint64_t kRdmaCmTcpServiceBase = 0x0000000001060000ULL;

enum class NvmeRdmaRole : std::uint8_t {
  none,
  command,    // the first packet of a SEND: an SQE
  response,   // a 16-byte SEND (or SEND with Invalidate): a CQE
  data,       // RDMA READ request/response or RDMA WRITE: data of some command
};

struct NvmeRdmaPayload {
  NvmeRdmaRole role = NvmeRdmaRole::none;
  Bytes capsule;                // captured capsule bytes (command: from the SQE on; response: the CQE)
  std::uint32_t capsule_len = 0;  // its bytes on the wire in this packet
  bool invalidate = false;      // SEND with Invalidate
  std::uint32_t invalidated_key = 0;
  bool continues = false;       // a SEND_FIRST: the capsule goes on in later packets
};

// What one RoCE/IB packet is to an NVMe queue pair, if it is one. Only RC
// packets qualify; a SEND too short to hold an SQE and not 16 bytes long is
// `none` (so not every RC SEND is taken for a capsule).
NvmeRdmaPayload classify_nvme_rdma(const DecodedPacket& p);

// What one iWARP DDP segment (headers decoded; `payload_head`: the first
// bytes of its ULP payload) is to an NVMe connection. A Send's later segments
// (MO > 0: in-capsule data) are `none`.
NvmeRdmaPayload classify_nvme_iwarp(const DdpSegment& seg, Bytes payload_head);

// Whether an rdma_cm service ID names the NVMe-oF port (or `port`).
bool is_nvme_service(std::uint64_t service_id, std::uint16_t port = kNvmeRdmaPort);

}  // namespace rdmadiag::decode
