#include "exporters/flow_tally.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace rdmadiag::exporters {

using namespace rdmadiag::decode;

void LatencyHistogram::add(double us) {
  std::size_t i = 0;
  while (i < kLatencyBucketsUs.size() && us > kLatencyBucketsUs[i]) ++i;
  ++counts[i];
  ++count;
  exact_sum_us.add(us);
  sum_us = exact_sum_us.value();
}

void LatencyHistogram::add(const LatencyHistogram& o) {
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += o.counts[i];
  count += o.count;
  exact_sum_us.add(o.exact_sum_us);
  sum_us = exact_sum_us.value();
}

void FlowCounters::add(const FlowCounters& o) {
  packets += o.packets;
  bytes += o.bytes;
  psn_gaps += o.psn_gaps;
  psn_missing += o.psn_missing;
  duplicates += o.duplicates;
  out_of_order += o.out_of_order;
  retransmissions += o.retransmissions;
  icrc_bad += o.icrc_bad;
  ecn_ce += o.ecn_ce;
  cnp += o.cnp;
  acks += o.acks;
  rnr_naks += o.rnr_naks;
  for (std::size_t i = 0; i < naks.size(); ++i) naks[i] += o.naks[i];
  latency.add(o.latency);
}

std::string_view nak_code_name(std::size_t code) {
  static constexpr std::string_view kNames[] = {"psn_seq_error", "invalid_request", "remote_access", "remote_op",
                                                "invalid_rd_request"};
  return code < std::size(kNames) ? kNames[code] : "reserved";
}

void FlowCounters::add(const DecodedPacket& p, const PacketAnalysis& a) {
  ++packets;
  bytes += p.wirelen;
  if (a.gap) {
    ++psn_gaps;
    psn_missing += a.gap;
  }
  duplicates += a.duplicate;
  out_of_order += a.out_of_order;
  retransmissions += a.retransmission;
  ecn_ce += a.ecn_ce;
  cnp += a.cnp;
  if (p.icrc == CrcStatus::bad && !a.icrc_not_wire) ++icrc_bad;
  if (p.has_bth && p.ib.has(kAeth)) {
    switch (p.ib.aeth.kind()) {
      case AethKind::ack: ++acks; break;
      case AethKind::rnr_nak: ++rnr_naks; break;
      case AethKind::nak:
        if (p.ib.aeth.value() < naks.size()) ++naks[p.ib.aeth.value()];
        break;
      case AethKind::reserved: break;
    }
  }
  if (a.latency_us >= 0 && a.request_frame) latency.add(a.latency_us);
}

namespace {

void add_event(FlowDetail& d, const TimelineEvent& e) {
  if (d.events.size() < FlowTally::kMaxEvents) d.events.push_back(e);
  else ++d.events_dropped;
}

}  // namespace

void FlowTally::add(const DecodedPacket& p, const PacketAnalysis& a, std::uint64_t frame, double ts) {
  if (std::isnan(first_ts_)) first_ts_ = ts;
  totals_.add(p, a);
  if (a.flow == UINT32_MAX || !p.has_bth) return;
  if (a.flow >= slot_of_flow_.size()) slot_of_flow_.resize(a.flow + 1, -2);  // -2: not seen yet
  std::int32_t& slot = slot_of_flow_[a.flow];
  if (slot == -2) {
    if (details_.size() >= kMaxFlows) {
      slot = -1;
      ++untracked_flows_;
    } else {
      slot = static_cast<std::int32_t>(details_.size());
      FlowDetail d;
      d.flow = a.flow;
      d.first_frame = frame;
      d.src = src_address(p);
      d.dst = dst_address(p);
      d.dest_qp = p.ib.bth.dest_qp;
      d.transport = std::string(to_string(p.transport));
      details_.push_back(std::move(d));
    }
  }
  if (slot < 0) {
    untracked_.add(p, a);
    return;
  }
  FlowDetail& d = details_[static_cast<std::size_t>(slot)];
  d.counters.add(p, a);
  const double t = ts - first_ts_;
  const std::uint32_t psn = p.ib.bth.psn;
  if (d.seen++ % d.stride == 0) {
    if (d.points.size() == kMaxPoints) {
      // Full: keep every other point and halve the sampling rate from now on.
      std::size_t w = 0;
      for (std::size_t r = 0; r < d.points.size(); r += 2) d.points[w++] = d.points[r];
      d.points.resize(w);
      d.stride *= 2;
    }
    d.points.push_back({t, psn, frame});
  }
  if (a.gap) add_event(d, {t, psn, frame, "gap", a.gap});
  if (a.retransmission) add_event(d, {t, psn, frame, "retransmission", 0});
  if (a.duplicate) add_event(d, {t, psn, frame, "duplicate", 0});
  if (a.out_of_order) add_event(d, {t, psn, frame, "out_of_order", 0});
  if (p.icrc == CrcStatus::bad && !a.icrc_not_wire) add_event(d, {t, psn, frame, "icrc_bad", 0});
  if (a.cnp) add_event(d, {t, psn, frame, "cnp", 0});
  if (a.ecn_ce) add_event(d, {t, psn, frame, "ecn_ce", 0});
  if (p.ib.has(kAeth)) {
    if (p.ib.aeth.kind() == AethKind::nak) add_event(d, {t, psn, frame, "nak", 0});
    if (p.ib.aeth.kind() == AethKind::rnr_nak) add_event(d, {t, psn, frame, "rnr_nak", 0});
  }
}

