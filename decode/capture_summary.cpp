#include "decode/capture_summary.h"

namespace rdmadiag::decode {

namespace {
std::uint64_t fnv1a(std::uint64_t h, const std::uint8_t* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}
}  // namespace

std::uint64_t queue_pair_key(const DecodedPacket& p) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ static_cast<std::uint64_t>(p.transport);
  if (p.ipv4) h = fnv1a(h, p.ipv4->dst.data(), 4);
  else if (p.ipv6) h = fnv1a(h, p.ipv6->dst.data(), 16);
  else if (p.grh) h = fnv1a(h, p.grh->dgid.data(), 16);
  else if (p.lrh) {
    const std::uint8_t lid[2] = {static_cast<std::uint8_t>(p.lrh->dlid >> 8), static_cast<std::uint8_t>(p.lrh->dlid)};
    h = fnv1a(h, lid, 2);
  }
  return (h << 24) ^ p.ib.bth.dest_qp;
}

void CaptureSummary::add(const DecodedPacket& p, std::uint64_t frame, double ts) {
  if (packets == 0) {
    first_ts = ts;
    first_frame = frame;
  }
  last_ts = ts;
  last_frame = frame;
  ++packets;
  bytes += p.wirelen;
  if (p.truncated) ++truncated_packets;
  by_transport[static_cast<std::size_t>(p.transport)].add(p.wirelen);
  if (p.has_bth) {
    by_opcode[p.ib.bth.opcode].add(p.wirelen);
    if (!qps_capped_) {
      if (qps_.size() < kMaxTrackedQps) qps_.insert(queue_pair_key(p));
      else qps_capped_ = true;
    }
  }
  icrc.add(p.icrc);
  vcrc.add(p.vcrc);
  if (p.mad) ++mads;
  if (p.cm) ++cm_messages;
  for (const Diagnostic& d : p.diags) {
    DiagSummary& s = diags[static_cast<std::size_t>(d.code)];
    ++s.count;
    if (d.severity > s.severity) s.severity = d.severity;
    if (s.first_count < s.first_frames.size()) s.first_frames[s.first_count++] = frame;
  }
}

}  // namespace rdmadiag::decode
