// Congestion analysis of RoCEv2 (IBA Vol 1 Annex A17.9: a switch marks an
// ECN-capable packet Congestion Experienced (CE, IP ECN = 3, RFC 3168), the
// receiver answers with a Congestion Notification Packet (CNP, BTH opcode
// 0x81) to the sender's QP, and the sender lowers its rate): a stateful pass
// over the RoCE packets of a capture that shows each step as the capture point
// saw it, per data flow (a direction to one destination QP, keyed as the
// transport analysis keys its flows):
//   - CE marks on the flow, and the CNPs that came back for it;
//   - CNP response time: from the first CE-marked packet not yet answered to
//     the CNP (a CNP answers every mark before it; a CNP with no mark before
//     it was marked after the capture point, or the mark was not captured);
//   - the rate reaction: the sender's inter-packet gaps on the flow after a
//     CNP against those before it. A CNP opens an episode (later CNPs join it)
//     that is judged after kWindow further gaps: the sender slowed when the
//     median gap after is at least `rate_cut` times the median before, else it
//     kept its rate (a `cc_no_reaction` anomaly at the CNP). Medians, so that
//     one idle pause between messages does not decide.
//
// Which data flow a CNP is for: the CNP travels from the flow's destination
// address to its source, to the sender's QP (its BTH destination QP); the
// marked packets name the receiver's QP. The CNP goes to the flow on the
// reversed address pair that has already been matched to that sender QP, else
// to the one (not yet matched) whose unanswered mark came first (the receiver
// answers marks in order), else (no mark waiting) to the pair's only flow not
// yet matched; with several and no mark it is counted unmatched. Only a CNP
// that answers a mark binds a flow to its QP: one with no mark waiting (a
// stray, e.g. for a QP whose data took another path) leaves the flow open to
// the CNP that answers its next mark. Each step is
// O(1) per CNP, whatever the number of QPs between the two ends: an index of
// matched sender QPs, and per address pair a queue of first marks.
//
// Memory: a bounded table of live flows (decode/flow_slots.h, kMaxLiveFlows;
// the least recently active are retired past it, counted, idle ones after
// kIdleRetireNs); each holds two windows of gaps, never anything per packet.
// Retired flows leave their results, up to kMaxResults (then only totals).
// Only flows that send ECN-capable packets or receive CNPs get state.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "decode/anomaly.h"
#include "decode/flow_slots.h"
#include "decode/flow_summary.h"
#include "decode/packet.h"

namespace rdmadiag::decode {

struct CcOptions {
  // A sender slowed when its median gap after a CNP is at least this many times
  // the median before: 1.25 is a 20% rate cut (DCQCN's first cut halves the
  // rate, a gap of 2x). A round number chosen here, not a value from a standard.
  double rate_cut = 1.25;
};

inline constexpr std::size_t kCcWindow = 16;        // gaps compared before and after a CNP
inline constexpr std::size_t kCcMinBaseline = 4;    // fewer gaps before a CNP: the episode is not judged

// Results of one data flow.
struct CcFlowResult {
  FlowKey key;
  std::uint32_t flow = UINT32_MAX;   // the transport analysis' flow index
  std::uint64_t first_frame = 0;
  std::uint64_t packets = 0;         // packets on the flow while tracked (not CNPs)
  std::uint64_t ce_marked = 0;
  std::uint64_t cnps = 0;            // CNPs matched to the flow
  std::uint64_t cnps_without_mark = 0;  // of which no CE mark was waiting
  std::uint64_t marks_answered = 0;  // CE marks a CNP followed
  std::uint32_t sender_qp = 0;       // the sender's QP, as the CNPs name it
  bool sender_qp_known = false;
  // CNP response times (first unanswered mark -> CNP), ns.
  std::uint64_t responses = 0;
  std::int64_t response_sum_ns = 0, response_min_ns = 0, response_max_ns = 0;
  // Rate reaction episodes.
  std::uint64_t episodes = 0, slowed = 0, kept_rate = 0, unjudged = 0;
  std::int64_t reaction_sum_ns = 0, reaction_max_ns = 0;  // CNP -> first slowed gap, over the slowed episodes
  std::uint64_t first_kept_rate_frame = 0;  // the CNP of the first episode that kept its rate
};

// What a flow keeps only once it has had a CE mark or a CNP: its results and
// the episode's state. Most flows of a many-QP capture have neither.
struct CcFlowMarks {
  CcFlowResult r;                    // key, flow, first_frame and packets are set at retirement
  std::uint64_t mark_frame = 0;
  std::uint64_t marks_waiting = 0;   // CE marks since the last CNP
  // A CNP that answered one of the flow's marks bound it to its sender QP (r.sender_qp);
  // until then r.sender_qp, if known, is what a CNP with no mark waiting named.
  bool qp_bound = false;
  // The open episode.
  std::uint64_t episode_frame = 0;
  std::int64_t episode_ns = 0;
  std::int64_t baseline_ns = 0;      // median gap before its CNP
  std::int64_t reaction_ns = -1;     // CNP -> first gap >= rate_cut x baseline
  std::uint32_t after_count = 0;
  std::array<std::int64_t, kCcWindow> after;   // the first after_count written
};

// The live state of one data flow. What every packet reads or writes comes
// first (with the key in front of it in its cell, decode/flow_slots.h), then
// the gap ring; the CcFlowMarks part (~400 bytes) is allocated at the flow's
// first CE mark or CNP, outside the cell: a new flow writes one cache line,
// and a cell is 4 lines, not the 10 it was with the part inside (16K
// connections: peak RSS 96 -> 81 MB, docs/performance.md session 22).
struct CcFlowState {
  // User-provided, so that building a state does not zero `before`: it is read
  // only where written.
  CcFlowState() {}
  std::int64_t last_ns = 0;          // the flow's last packet (0: none yet)
  std::uint64_t last_frame = 0;
  std::uint64_t packets = 0;         // packets on the flow (not CNPs)
  std::int64_t mark_ns = -1;         // the first CE mark not yet answered by a CNP
  std::uint64_t first_frame = 0;
  std::uint32_t flow = UINT32_MAX;   // the transport analysis' flow index
  std::uint8_t before_count = 0, before_pos = 0;
  bool episode = false;              // an episode is open (after a CNP): marks() is built
  std::array<std::int64_t, kCcWindow> before;  // ring of the latest gaps: the first before_count written