namespace {

void revise_counters(FlowCounters& c, std::int64_t missing, std::int64_t gaps) {
  c.psn_missing = static_cast<std::uint64_t>(std::max<std::int64_t>(0, static_cast<std::int64_t>(c.psn_missing) + missing));
  c.psn_gaps = static_cast<std::uint64_t>(std::max<std::int64_t>(0, static_cast<std::int64_t>(c.psn_gaps) + gaps));
}

}  // namespace

void FlowTally::revise(const std::vector<GapRevision>& revisions) {
  struct Sum {
    std::uint32_t flow;
    std::int64_t missing = 0, gaps = 0;
  };
  std::unordered_map<std::uint64_t, Sum> by_frame;  // a gap frame's revisions, summed
  for (const GapRevision& r : revisions) {
    Sum& s = by_frame.try_emplace(r.frame, Sum{r.flow}).first->second;
    s.missing += r.missing;
    s.gaps += r.gaps;
  }
  for (const auto& [frame, s] : by_frame) {
    revise_counters(totals_, s.missing, s.gaps);
    const std::int32_t slot = s.flow < slot_of_flow_.size() ? slot_of_flow_[s.flow] : -1;
    if (slot < 0) {
      revise_counters(untracked_, s.missing, s.gaps);
      continue;
    }
    FlowDetail& d = details_[static_cast<std::size_t>(slot)];
    revise_counters(d.counters, s.missing, s.gaps);
    for (auto it = d.events.begin(); it != d.events.end(); ++it) {
      if (it->frame != frame || it->kind != "gap") continue;
      const std::int64_t left = static_cast<std::int64_t>(it->count) + s.missing;
      if (left > 0) it->count = static_cast<std::uint32_t>(left);
      else d.events.erase(it);
      break;
    }
  }
}

namespace {

// A replayed packet's counts in place of its tally as corrupt.
void revise_counters(FlowCounters& c, const ReplayRevision& r) {
  if (c.icrc_bad) --c.icrc_bad;
  if (r.gap) {
    ++c.psn_gaps;
    c.psn_missing += r.gap;
  }
  c.duplicates += r.duplicate;
  c.out_of_order += r.out_of_order;
  c.retransmissions += r.retransmission;
  if (r.latency_us >= 0 && r.request_frame) c.latency.add(r.latency_us);
}

}  // namespace

// Its icrc_bad event goes; its sequence events come in, in frame order.
void FlowTally::replace_events(FlowDetail& d, const ReplayRevision& r) const {
  const auto at = [&](std::uint64_t frame) {
    return std::lower_bound(d.events.begin(), d.events.end(), frame,
                            [](const TimelineEvent& e, std::uint64_t f) { return e.frame < f; });
  };
  for (auto it = at(r.frame); it != d.events.end() && it->frame == r.frame; ++it)
    if (it->kind == "icrc_bad") {
      d.events.erase(it);
      break;
    }
  const double t = r.ts - first_ts_;
  const auto add = [&](std::string_view kind, std::uint32_t count) {
    if (d.events.size() >= kMaxEvents) {
      ++d.events_dropped;
      return;
    }
    d.events.insert(at(r.frame + 1), TimelineEvent{t, r.psn, r.frame, kind, count});
  };
  if (r.gap) add("gap", r.gap);
  if (r.retransmission) add("retransmission", 0);
  if (r.duplicate) add("duplicate", 0);
  if (r.out_of_order) add("out_of_order", 0);
}

