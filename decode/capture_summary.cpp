#include "decode/capture_summary.h"

#include <algorithm>

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

void CaptureSummary::prefetch_queue_pair(const DecodedPacket& p) const {
  if (!qps_capped_) qps_.prefetch(queue_pair_key(p));
}

void CaptureSummary::add(const DecodedPacket& p, std::uint64_t frame, double ts, bool qp_counted) {
  if (packets == 0) {
    first_ts = earliest_ts = latest_ts = ts;
    first_frame = frame;
  }
  earliest_ts = std::min(earliest_ts, ts);
  latest_ts = std::max(latest_ts, ts);
  last_ts = ts;
  last_frame = frame;
  ++packets;
  bytes += p.wirelen;
  if (p.truncated) ++truncated_packets;
  if (p.sll && p.linktype == linktype::kLinuxSll2 && p.capture_point &&
      p.capture_point == sll2_capture_point(p.sll->ifindex))
    sll2_points_.set(p.sll->ifindex);
  by_transport[static_cast<std::size_t>(p.transport)].add(p.wirelen);
  if (p.has_bth) {
    by_opcode[p.ib.bth.opcode].add(p.wirelen);
    if (!qps_capped_ && !qp_counted) {
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

void DiagSummary::merge(const DiagSummary& o) {
  count += o.count;
  if (o.severity > severity) severity = o.severity;
  // Both lists are in frame order: keep the earliest of the two.
  std::array<std::uint64_t, kFirstFrames * 2> both{};
  const auto end = std::merge(first_frames.begin(), first_frames.begin() + static_cast<std::ptrdiff_t>(first_count),
                              o.first_frames.begin(), o.first_frames.begin() + static_cast<std::ptrdiff_t>(o.first_count),
                              both.begin());
  first_count = std::min<std::size_t>(static_cast<std::size_t>(end - both.begin()), kFirstFrames);
  std::copy_n(both.begin(), first_count, first_frames.begin());
}

void CaptureSummary::merge(const CaptureSummary& o) {
  if (o.packets) {
    if (packets == 0 || o.first_frame < first_frame) {
      first_frame = o.first_frame;
      first_ts = o.first_ts;
    }
    if (packets == 0 || o.last_frame > last_frame) {
      last_frame = o.last_frame;
      last_ts = o.last_ts;
    }
    earliest_ts = packets == 0 ? o.earliest_ts : std::min(earliest_ts, o.earliest_ts);
    latest_ts = packets == 0 ? o.latest_ts : std::max(latest_ts, o.latest_ts);
  }
  packets += o.packets;
  bytes += o.bytes;
  truncated_packets += o.truncated_packets;
  for (std::size_t i = 0; i < by_transport.size(); ++i) {
    by_transport[i].packets += o.by_transport[i].packets;
    by_transport[i].bytes += o.by_transport[i].bytes;
  }
  for (std::size_t i = 0; i < by_opcode.size(); ++i) {
    by_opcode[i].packets += o.by_opcode[i].packets;
    by_opcode[i].bytes += o.by_opcode[i].bytes;
  }
  icrc.merge(o.icrc);
  vcrc.merge(o.vcrc);
  for (std::size_t d = 0; d < diags.size(); ++d) diags[d].merge(o.diags[d]);
  cm_messages += o.cm_messages;
  mads += o.mads;
  if (qps_.size() == 0) {
    qps_ = o.qps_;  // (one shard held every QP, as one address pair gives: a copy, not 1M inserts)
  } else {
    o.qps_.for_each([this](std::uint64_t qp) {
      if (qps_.size() < kMaxTrackedQps) qps_.insert(qp);
    });
  }
  qps_capped_ = qps_capped_ || o.qps_capped_;
  sll2_points_ |= o.sll2_points_;
}

std::vector<std::uint32_t> CaptureSummary::sll2_interfaces() const {
  std::vector<std::uint32_t> out;
  if (sll2_points_.none()) return out;
  for (std::uint32_t i = 0; i < sll2_points_.size(); ++i)
    if (sll2_points_.test(i)) out.push_back(i);
  return out;
}

}  // namespace rdmadiag::decode
