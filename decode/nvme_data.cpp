// RDMA READ/WRITE data to NVMe command matching: see nvme_data.h.
#include "decode/nvme_data.h"

#include <algorithm>

#include "decode/ddp_rdmap.h"
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
  return NvmeDataPacket{*op.target, true, true, reth.va, reth.dma_len};
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

std::optional<NvmeDataPacket> NvmeIwarpDataMatcher::on_segment(const DdpSegment& seg, const FindByKey& find) {
  const DdpHeader& d = seg.ddp;
  switch (static_cast<RdmapOpcode>(d.opcode())) {
    case RdmapOpcode::rdma_write: {
      if (!d.tagged) return std::nullopt;
      const bool first = !write_open_;
      write_open_ = !d.last;
      const std::optional<std::uint16_t> cid = find(d.stag, d.to);
      if (!cid) return std::nullopt;
      return NvmeDataPacket{{*cid, d.stag}, first, true, d.to, seg.payload_len};
    }
    case RdmapOpcode::read_request: {
      if (!seg.has_read_request) return std::nullopt;
      const RdmaReadRequest& rq = seg.read;
      Read& slot = reads_[next_];
      next_ = (next_ + 1) % kSlots;
      slot = Read{true, rq.sink_stag, rq.sink_to, rq.read_size, std::nullopt};
      if (const std::optional<std::uint16_t> cid = find(rq.src_stag, rq.src_to))
        slot.target = NvmeDataTarget{*cid, rq.src_stag};
      if (!slot.target) return std::nullopt;
      return NvmeDataPacket{*slot.target, true, true, rq.src_to, rq.read_size};
    }
    case RdmapOpcode::read_response: {
      if (!d.tagged) return std::nullopt;
      // Newest first: a sink STag the controller reuses names its latest request.
      for (std::size_t i = 1; i <= kSlots; ++i) {
        const Read& r = reads_[(next_ + kSlots - i) % kSlots];
        if (r.used && r.sink_stag == d.stag && d.to - r.sink_to < std::max<std::uint32_t>(r.size, 1))
          return r.target ? std::optional<NvmeDataPacket>(NvmeDataPacket{*r.target}) : std::nullopt;
      }
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace rdmadiag::decode
