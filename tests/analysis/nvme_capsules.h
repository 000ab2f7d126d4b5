// NVMe-oF capsules on RoCE SENDs between the two hosts of the analysis tests
// (two_hosts_packet.h): host A sends commands to controller B, B completes.
// Field offsets from NVMe Base 1.4 figures 104 (SQE) and 124 (CQE) and
// NVMe-oF 1.1 figure 19 (Connect).
#pragma once
#include <cstdint>
#include <vector>

#include "decode/nvme_capsule.h"
#include "decode/packet.h"
#include "tests/analysis/two_hosts_packet.h"

namespace rdmadiag::decode::test {

inline constexpr std::uint8_t kSendOnly = 0x04;

// A RoCE SEND Only carrying `capsule` (the vector must outlive the packet) at
// `psn` (a resent copy keeps its original's).
inline DecodedPacket capsule_packet(bool to_controller, std::uint32_t dest_qp, const std::vector<std::uint8_t>& capsule,
                                   std::uint32_t psn = 0) {
  DecodedPacket p = two_hosts_packet(to_controller, kSendOnly, 0);
  p.ib.bth.dest_qp = dest_qp;
  p.ib.bth.psn = psn;
  p.payload = Bytes(capsule.data(), capsule.size());
  p.payload_len = static_cast<std::uint32_t>(capsule.size());
  return p;
}

inline void put_le(std::vector<std::uint8_t>& b, std::size_t off, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) b[off + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// An SQE: `opcode` (NVM Read 02h by default), CID, starting LBA in CDW10-11.
inline std::vector<std::uint8_t> command(std::uint16_t cid, std::uint8_t opcode = 0x02, std::uint64_t slba = 0) {
  std::vector<std::uint8_t> sqe(kNvmeSqeLength, 0);
  sqe[0] = opcode;
  put_le(sqe, 2, cid, 2);
  put_le(sqe, 40, slba, 8);
  return sqe;
}

// A Fabrics Connect SQE for queue `qid`.
inline std::vector<std::uint8_t> connect(std::uint16_t cid, std::uint16_t qid) {
  std::vector<std::uint8_t> sqe = command(cid, kNvmeFabricsOpcode);
  sqe[4] = static_cast<std::uint8_t>(FabricsType::connect);
  put_le(sqe, 42, qid, 2);
  return sqe;
}

// A CQE for (SQID, CID); `status`: bytes 14-15 as on the wire (0: success).
inline std::vector<std::uint8_t> completion(std::uint16_t sqid, std::uint16_t cid, std::uint16_t status = 0) {
  std::vector<std::uint8_t> cqe(kNvmeCqeLength, 0);
  put_le(cqe, 10, sqid, 2);
  put_le(cqe, 12, cid, 2);
  put_le(cqe, 14, status, 2);
  return cqe;
}

}  // namespace rdmadiag::decode::test