void FlowTally::revise(const std::vector<ReplayRevision>& replays) {
  for (const ReplayRevision& r : replays) {
    revise_counters(totals_, r);
    const std::int32_t slot = r.flow < slot_of_flow_.size() ? slot_of_flow_[r.flow] : -1;
    if (slot < 0) {
      revise_counters(untracked_, r);
      continue;
    }
    FlowDetail& d = details_[static_cast<std::size_t>(slot)];
    revise_counters(d.counters, r);
    replace_events(d, r);
  }
}

// One tally keeps the first kMaxFlows flows to appear in detail; each of them
// is among the first kMaxFlows of its own shard, so the shards hold them all.
FlowTally FlowTally::merge(const std::vector<const FlowTally*>& shards,
                           const std::vector<std::vector<std::uint32_t>>& flow_index, double origin) {
  FlowTally m;
  m.first_ts_ = origin;
  struct Ref {
    std::uint64_t first_frame;
    std::size_t shard, slot;
  };
  std::vector<Ref> refs;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const FlowTally& t = *shards[s];
    m.totals_.add(t.totals_);
    m.untracked_.add(t.untracked_);
    m.untracked_flows_ += t.untracked_flows_;
    for (std::size_t i = 0; i < t.details_.size(); ++i) refs.push_back({t.details_[i].first_frame, s, i});
  }
  std::sort(refs.begin(), refs.end(), [](const Ref& a, const Ref& b) {
    return a.first_frame != b.first_frame ? a.first_frame < b.first_frame : a.shard != b.shard ? a.shard < b.shard : a.slot < b.slot;
  });
  for (const Ref& r : refs) {
    const FlowDetail& d = shards[r.shard]->details_[r.slot];
    if (m.details_.size() >= kMaxFlows) {
      m.untracked_.add(d.counters);
      ++m.untracked_flows_;
      continue;
    }
    m.details_.push_back(d);
    FlowDetail& nd = m.details_.back();
    const auto& map = flow_index[r.shard];
    nd.flow = d.flow < map.size() ? map[d.flow] : UINT32_MAX;
    if (nd.flow >= m.slot_of_flow_.size() && nd.flow != UINT32_MAX) m.slot_of_flow_.resize(nd.flow + 1, -2);
    if (nd.flow != UINT32_MAX) m.slot_of_flow_[nd.flow] = static_cast<std::int32_t>(m.details_.size() - 1);
  }
  return m;
}

Json latency_histogram_json(const LatencyHistogram& h) {
  Json le = Json::array();
  for (double b : kLatencyBucketsUs) le.push_back(b);
  Json counts = Json::array();
  for (auto c : h.counts) counts.push_back(c);
  return {{"le_us", le}, {"counts", counts}, {"count", h.count}, {"sum_us", h.sum_us}};
}

Json FlowTally::timeline_json() const {
  Json flows = Json::array();
  for (const FlowDetail& d : details_) {
    Json pts = Json::array();
    for (const auto& p : d.points) pts.push_back(Json::array({p.t, p.psn, p.frame}));
    Json evs = Json::array();
    for (const auto& e : d.events) {
      Json j = {{"t", e.t}, {"psn", e.psn}, {"frame", e.frame}, {"kind", e.kind}};
      if (e.count) j["count"] = e.count;
      evs.push_back(std::move(j));
    }
    Json f = {{"flow", d.flow},     {"src", d.src},         {"dst", d.dst},           {"dest_qp", d.dest_qp},
              {"packets", d.seen},  {"stride", d.stride},   {"points", std::move(pts)}, {"events", std::move(evs)}};
    if (d.events_dropped) f["events_dropped"] = d.events_dropped;
    flows.push_back(std::move(f));
  }
  Json j = {{"point_fields", Json::array({"t", "psn", "frame"})}, {"flows", std::move(flows)}};
  if (untracked_flows_) j["flows_not_detailed"] = untracked_flows_;
  return j;
}

Json FlowTally::latency_histograms_json() const {
  Json flows = Json::array();
  for (const FlowDetail& d : details_)
    if (d.counters.latency.count)
      flows.push_back({{"flow", d.flow}, {"dest_qp", d.dest_qp}, {"histogram", latency_histogram_json(d.counters.latency)}});
  return {{"all", latency_histogram_json(totals_.latency)}, {"flows", std::move(flows)}};
}

}  // namespace rdmadiag::exporters
