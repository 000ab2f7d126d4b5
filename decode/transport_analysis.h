// IB / RoCE transport analysis: the stateful pass over decode results that
// Wireshark's InfiniBand dissector lacks. Rules from IBA Vol 1 ch. 9.7
// (reliable service: PSN sequencing, ACK/NAK generation and go-back-N
// retransmission, RDMA READ PSN reservation) and 9.8 (unreliable services),
// plus RoCEv2 congestion signals (Annex A17.9: ECN and CNP).
//
// A flow is one direction of traffic to one destination QP: (source address,
// destination address, destination QP) for RoCE, (SLID, DLID, destination QP)
// for native IB, plus the source QP for UD. Requests on a flow use the
// requester's PSN space; responses and ACKs travel on the reverse flow in that
// same space. Memory is bounded by the live flows (idle ones are retired into
// summaries, and those are capped too), never by the number of packets.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "decode/analyzer.h"
#include "decode/flow_ring.h"
#include "decode/flow_table.h"

namespace rdmadiag::decode {

// Latency samples of one kind of operation: exact min/max/count, and a bounded
// deterministic reservoir for the percentiles.
class LatencyStats {
 public:
  static constexpr std::size_t kReservoir = 8192;
  void add(double us);
  std::uint64_t count() const { return count_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0; }
  double percentile(double p) const;  // p in [0, 100]; exact while count <= kReservoir

 private:
  std::vector<float> samples_;
  std::uint64_t count_ = 0;
  double min_ = 0, max_ = 0, sum_ = 0;
  std::uint64_t rng_ = 0x9E3779B97F4A7C15ULL;
  mutable bool sorted_ = true;
  mutable std::vector<float> sorted_copy_;
};

enum class OpClass : std::uint8_t { write, read, send, atomic, count_ };
std::string_view to_string(OpClass c);

enum class Pairing : std::uint8_t { none, cm, inferred_psn, inferred_only_flow };
std::string_view to_string(Pairing p);

struct FlowKey {
  Transport transport = Transport::other;
  std::uint8_t addr_len = 0;  // 2 (LID), 4 (IPv4), 16 (IPv6 / GID)
  std::array<std::uint8_t, 16> src{};
  std::array<std::uint8_t, 16> dst{};
  std::uint32_t dest_qp = 0;
  std::uint32_t src_qp = 0;  // UD only (from the DETH); 0 otherwise
  bool operator==(const FlowKey&) const = default;
};
struct FlowKeyHash {
  std::size_t operator()(const FlowKey& k) const;
};

// Counters and results of one flow, as reported.
struct FlowSummary {
  FlowKey key;
  TransportService service = TransportService::reserved;
  std::uint32_t index = 0;
  std::int64_t peer = -1;            // index of the reverse flow, when paired
  std::uint32_t peer_qp = 0;         // the QP at the source side (the reverse flow's destination QP)
  Pairing pairing = Pairing::none;
  std::uint64_t packets = 0, bytes = 0, payload_bytes = 0;
  std::uint64_t requests = 0, responses = 0;
  std::uint64_t first_frame = 0, last_frame = 0;
  double first_ts = 0, last_ts = 0;
  // PSN sequencing
  std::uint64_t gaps = 0, missing = 0, gaps_recovered = 0;
  std::uint64_t duplicates = 0, out_of_order = 0;
  std::uint64_t retransmissions = 0;           // packets resent
  std::uint64_t retransmission_episodes = 0;   // go-back-N bursts
  std::uint64_t timeout_retransmissions = 0;   // episodes with no NAK before them, resending lost packets
  // Resends of packets whose original passed the capture point, with no NAK and no
  // gap before them: the requester's ACK timer fired before the ACK came back (a
  // slow responder). Counted and flagged per packet, but not an anomaly: nothing was lost.
  std::uint64_t spurious_retransmissions = 0;
  // responses sent on this flow
  std::array<std::uint64_t, 5> naks{};         // by NakCode
  std::uint64_t rnr_naks = 0;
  std::uint64_t acks = 0;
  // other checks
  std::uint64_t bad_opcode_sequence = 0, length_mismatches = 0, pkey_changes = 0, icrc_bad = 0;
  // congestion
  std::uint64_t ecn_ect = 0, ecn_ce = 0, cnp = 0, fecn = 0, becn = 0;
  std::uint32_t pmtu = 0;            // inferred (largest FIRST/MIDDLE payload) or from CM
  bool pmtu_from_cm = false;
  std::array<LatencyStats, static_cast<std::size_t>(OpClass::count_)> latency{};  // requests on this flow
  LatencyStats recovery;             // gap seen -> gap filled, microseconds
  std::uint64_t problems() const {
    std::uint64_t n = gaps + duplicates + out_of_order + retransmission_episodes + rnr_naks + bad_opcode_sequence +
                      length_mismatches + pkey_changes + icrc_bad;
    for (auto c : naks) n += c;
    return n;
  }
};

class TransportAnalyzer {
 public:
  static constexpr std::size_t kMaxLiveFlows = 1 << 16;
  static constexpr std::size_t kMaxRetiredFlows = 1 << 17;
  static constexpr double kIdleRetireSeconds = 120.0;

  explicit TransportAnalyzer(AnomalyLog& log);
  ~TransportAnalyzer();

