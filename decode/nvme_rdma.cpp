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

bool is_nvme_service(std::uint64_t service_id, std::uint16_t port) {
  return service_id == (kRdmaCmTcpServiceBase | port);
}

}  // namespace rdmadiag::decode
