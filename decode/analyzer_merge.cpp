#include "decode/analyzer_merge.h"

#include <algorithm>
#include <tuple>

#include "decode/transport_analysis.h"

namespace rdmadiag::decode {

namespace {

void add_counts(CrcCounts& a, const CrcCounts& b) {
  a.ok += b.ok;
  a.bad += b.bad;
  a.unverifiable += b.unverifiable;
}

void add_counts(IwarpCrcCounts& a, const IwarpCrcCounts& b) {
  a.ok += b.ok;
  a.bad += b.bad;
  a.unverifiable += b.unverifiable;
  a.not_negotiated += b.not_negotiated;
}

}  // namespace

void AnalyzerMerge::finish_shards(std::span<Analyzer* const> shards) {
  std::uint64_t last = 0;
  double last_ts = 0;
  for (const Analyzer* a : shards)
    if (a->iwarp_->last_frame() > last) {
      last = a->iwarp_->last_frame();
      last_ts = a->iwarp_->last_ts();
    }
  for (Analyzer* a : shards) {
    a->iwarp_->set_end(last, last_ts);
    a->finish();
  }
}

bool AnalyzerMerge::cm_split(std::span<Analyzer* const> shards) {
  std::vector<std::pair<std::uint32_t, std::size_t>> reqs;  // (comm id, shard)
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const TransportAnalyzer& t = *shards[s]->transport_;
    if (t.cm_ids_overflow_) return true;  // cannot tell: say so
    for (std::uint32_t id : t.cm_req_ids_) reqs.emplace_back(id, s);
  }
  std::sort(reqs.begin(), reqs.end());
  for (std::size_t s = 0; s < shards.size(); ++s)
    for (std::uint32_t id : shards[s]->transport_->cm_unmatched_reps_) {
      auto it = std::lower_bound(reqs.begin(), reqs.end(), std::pair<std::uint32_t, std::size_t>{id, 0});
      for (; it != reqs.end() && it->first == id; ++it)
        if (it->second != s) return true;
    }
  return false;
}

// Conservative: the sum of the shards' peaks bounds what one analyzer would
// have held at once; while it stays under a bound, one analyzer never reached it.
bool AnalyzerMerge::bounds_reached(std::span<Analyzer* const> shards) {
  std::size_t live = 0, flows = 0, conns = 0, buffered = 0, qps = 0, budget = 0, cm_reqs = 0;
  for (const Analyzer* a : shards) {
    const TransportAnalyzer& t = *a->transport_;
    const IwarpAnalyzer& w = *a->iwarp_;
    if (t.evicted_ || t.flows_.cap_reached() || w.stats_.untracked_connections || a->summary_.qps_capped_) return true;
    live += t.flows_.peak();
    flows += t.summaries_.size();
    conns += w.peak_live_;
    buffered += w.peak_buffered_;
    budget = w.budget_.limit;
    qps += a->summary_.queue_pairs();
    cm_reqs += t.cm_req_ids_.size();  // every REQ seen: at least those pending at once
  }
  constexpr std::size_t kLargestSegment = 65536;
  return live >= TransportAnalyzer::kMaxLiveFlows || flows > TransportAnalyzer::kMaxRetiredFlows ||
         conns >= IwarpAnalyzer::kMaxConnections || buffered + kLargestSegment > budget ||
         qps >= CaptureSummary::kMaxTrackedQps || cm_reqs > 65536;  // TransportAnalyzer clears pending REQs past that
}