  void add(const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out);
  // Retires the flows idle for kIdleRetireSeconds at time `now` (the Analyzer
  // calls it every kSweepFrames frames, counted over the whole input, so that a
  // sharded analysis sweeps at the same points as one thread).
  void sweep(double now) { retire_idle(now); }
  void finish();

  // Every flow seen (live and retired), in creation order, after finish().
  const std::vector<FlowSummary>& flows() const { return summaries_; }
  std::uint64_t evicted_flows() const { return evicted_; }
  std::uint32_t global_pmtu() const { return global_pmtu_; }
  // A path MTU the user knows (256..4096): used for every flow instead of the
  // inferred one (READ PSN reservations, FIRST/MIDDLE payload checks). 0: infer.
  void set_pmtu_override(std::uint32_t pmtu) { pmtu_override_ = pmtu; }
  // A shard of a sharded analysis: keep what AnalyzerMerge::cm_split checks.
  void track_cm_ids() { track_cm_ids_ = true; }

  // Forward links found so far: request frame -> (response frame, latency µs).
  // Filled only when enabled (the two-pass --packets output uses it).
  void enable_forward_links(bool on) { forward_links_on_ = on; }
  struct ForwardLink {
    std::uint64_t response_frame;
    double latency_us;
  };
  const std::unordered_map<std::uint64_t, ForwardLink>& forward_links() const { return forward_; }

  struct Flow;  // state (transport_analysis.cpp)

 private:
  Flow& flow_for(const DecodedPacket& p, std::uint64_t frame, double ts, bool& created);
  Flow& create_flow(const FlowKey& k, TransportService service, std::uint64_t frame, double ts);
  void requester(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out);
  void responder(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out);
  void unreliable(Flow& f, const DecodedPacket& p, std::uint64_t frame, double ts, PacketAnalysis& out);
  void cm_message(const DecodedPacket& p, std::uint64_t frame);
  void note_cm_id(std::vector<std::uint32_t>& ids, std::uint32_t id);
  void spurious_verdict(Flow& f, bool conclusive = true);
  void record_gap(Flow& f, std::uint64_t frame, double ts, std::uint32_t psn, std::uint32_t first, std::uint32_t count,
                  PacketAnalysis& out, bool track);
  Flow* peer_requester(Flow& resp, std::uint32_t psn);
  void pair(Flow& a, Flow& b, Pairing how);
  std::uint32_t pmtu_for(const Flow& f) const;
  void learn_pmtu(Flow& f, std::uint32_t payload);
  void note_path_pmtu(const Flow& f, std::uint32_t pmtu);
  void add_anomaly(Anomaly a, Flow* f, PacketAnalysis* out);
  void retire_idle(double now);
  void retire(std::uint32_t slot);
  void link_forward(std::uint64_t request_frame, std::uint64_t response_frame, double latency_us);

  AnomalyLog& log_;
  std::vector<std::unique_ptr<Flow>> slots_;  // live flows (nullptr: free slot)
  std::vector<std::uint32_t> free_slots_;
  using FlowIndex = FlowTable<FlowKey, FlowKeyHash>;
  FlowIndex by_key_;
  // Live reliable-service candidates per (transport, source, destination), so that
  // pairing a response with its requester looks only at flows between those two ends.
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> by_host_pair_;
  std::vector<FlowSummary> summaries_;        // retired (and, after finish, all)
  std::uint64_t evicted_ = 0;
  bool live_cap_reached_ = false;  // kMaxLiveFlows made room by retiring active flows
  std::size_t peak_live_ = 0;      // most flows live at once (AnalyzerMerge::bounds_reached)
  std::uint32_t next_index_ = 0;
  std::uint32_t global_pmtu_ = 0;  // the largest PMTU learned on any flow (reported only)
  std::uint32_t pmtu_override_ = 0;
  // Per path (the unordered pair of endpoint addresses): the live flows on it and
  // the largest PMTU learned on any of them, the fallback for a flow that has
  // learned none. A path MTU is a property of the path; keeping it per path also
  // keeps every flow's analysis within its own address pair (analyze -j).
  struct PathState {
    std::uint32_t flows = 0;
    std::uint32_t pmtu = 0;
  };
  std::unordered_map<std::uint64_t, PathState> paths_;
  // Pending CM pairing: REQ (local comm id) -> requester side (address, QPN, PSN, MTU).
  struct CmSide {
    FlowKey from;  // addresses of the REQ sender (src) and receiver (dst)
    std::uint32_t qpn = 0, psn = 0;
    std::uint8_t mtu_code = 0;
  };
  std::unordered_map<std::uint32_t, CmSide> cm_reqs_;
  // Sharded analysis only (AnalyzerMerge::cm_split): the CM REQs seen and the
  // REPs that found no REQ, to tell when a REP answered a REQ sent between
  // other addresses (so in another shard). Bounded; past the bound the merge
  // cannot tell.
  bool track_cm_ids_ = false;
  bool cm_ids_overflow_ = false;
  std::vector<std::uint32_t> cm_req_ids_, cm_unmatched_reps_;
  // Latest CE-marked packet per (src,dst) address pair, for CNP timing.
  std::unordered_map<std::uint64_t, double> last_ce_;
  bool forward_links_on_ = false;
  std::unordered_map<std::uint64_t, ForwardLink> forward_;
  friend class AnalyzerMerge;
};

}  // namespace rdmadiag::decode
