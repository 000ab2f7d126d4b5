#include "decode/analyzer_merge.h"

#include <algorithm>

#include "decode/transport_analysis.h"

namespace rdmadiag::decode {

void AnalyzerMerge::finish_shards(std::span<Analyzer* const> shards) {
  std::uint64_t last = 0;
  double last_ts = 0;
  std::int64_t last_ts_ns = 0;
  for (const Analyzer* a : shards)
    if (a->iwarp_->last_frame() > last) {
      last = a->iwarp_->last_frame();
      last_ts = a->iwarp_->last_ts();
      last_ts_ns = a->iwarp_->last_ts_ns();
    }
  for (Analyzer* a : shards) {
    a->iwarp_->set_end(last, last_ts, last_ts_ns);
    a->finish();
  }
}

bool AnalyzerMerge::cm_split(std::span<Analyzer* const> shards) {
  std::vector<std::pair<std::uint32_t, std::size_t>> reqs;  // (comm id, shard)
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const TransportAnalyzer& t = *shards[s]->transport_;
    if (t.cm_ids_overflow()) return true;  // cannot tell: say so
    for (std::uint32_t id : t.cm_req_ids()) reqs.emplace_back(id, s);
  }
  std::sort(reqs.begin(), reqs.end());
  for (std::size_t s = 0; s < shards.size(); ++s)
    for (std::uint32_t id : shards[s]->transport_->cm_unmatched_reps()) {
      auto it = std::lower_bound(reqs.begin(), reqs.end(), std::pair<std::uint32_t, std::size_t>{id, 0});
      for (; it != reqs.end() && it->first == id; ++it)
        if (it->second != s) return true;
    }
  return false;
}

bool AnalyzerMerge::corrupt_address_split(std::span<Analyzer* const> shards) {
  if (shards.size() < 2) return false;
  for (const Analyzer* a : shards)
    if (a->transport_->unplaced_alone_on_pair()) return true;
  return false;
}

bool AnalyzerMerge::pause_split(std::span<Analyzer* const> shards) {
  if (shards.empty()) return false;
  const PfcAnalyzer& first = *shards.front()->pfc_;
  for (const Analyzer* a : shards) {
    const PfcAnalyzer& x = *a->pfc_;
    if (x.mac_control_frames() != first.mac_control_frames() || x.senders().size() != first.senders().size()) return true;
  }
  return false;
}

// Conservative: the sum of the shards' peaks bounds what one analyzer would
// have held at once; while it stays under a bound, one analyzer never reached it.
bool AnalyzerMerge::bounds_reached(std::span<Analyzer* const> shards) {
  std::size_t live = 0, flows = 0, conns = 0, buffered = 0, qps = 0, budget = 0, cm_reqs = 0, cc_live = 0, cc_results = 0, stall_qps = 0;
  for (const Analyzer* a : shards) {
    const TransportAnalyzer::Bounds t = a->transport_->bounds();
    const IwarpAnalyzer::Bounds w = a->iwarp_->bounds();
    if (t.cap_reached || w.cap_reached || a->summary_.queue_pairs_capped()) return true;
    if (a->cc_->cap_reached() || a->pfc_->stalls().cap_reached()) return true;
    cc_live += a->cc_->peak();
    stall_qps += a->pfc_->stalls().peak();
    cc_results += a->cc_->flows().size();
    live += t.peak_live;
    flows += t.flows;
    conns += w.peak_live;
    buffered += w.peak_buffered;
    budget = w.buffer_limit;
    qps += a->summary_.queue_pairs();
    cm_reqs += a->transport_->cm_req_ids().size();  // every REQ seen: at least those pending at once
  }
  constexpr std::size_t kLargestSegment = 65536;
  return live >= TransportAnalyzer::kMaxLiveFlows || flows > TransportAnalyzer::kMaxRetiredFlows ||
         conns >= IwarpAnalyzer::kMaxConnections || buffered + kLargestSegment > budget ||
         qps >= CaptureSummary::kMaxTrackedQps || cm_reqs > 65536 || cc_live >= CongestionAnalyzer::kMaxLiveFlows ||
         cc_results > CongestionAnalyzer::kMaxResults || stall_qps >= PauseStalls::kMaxQueuePairs;  // TransportAnalyzer clears pending REQs past that
}

void AnalyzerMerge::merge(std::span<Analyzer* const> shards, Analyzer& out,
                          std::vector<std::vector<std::uint32_t>>& flow_index) {

  // ---- capture summary: each shard's counts added.
  for (const Analyzer* a : shards) out.summary_.merge(a->summary_);

  // ---- IB/RoCE flows: merged index = creation order = (creating frame, order within its shard).
  std::vector<TransportAnalyzer*> transports;
  for (Analyzer* a : shards) transports.push_back(a->transport_.get());
  out.transport_->merge(transports, flow_index);

  // ---- iWARP flows (two per connection): merged order = order of identification.
  std::vector<const IwarpAnalyzer*> iwarps;
  for (const Analyzer* a : shards) iwarps.push_back(a->iwarp_.get());
  std::vector<std::vector<std::uint32_t>> iwarp_index;
  out.iwarp_->merge(iwarps, iwarp_index);

  // ---- pause analysis: every shard saw every MAC Control frame (ShardPass).
  std::vector<const PfcAnalyzer*> pfcs;
  for (const Analyzer* a : shards) pfcs.push_back(a->pfc_.get());
  out.pfc_->merge(pfcs);

  // ---- congestion analysis: each flow lives in one shard (its CNPs travel between the same addresses).
  std::vector<const CongestionAnalyzer*> ccs;
  for (const Analyzer* a : shards) ccs.push_back(a->cc_.get());
  out.cc_->merge(ccs, flow_index);

  // ---- anomalies: in order of insertion; the cap keeps what one log would keep.
  std::vector<const AnomalyLog*> logs;
  for (const Analyzer* a : shards) logs.push_back(&a->anomalies_);
  out.anomalies_.merge(logs, [&](std::size_t shard, const Anomaly& a) {
    const auto& map = is_iwarp_kind(a.kind) ? iwarp_index[shard] : flow_index[shard];
    return a.flow < map.size() ? map[a.flow] : UINT32_MAX;
  });
}

}  // namespace rdmadiag::decode
