// What the exporters need beyond the analysis summaries, gathered from the
// per-frame results as they come: live per-flow counters (for the metrics
// endpoint while a capture runs), a wire-latency histogram per flow, and a
// decimated PSN timeline per flow with its events (for the HTML plots). All of
// it is bounded: at most kMaxFlows flows are kept in detail (the rest count in
// the totals only), each timeline holds at most kMaxPoints points (halved by
// keeping every other one when full) and kMaxEvents events.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "decode/analyzer.h"
#include "decode/exact_sum.h"
#include "exporters/json_report.h"

namespace rdmadiag::exporters {

// Upper bounds of the wire-latency histogram buckets, in microseconds (+Inf after).
inline constexpr std::array<double, 16> kLatencyBucketsUs = {1,    2,    5,     10,    20,    50,    100,    200,
                                                              500,  1000, 2000,  5000,  10000, 20000, 50000, 100000};

struct LatencyHistogram {
  std::array<std::uint64_t, kLatencyBucketsUs.size() + 1> counts{};  // per bucket, not cumulative; last is +Inf
  std::uint64_t count = 0;
  double sum_us = 0;             // exact_sum_us rounded: the same whatever the order of the samples
  decode::ExactSum exact_sum_us;
  void add(double us);
  void add(const LatencyHistogram& o);
};

// Counters the metrics expose; one set per flow and one for the whole run.
struct FlowCounters {
  std::uint64_t packets = 0, bytes = 0;
  std::uint64_t psn_gaps = 0, psn_missing = 0, duplicates = 0, out_of_order = 0, retransmissions = 0;
  std::uint64_t icrc_bad = 0, ecn_ce = 0, cnp = 0;
  std::uint64_t acks = 0, rnr_naks = 0;
  std::array<std::uint64_t, 5> naks{};  // by NAK code: psn_seq_error, invalid_request, remote_access, remote_op, invalid_rd_request
  LatencyHistogram latency;             // request -> response, for responses carried by this flow
  void add(const decode::DecodedPacket& p, const decode::PacketAnalysis& a);
  void add(const FlowCounters& o);
};

std::string_view nak_code_name(std::size_t code);

struct TimelinePoint {
  double t;            // seconds since the first frame
  std::uint32_t psn;
  std::uint64_t frame;
};
struct TimelineEvent {
  double t;
  std::uint32_t psn;
  std::uint64_t frame;
  std::string_view kind;  // gap, retransmission, duplicate, out_of_order, nak, rnr_nak, icrc_bad, ecn_ce, cnp
  std::uint32_t count;    // gap: PSNs missing
};

struct FlowDetail {
  std::uint32_t flow = 0;  // the analysis' flow index
  std::uint64_t first_frame = 0;
  std::string src, dst;
  std::uint32_t dest_qp = 0;
  std::string transport;
  FlowCounters counters;
  std::vector<TimelinePoint> points;
  std::uint32_t stride = 1;  // keep one point in `stride`
  std::uint64_t seen = 0;    // points offered
  std::vector<TimelineEvent> events;
  std::uint64_t events_dropped = 0;
};

class FlowTally {
 public:
  static constexpr std::size_t kMaxFlows = 1024;
  static constexpr std::size_t kMaxPoints = 2000;
  static constexpr std::size_t kMaxEvents = 500;

  void add(const decode::DecodedPacket& p, const decode::PacketAnalysis& a, std::uint64_t frame, double ts);
  // The time the timeline counts from (otherwise the first frame added's).
  void set_origin(double ts) { first_ts_ = ts; }
  // The tallies of the shards of a sharded analysis (analyzer_merge.h), each fed
  // its frames after set_origin(the input's first time), into what one tally fed
  // every frame holds. flow_index[s]: shard s's flow indices -> merged ones.
  // Gaps narrowed or withdrawn after their frame was tallied (late PSNs:
  // decode::AnomalyLog::revisions), applied once at the end.
  void revise(const std::vector<decode::GapRevision>& revisions);
  // Packets first tallied as corrupt whose direction's ICRCs proved not the
  // wire's (decode::AnomalyLog::replay_revisions): their verdicts now.
  void revise(const std::vector<decode::ReplayRevision>& replays);
  static FlowTally merge(const std::vector<const FlowTally*>& shards,
                         const std::vector<std::vector<std::uint32_t>>& flow_index, double origin);

  const FlowCounters& totals() const { return totals_; }
  // Flows in order of first appearance (at most kMaxFlows).
  const std::vector<FlowDetail>& flows() const { return details_; }
  std::uint64_t flows_not_detailed() const { return untracked_flows_; }
  // The counters of the flows beyond kMaxFlows, summed.
  const FlowCounters& not_detailed() const { return untracked_; }

  // The `timeline` and `latency_histograms` members of the analyze report.
  Json timeline_json() const;
  Json latency_histograms_json() const;

 private:
  FlowCounters totals_;
  std::vector<FlowDetail> details_;
  std::vector<std::int32_t> slot_of_flow_;  // flow index -> details_ slot (-1: not detailed)
  std::uint64_t untracked_flows_ = 0;
  FlowCounters untracked_;
  void replace_events(FlowDetail& d, const decode::ReplayRevision& r) const;
  double first_ts_ = std::numeric_limits<double>::quiet_NaN();  // not set yet: any time sets it, even before 1970
};

Json latency_histogram_json(const LatencyHistogram& h);

}  // namespace rdmadiag::exporters