void AnalyzerMerge::merge(std::span<Analyzer* const> shards, Analyzer& out,
                          std::vector<std::vector<std::uint32_t>>& flow_index) {
  const std::size_t n = shards.size();

  // ---- capture summary: sums, the earliest first frame, the latest last frame.
  CaptureSummary& sum = out.summary_;
  std::vector<std::uint64_t> diag_frames;
  for (std::size_t d = 0; d < sum.diags.size(); ++d) {
    DiagSummary& ds = sum.diags[d];
    diag_frames.clear();
    for (const Analyzer* a : shards) {
      const DiagSummary& x = a->summary_.diags[d];
      ds.count += x.count;
      if (x.severity > ds.severity) ds.severity = x.severity;
      diag_frames.insert(diag_frames.end(), x.first_frames.begin(), x.first_frames.begin() + static_cast<std::ptrdiff_t>(x.first_count));
    }
    std::sort(diag_frames.begin(), diag_frames.end());
    ds.first_count = std::min(diag_frames.size(), ds.first_frames.size());
    std::copy_n(diag_frames.begin(), ds.first_count, ds.first_frames.begin());
  }
  for (const Analyzer* a : shards) {
    const CaptureSummary& x = a->summary_;
    if (x.packets) {
      if (sum.packets == 0 || x.first_frame < sum.first_frame) {
        sum.first_frame = x.first_frame;
        sum.first_ts = x.first_ts;
      }
      if (sum.packets == 0 || x.last_frame > sum.last_frame) {
        sum.last_frame = x.last_frame;
        sum.last_ts = x.last_ts;
      }
    }
    sum.packets += x.packets;
    sum.bytes += x.bytes;
    sum.truncated_packets += x.truncated_packets;
    for (std::size_t i = 0; i < sum.by_transport.size(); ++i) {
      sum.by_transport[i].packets += x.by_transport[i].packets;
      sum.by_transport[i].bytes += x.by_transport[i].bytes;
    }
    for (std::size_t i = 0; i < sum.by_opcode.size(); ++i) {
      sum.by_opcode[i].packets += x.by_opcode[i].packets;
      sum.by_opcode[i].bytes += x.by_opcode[i].bytes;
    }
    add_counts(sum.icrc, x.icrc);
    add_counts(sum.vcrc, x.vcrc);
    sum.cm_messages += x.cm_messages;
    sum.mads += x.mads;
    for (std::uint64_t qp : x.qps_)
      if (sum.qps_.size() < CaptureSummary::kMaxTrackedQps) sum.qps_.insert(qp);
    sum.qps_capped_ = sum.qps_capped_ || x.qps_capped_;
  }

  // ---- IB/RoCE flows: merged index = creation order = (creating frame, order within its shard).
  TransportAnalyzer& t = *out.transport_;
  struct FlowRef {
    std::uint64_t first_frame;
    std::size_t shard, pos;
  };
  std::vector<FlowRef> refs;
  flow_index.assign(n, {});
  for (std::size_t s = 0; s < n; ++s) {
    const TransportAnalyzer& x = *shards[s]->transport_;
    flow_index[s].assign(x.next_index_, UINT32_MAX);
    for (std::size_t i = 0; i < x.summaries_.size(); ++i) refs.push_back({x.summaries_[i].first_frame, s, i});
    t.evicted_ += x.evicted_;
    t.global_pmtu_ = std::max(t.global_pmtu_, x.global_pmtu_);
  }
  std::sort(refs.begin(), refs.end(), [&](const FlowRef& a, const FlowRef& b) {
    return std::tie(a.first_frame, a.shard, a.pos) < std::tie(b.first_frame, b.shard, b.pos);
  });
  t.summaries_.clear();
  t.summaries_.reserve(refs.size());
  for (const FlowRef& r : refs) {
    FlowSummary& f = shards[r.shard]->transport_->summaries_[r.pos];
    flow_index[r.shard][f.index] = static_cast<std::uint32_t>(t.summaries_.size());
    t.summaries_.push_back(std::move(f));
  }
  for (std::size_t i = 0; i < refs.size(); ++i) {
    FlowSummary& f = t.summaries_[i];
    const auto& map = flow_index[refs[i].shard];
    f.index = static_cast<std::uint32_t>(i);
    if (f.peer >= 0) {
      const std::uint32_t p = static_cast<std::size_t>(f.peer) < map.size() ? map[static_cast<std::size_t>(f.peer)] : UINT32_MAX;
      f.peer = p == UINT32_MAX ? -1 : static_cast<std::int64_t>(p);
    }
  }
  t.next_index_ = static_cast<std::uint32_t>(t.summaries_.size());
  for (Analyzer* a : shards) a->transport_->summaries_.clear();

  // ---- iWARP flows (two per connection): merged order = order of identification.
  IwarpAnalyzer& iw = *out.iwarp_;
  std::vector<std::vector<std::uint32_t>> iwarp_index(n);
  struct ConnRef {
    std::uint64_t key;
    std::size_t shard, pos;  // pos: index of the connection's first flow
  };
  std::vector<ConnRef> conns;
  ExactSum read_sum;
  for (std::size_t s = 0; s < n; ++s) {
    const IwarpAnalyzer& x = *shards[s]->iwarp_;
    iwarp_index[s].assign(x.flows_.size(), UINT32_MAX);
    for (std::size_t i = 0; i + 1 < x.flows_.size(); i += 2) conns.push_back({x.flow_order_keys_[i], s, i});
    const IwarpStats& a = x.stats_;
    IwarpStats& m = iw.stats_;
    if (a.reads_matched) {
      if (m.reads_matched == 0 || a.read_latency_min_us < m.read_latency_min_us) m.read_latency_min_us = a.read_latency_min_us;
      if (m.reads_matched == 0 || a.read_latency_max_us > m.read_latency_max_us) m.read_latency_max_us = a.read_latency_max_us;
    }
    read_sum.add(x.read_latency_sum_);
    m.connections += a.connections;
    m.negotiated += a.negotiated;
    m.rejected += a.rejected;
    m.untracked_connections += a.untracked_connections;
    m.fpdus += a.fpdus;
    m.frames += a.frames;
    add_counts(m.crc, a.crc);
    for (std::size_t i = 0; i < m.by_opcode.size(); ++i) {
      m.by_opcode[i] += a.by_opcode[i];
      m.bytes_by_opcode[i] += a.bytes_by_opcode[i];
    }
    m.markers += a.markers;
    m.resyncs += a.resyncs;
    m.reads_matched += a.reads_matched;
    m.atomics_matched += a.atomics_matched;
    m.tcp_holes_recovered += a.tcp_holes_recovered;
    m.tcp_holes_lost += a.tcp_holes_lost;
    m.tcp_bytes_lost += a.tcp_bytes_lost;
    m.tcp_retransmitted_segments += a.tcp_retransmitted_segments;
  }
  iw.read_latency_sum_ = read_sum;
  iw.stats_.read_latency_sum_us = read_sum.value();
  std::sort(conns.begin(), conns.end(), [](const ConnRef& a, const ConnRef& b) {
    return std::tie(a.key, a.shard, a.pos) < std::tie(b.key, b.shard, b.pos);
  });
  for (const ConnRef& c : conns)
    for (std::size_t d = 0; d < 2; ++d) {
      iwarp_index[c.shard][c.pos + d] = static_cast<std::uint32_t>(iw.flows_.size());
      iw.flows_.push_back(shards[c.shard]->iwarp_->flows_[c.pos + d]);
      iw.flow_order_keys_.push_back(c.key);
    }
  iw.finished_ = true;

  // ---- anomalies: in order of insertion; the cap keeps what one log would keep.
  AnomalyLog& log = out.anomalies_;
  struct AnomalyRef {
    std::uint64_t key;
    std::size_t shard, pos;
  };
  std::vector<AnomalyRef> items;
  std::uint64_t added = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const AnomalyLog& x = shards[s]->anomalies_;
    for (std::size_t k = 0; k < log.by_kind_.size(); ++k) log.by_kind_[k] += x.by_kind_[k];
    added += x.items_.size() + x.dropped_;
    for (std::size_t i = 0; i < x.items_.size(); ++i) items.push_back({x.order_keys_[i], s, i});
  }
  std::sort(items.begin(), items.end(), [](const AnomalyRef& a, const AnomalyRef& b) {
    return std::tie(a.key, a.shard, a.pos) < std::tie(b.key, b.shard, b.pos);
  });
  if (items.size() > log.cap_) items.resize(log.cap_);
  log.items_.reserve(items.size());
  for (const AnomalyRef& r : items) {
    Anomaly a = shards[r.shard]->anomalies_.items_[r.pos];
    if (a.flow != UINT32_MAX) {
      const auto& map = is_iwarp_kind(a.kind) ? iwarp_index[r.shard] : flow_index[r.shard];
      a.flow = a.flow < map.size() ? map[a.flow] : UINT32_MAX;
    }
    log.items_.push_back(a);
  }
  log.dropped_ = added - log.items_.size();
}

}  // namespace rdmadiag::decode