  bool has_marks() const { return marks_ != nullptr; }
  // Built on first use.
  CcFlowMarks& marks() {
    if (!marks_) marks_ = std::make_unique<CcFlowMarks>();
    return *marks_;
  }
  // Only when has_marks().
  const CcFlowMarks& marks() const { return *marks_; }
  // The flow's results so far (`key` left to the caller).
  CcFlowResult result() const;

 private:
  CopyingPtr<CcFlowMarks> marks_;
};

// What one packet of a data flow does to it.
struct CcPacket {
  std::uint64_t frame = 0;
  std::int64_t ts_ns = 0;
  bool cnp = false;                  // a CNP for the flow (else a packet on it)
  bool ce = false;                   // a packet on it marked CE
};

enum class CcVerdict : std::uint8_t { none, slowed, kept_rate, unjudged };

struct CcDecision {
  std::int64_t gap_ns = -1;          // a packet on the flow: the gap since the previous one
  bool opens_episode = false;        // a CNP that starts an episode
  bool joins_episode = false;        // a CNP inside an open episode
  bool mark_waiting = false;         // a CNP: a CE mark waited for it (it answers the marks)
  std::int64_t response_ns = -1;     // a CNP: time since that mark; -1: none waiting, or the clock stepped back
  bool slowed_gap = false;           // a gap inside an episode at the slower rate (rate_cut x the baseline)
  CcVerdict verdict = CcVerdict::none;  // the episode this packet closes
};

// The IP ECN field (RFC 3168: 0 not ECN-capable, 3 CE), or RoCEv1's GRH traffic class' low bits.
int ecn_codepoint(const DecodedPacket& p);

CcDecision classify(const CcFlowState& s, const CcPacket& p, const CcOptions& opts);
void apply(CcFlowState& s, const CcDecision& d, const CcPacket& p);

// Totals over every flow (summed over the shards of analyze -j).
struct CcTotals {
  std::uint64_t ect_packets = 0, ce_marked = 0, cnps = 0, cnps_unmatched = 0;
  std::uint64_t flows_untracked = 0;  // results past kMaxResults: in the totals only
  std::uint64_t retired_at_cap = 0;   // flows retired while active, kMaxLiveFlows being live
  std::uint64_t kept_rate_flows = 0;  // flows with an episode that kept its rate
  std::uint64_t responses = 0;        // CNPs with a response time, and their sum (live, for metrics)
  std::int64_t response_sum_ns = 0;
  void merge(const CcTotals& o);
};

class CongestionAnalyzer {
 public:
  // As many live flows as the transport analysis keeps (each data flow here is
  // one there): with fewer, 16K QPs (32K flows, all ECN-capable) made this
  // analysis retire and start again the least recent eighth in turn, ~75,000
  // records for 32,768 flows, each losing its gap history.
  static constexpr std::size_t kMaxLiveFlows = 1 << 16;
  static constexpr std::size_t kMaxResults = 1 << 14;
  static constexpr std::int64_t kIdleRetireNs = 120'000'000'000;

  explicit CongestionAnalyzer(AnomalyLog& log) : log_(log) {}
  void set_options(const CcOptions& o) { opts_ = o; }
  const CcOptions& options() const { return opts_; }

