// The NVMe over Fabrics RDMA transport binding: see nvme_rdma.h.
#include "decode/nvme_rdma.h"

#include "decode/nvme_capsule.h"

namespace rdmadiag::decode {

NvmeRdmaPayload classify_nvme_rdma(const DecodedPacket& p) {
  NvmeRdmaPayload out;
  const OpcodeInfo* op = p.opcode();
  if (!op || !op->valid || op->service != TransportService::rc) return out;
  switch (op->kind) {
    case OpKind::send_only:
    case OpKind::send_first:
      break;
    case OpKind::read_request: case OpKind::read_response_first: case OpKind::read_response_middle:
    case OpKind::read_response_last: case OpKind::read_response_only: case OpKind::write_first:
    case OpKind::write_middle: case OpKind::write_last: case OpKind::write_only:
      out.role = NvmeRdmaRole::data;
      return out;
    default:
      return out;
  }
  out.capsule = p.payload;
  out.capsule_len = p.payload_len;
  out.invalidate = op->with_invalidate;
  out.invalidated_key = p.ib.invalidate_rkey;
  out.continues = op->kind == OpKind::send_first;
  if (!out.continues && p.payload_len == kNvmeCqeLength)
    out.role = NvmeRdmaRole::response;
  else if (p.payload_len >= kNvmeSqeLength && !out.invalidate)
    out.role = NvmeRdmaRole::command;
  return out;
}

namespace {
bool is_send_invalidate(std::uint8_t op) {
  return op == static_cast<std::uint8_t>(RdmapOpcode::send_invalidate) ||
         op == static_cast<std::uint8_t>(RdmapOpcode::send_se_invalidate);
}
bool is_send(std::uint8_t op) {
  return op == static_cast<std::uint8_t>(RdmapOpcode::send) || op == static_cast<std::uint8_t>(RdmapOpcode::send_se) ||
         is_send_invalidate(op);
}
}  // namespace

NvmeRdmaPayload classify_nvme_iwarp(const DdpSegment& seg, Bytes payload_head) {
  NvmeRdmaPayload out;
  const std::uint8_t op = seg.ddp.opcode();
  if (op == static_cast<std::uint8_t>(RdmapOpcode::rdma_write) ||
      op == static_cast<std::uint8_t>(RdmapOpcode::read_request) ||
      op == static_cast<std::uint8_t>(RdmapOpcode::read_response)) {
    out.role = NvmeRdmaRole::data;
    return out;
  }
  if (!is_send(op) || seg.ddp.tagged || seg.ddp.qn != kQueueSend || seg.ddp.mo != 0) return out;
  out.capsule = payload_head;
  out.capsule_len = seg.payload_len;
  out.invalidate = is_send_invalidate(op);
  out.invalidated_key = seg.ddp.ulp;
  out.continues = !seg.ddp.last;
  if (!out.continues && seg.payload_len == kNvmeCqeLength)
    out.role = NvmeRdmaRole::response;
  else if (seg.payload_len >= kNvmeSqeLength && !out.invalidate)
    out.role = NvmeRdmaRole::command;
  return out;
}

bool is_nvme_service(std::uint64_t service_id, std::uint16_t port) {
  return service_id == (kRdmaCmTcpServiceBase | port);
}

}  // namespace rdmadiag::decode
