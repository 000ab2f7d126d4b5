// RDMA READ/WRITE data to NVMe command matching: see nvme_data.h.
#include "decode/nvme_data.h"

#include <algorithm>

#include "decode/ib_transport.h"

namespace rdmadiag::decode {

namespace {
constexpr std::uint32_t kSmallestPmtu = 256;
constexpr std::uint32_t kLargestPmtu = 4096;  // IBA 7.7.8 (and RoCE)
}

// A packet with a RETH: a READ request or the first (or only) WRITE packet.
// Unmatched operations are kept too, so their packets are not taken for an older one's.
std::optional<NvmeDataPacket> NvmeDataMatcher::start(const DecodedPacket& p, const FindByKey& find) {
  if (!p.ib.has(kReth)) return std::nullopt;
  const Reth& reth = p.ib.reth;
  Operation op{true, p.opcode()->kind == OpKind::read_request, p.ib.bth.psn, reth.dma_len, std::nullopt};
  if (const std::optional<std::uint16_t> cid = find(reth.rkey, reth.va)) op.target = NvmeDataTarget{*cid, reth.rkey};
  // A resent first packet (same PSN) replaces its operation.
  auto same = std::find_if(ops_.begin(), ops_.end(), [&](const Operation& o) { return o.used && o.psn == op.psn; });
  if (same == ops_.end()) {
    same = ops_.begin() + static_cast<std::ptrdiff_t>(next_);
    next_ = (next_ + 1) % kSlots;
  }
  *same = op;
  if (!op.target) return std::nullopt;
  return NvmeDataPacket{*op.target, true, reth.va, reth.dma_len};
}

// The operation whose PSN range holds `psn`: the latest start at or before it.
const NvmeDataMatcher::Operation* NvmeDataMatcher::continued(std::uint32_t psn, bool read) const {
  const std::uint32_t mtu = pmtu_ ? pmtu_ : kSmallestPmtu;
  const Operation* best = nullptr;
  std::int32_t best_offset = 0;
  for (const auto& o : ops_) {
    if (!o.used || o.read != read) continue;
    const std::int32_t offset = psn_diff(psn, o.psn);
    const auto packets = static_cast<std::int32_t>(std::max<std::uint32_t>((o.length + mtu - 1) / mtu, 1));
    if (offset < 0 || offset >= packets) continue;
    if (!best || offset < best_offset) {
      best = &o;
      best_offset = offset;
    }
  }
  return best;
}

// First and middle packets carry exactly one path MTU of payload.
void NvmeDataMatcher::learn_pmtu(std::uint32_t payload_len) {
  pmtu_ = std::max(pmtu_, std::min(payload_len, kLargestPmtu));
}

std::optional<NvmeDataPacket> NvmeDataMatcher::on_packet(const DecodedPacket& p, const FindByKey& find) {
  const OpcodeInfo* op = p.opcode();
  if (!op || !op->valid) return std::nullopt;
  bool read = false;
  switch (op->kind) {
    case OpKind::read_request: case OpKind::write_first: case OpKind::write_only:
      if (op->kind == OpKind::write_first) learn_pmtu(p.payload_len);
      return start(p, find);
    case OpKind::read_response_first: case OpKind::read_response_middle:
      learn_pmtu(p.payload_len);
      read = true;
      break;
    case OpKind::read_response_last: case OpKind::read_response_only:
      read = true;
      break;
    case OpKind::write_middle:
      learn_pmtu(p.payload_len);
      break;
    case OpKind::write_last:
      break;
    default:
      return std::nullopt;
  }
  const Operation* o = continued(p.ib.bth.psn, read);
  if (!o || !o->target) return std::nullopt;
  return NvmeDataPacket{*o->target};
}

}  // namespace rdmadiag::decode