  // A RoCE packet (has_bth) the transport analysis put on flow `flow`.
  // Returns the frame's findings in `out_*` (for --packets and the plugin).
  struct FrameFindings {
    std::int64_t cnp_response_ns = -1;   // a CNP: time since the mark it answers
    std::uint64_t cnp_mark_frame = 0;
    CcVerdict verdict = CcVerdict::none; // an episode judged at this frame
    std::uint64_t episode_cnp_frame = 0;
  };
  // `keyed`: the transport analysis' key of the packet and its hash, used when
  // it is this analysis' key too (not UD), else made here; then `slot_hint`
  // (if given) is a word that flow keeps for this analysis: the slot found
  // last time, checked before the index is searched (its line is in cache).
  FrameFindings add(const DecodedPacket& p, std::uint64_t frame, std::int64_t ts_ns, std::uint32_t flow,
                    const FlowKey* keyed = nullptr, std::uint64_t keyed_hash = 0, std::uint32_t* slot_hint = nullptr);
  void sweep(std::int64_t now_ns);
  void finish();
  // The state add() will read for the flow that remembers `slot` (its slot
  // hint), loaded ahead while the transport analysis works on the packet.
  void prefetch(std::uint32_t slot) const { flows_.prefetch(slot); }
  // The index line a look-up of a flow with `hash` starts at (a flow the
  // transport analysis is about to make: no slot hint to load).
  void prefetch_index(std::uint64_t hash) const { flows_.prefetch_index(hash); }

  // Flows with results, in order of their first frame (after finish()).
  const std::vector<CcFlowResult>& flows() const { return results_; }
  const CcTotals& totals() const { return totals_; }
  bool any() const { return totals_.ect_packets || totals_.cnps; }
  bool cap_reached() const { return flows_.cap_reached() || totals_.flows_untracked; }
  std::size_t peak() const { return flows_.peak(); }
  // Index look-ups and queued marks looked at to match CNPs to flows (the CTest
  // pairing_index_o1 checks they do not grow with the QPs between two ends).
  std::uint64_t cnp_match_probes() const { return cnp_probes_; }

  // analyze -j: the shards' results (each flow lives in one shard: a CNP
  // travels between the same two addresses as its marks), flows renumbered.
  void merge(std::span<const CongestionAnalyzer* const> shards,
             const std::vector<std::vector<std::uint32_t>>& flow_index);

 private:
  std::uint32_t flow_for_cnp(const DecodedPacket& p, const FlowKey& reversed, bool& by_mark);
  std::uint32_t create(const FlowKey& k, std::uint64_t hash, std::uint64_t frame, std::uint32_t flow);
  void step(std::uint32_t slot, CcFlowState& s, const CcPacket& p, FrameFindings& f);
  void keep_result(std::uint32_t slot, CcFlowState& s);
  void retire(std::uint32_t slot, CcFlowState& s);

  AnomalyLog& log_;
  CcOptions opts_;
  FlowSlots<FlowKey, FlowKeyHash, CcFlowState> flows_{kMaxLiveFlows};
  // Per directed address pair (a data flow's key with dest_qp 0), for CNP
  // matching: its live flows, those no CNP has matched yet (their count, and
  // the XOR of their slots, which is the slot itself when there is one), and
  // those flows' first unanswered marks in the order they came. A queue entry
  // goes stale when its flow is matched or retired, and is dropped when it
  // reaches the front (or when stale entries outnumber the live flows).
  struct FirstMark {
    std::uint32_t slot;
    std::uint64_t flow_first_frame;  // the flow's identity (a slot is reused)
  };
  struct PairFlows {
    std::size_t live = 0;
    std::size_t unmatched = 0;
    std::uint32_t unmatched_xor = 0;
    std::vector<FirstMark> marks;
    std::size_t marks_head = 0;
  };
  bool waiting_mark(const FirstMark& m);
  void queue_first_mark(std::uint32_t slot, const CcFlowState& s);
  std::uint32_t first_marked(PairFlows& pf);
  void matched(std::uint32_t slot, CcFlowState& s, std::uint32_t sender_qp, bool bind);
  std::unordered_map<FlowKey, PairFlows, FlowKeyHash> by_pair_;
  // Matched flows by their pair and sender QP (the key with dest_qp = the sender's QP).
  FlowTable<FlowKey, FlowKeyHash> by_sender_;
  std::vector<CcFlowResult> results_;
  CcTotals totals_;
  std::uint64_t cnp_probes_ = 0;
  // No live flow's last_ns is below this (as TransportAnalyzer's
  // live_ts_floor_): a sweep within kIdleRetireNs of it skips the walk.
  std::int64_t live_ns_floor_ = INT64_MAX;
  bool finished_ = false;
};

}  // namespace rdmadiag::decode
