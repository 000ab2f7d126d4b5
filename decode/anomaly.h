// Anomalies: what a stateful analysis pass (PSN tracking, iWARP stream checks)
// found wrong, tied to frames. Counted by kind always; kept individually up to
// a cap, so memory stays bounded on a pathological capture.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "decode/diagnostics.h"

namespace rdmadiag::decode {

enum class AnomalyKind : std::uint8_t {
  // IB / RoCE transport (IBA Vol 1 ch. 9.7)
  psn_gap,               // requester PSNs skipped: packets lost before the capture point
  psn_duplicate,         // a PSN seen again (a duplicate or a retransmission not explained by a NAK/timeout)
  psn_out_of_order,      // an older PSN arriving after newer ones, not a retransmission
  nak_psn_seq_error,
  nak_invalid_request,
  nak_remote_access,
  nak_remote_op,
  nak_invalid_rd_request,
  rnr_nak,
  retransmission,        // go-back-N resend after a NAK or a transport timeout
  icrc_bad,
  vcrc_bad,
  bad_opcode_sequence,   // e.g. MIDDLE without FIRST, FIRST before LAST
  payload_length_mismatch,  // first/middle packet not PMTU-sized, RETH length vs bytes delivered
  pkey_change,
  response_without_request,
  // iWARP (RFC 5040/5041/5044)
  tcp_hole,
  mpa_crc_bad,
  mpa_bad_framing,
  ddp_msn_gap,
  ddp_mo_discontinuity,
  rdmap_terminate,
  iwarp_resync,          // FPDU boundaries found without the MPA negotiation (a note)
  ddp_to_discontinuity,  // tagged: an RDMA Write's / Read Response's tagged offset or STag not where it should be
  rdmap_read_size_mismatch,       // an RDMA Read Response message not the size its Read Request asked for
  rdmap_read_response_unmatched,  // an RDMA Read Response with no Read Request outstanding
  mpa_marker_stride,     // markers not every 512 octets (RFC 5044 section 4.3): once per direction
  // Lossless Ethernet (IEEE 802.1Qbb, 802.3 Annex 31B/31D; pfc_analysis.h)
  pause_storm,           // a priority paused continuously for longer than the storm threshold
  // RoCEv2 congestion control (IBA Annex A17.9; congestion_analysis.h)
  cc_no_reaction,        // a sender kept its rate after a CNP (frame: the CNP)
  // Capture point (icrc_origin.h): one direction's ICRCs are bad in the capture
  // but its receiver took the packets: not the wire's (count: such packets)
  icrc_not_wire,
  count_
};

std::string_view to_string(AnomalyKind k);
// iWARP kinds index the iWARP analysis' flows; the others the IB/RoCE transport flows.
inline bool is_iwarp_kind(AnomalyKind k) { return k >= AnomalyKind::tcp_hole && k <= AnomalyKind::mpa_marker_stride; }
// Link-level kinds index no flow (flow is UINT32_MAX); they name a sender's MAC and a priority.
inline bool is_pause_kind(AnomalyKind k) { return k == AnomalyKind::pause_storm; }
Severity severity_of(AnomalyKind k);

// Why an IB/RoCE retransmission was made (IBA 9.7.5.2, 9.7.6), as the capture shows it.
enum class ResendCause : std::uint8_t {
  nak,            // after a NAK or RNR NAK (IBA 9.7.5.2)
  request_loss,   // fills PSNs lost before the capture point (transport timer)
  corrupt,        // resends a packet captured corrupt (bad ICRC/VCRC): a bit error, not a drop
  response_loss,  // a READ re-issued because its response packets were lost (IBA 9.7.6.1)
  timer,          // none of the above: its original and answers passed the capture point
  answer_corrupt, // the ACK/response of the original was captured corrupt: the requester dropped it
  response_lost_after,  // a READ re-issued from a response the capture holds intact, captured in order:
                        // lost (or held up) after the capture point, before the requester (IBA 9.7.6.1)
  no_answer_captured,   // as `timer`, but the capture holds no answer (ACK, NAK, response) of the queue pair
                        // at all: a timeout, or the capture does not see the responder's direction
};

struct Anomaly {
  AnomalyKind kind;
  std::uint64_t frame = 0;
  std::uint32_t flow = 0;          // index into the analysis' flow list (UINT32_MAX: none)
  // iWARP kinds give these fields their own meaning (decode/iwarp_analysis.h, IwarpAnomalyFields).
  std::uint32_t dest_qp = 0;
  std::uint32_t psn = 0;
  std::int64_t expected_psn = -1;  // -1: not meaningful
  std::uint32_t count = 0;         // e.g. PSNs missing in a gap, bytes in a TCP hole
  double duration_us = -1;         // e.g. recovery time of a retransmission; -1: none
  ResendCause cause = ResendCause::nak;  // IB/RoCE retransmission: why it was made
  bool late = false;               // IB/RoCE psn_gap: (partly) filled by a late original: reordered, not lost
  bool retracted = false;          // withdrawn: every PSN of a psn_gap arrived late (reordered); not listed
  std::array<std::uint64_t, 3> related{};  // related frames (the gap a NAK answers, the NAK a resend follows...)
  std::uint8_t related_count = 0;
  std::int8_t priority = -1;       // pause kinds: the priority (PAUSE: each of the 8)
  std::uint64_t mac = 0;           // pause kinds: the pause sender's MAC address, 48 bits
  void relate(std::uint64_t f) {
    if (f && related_count < related.size()) related[related_count++] = f;
  }
};

// A psn_gap narrowed after it was reported, because PSNs it named arrived late
// (reordered on the path, not lost): what the gap frame's per-packet verdict
// and the per-flow tallies made when it was read must change by.
struct GapRevision {
  std::uint64_t frame = 0;   // the gap frame
  std::uint32_t flow = 0;
  std::int32_t missing = 0;  // PSNs no longer called lost (negative)
  std::int32_t gaps = 0;     // gaps no longer reported (negative), or added by a split (positive)
};

// A resend first called spurious (its original had passed the capture point)
// that the count of answers then showed was needed (an answer was lost): the
// packets of `flow` flagged spurious from `first_frame` to `last_frame` were not.
struct SpuriousRevision {
  std::uint64_t first_frame = 0, last_frame = 0;
  std::uint32_t flow = 0;
  bool covers(std::uint32_t f, std::uint64_t frame) const {
    return f == flow && first_frame <= frame && frame <= last_frame;
  }
};

// A packet first taken for corrupt, analysed again as intact once its
// direction's ICRCs proved not the wire's (icrc_origin.h): its verdict now
// (apply_replay puts it onto the verdict it had when read).
struct ReplayRevision {
  std::uint64_t frame = 0;
  std::uint32_t flow = 0;
  double ts = 0;
  std::uint32_t psn = 0;
  std::int64_t expected_psn = -1;
  std::uint32_t gap = 0;
  bool duplicate = false, out_of_order = false, retransmission = false, spurious_retransmission = false;
  std::uint64_t request_frame = 0;
  double latency_us = -1;
};

// Puts a replayed packet's verdict onto the one it had when read: a
// PacketVerdict (analyzer.h) or a record of one (the Wireshark plugin's).
template <typename Verdict>
void apply_replay(const ReplayRevision& r, Verdict& v) {
  v.analysed = true;
  v.expected_psn = r.expected_psn;
  v.gap = r.gap;
  v.duplicate = r.duplicate;
  v.out_of_order = r.out_of_order;
  v.retransmission = r.retransmission;
  v.spurious_retransmission = r.spurious_retransmission;
  if (r.request_frame) v.request_frame = r.request_frame;
  if (r.latency_us >= 0) v.latency_us = r.latency_us;
  v.icrc_not_wire = true;
}

class AnomalyLog {
 public:
  explicit AnomalyLog(std::size_t cap = 1'000'000) : cap_(cap) {}
  void add(const Anomaly& a) {
    ++by_kind_[static_cast<std::size_t>(a.kind)];
    if (items_.size() < cap_) {
      items_.push_back(a);
      if (keep_order_keys_) order_keys_.push_back(order_key_);
    } else {
      ++dropped_;
    }
  }
  // For merging the logs of a sharded analysis (analyzer_merge.h): each entry
  // remembers when it was added (the frame being analysed, or a later phase),
  // so that the merged log lists entries in the order one log would have.
  void keep_order_keys(bool on) { keep_order_keys_ = on; }
  void set_order_key(std::uint64_t k) { order_key_ = k; }
  std::uint64_t order_key() const { return order_key_; }
  const std::vector<std::uint64_t>& order_keys() const { return order_keys_; }
  std::size_t cap() const { return cap_; }
  const std::vector<Anomaly>& items() const { return items_; }
  std::vector<Anomaly>& items() { return items_; }
  std::uint64_t count(AnomalyKind k) const { return by_kind_[static_cast<std::size_t>(k)]; }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto c : by_kind_) t += c;
    return t;
  }
  std::uint64_t dropped() const { return dropped_; }
  // Entries listed (kept and not retracted).
  std::size_t listed() const { return items_.size() - retracted_; }

  // Withdraws the entry at `handle` (it stays in place, so handles stay valid;
  // outputs skip it) and takes it out of the counts.
  void retract(std::size_t handle) {
    if (handle >= items_.size() || items_[handle].retracted) return;
    items_[handle].retracted = true;
    --by_kind_[static_cast<std::size_t>(items_[handle].kind)];
    ++retracted_;
  }
  // Records a gap narrowed, withdrawn or split after it was reported.
  void note_revision(const GapRevision& r) {
    if (revisions_.size() < cap_) revisions_.push_back(r);
  }
  const std::vector<GapRevision>& revisions() const { return revisions_; }
  void note_revision(const SpuriousRevision& r) {
    if (spurious_revisions_.size() < cap_) spurious_revisions_.push_back(r);
  }
  const std::vector<SpuriousRevision>& spurious_revisions() const { return spurious_revisions_; }
  void note_revision(const ReplayRevision& r) {
    if (replay_revisions_.size() < cap_) replay_revisions_.push_back(r);
  }
  const std::vector<ReplayRevision>& replay_revisions() const { return replay_revisions_; }

  // Fills this empty log from the logs of the shards of a sharded analysis
  // (analyzer_merge.h): entries in the order one log would have added them
  // (their order keys; ties by shard), the cap applied to the merged list,
  // counts per kind summed. `flow_of(shard, a)` renumbers an entry's flow.
  using FlowRenumber = std::function<std::uint32_t(std::size_t shard, const Anomaly& a)>;
  void merge(std::span<const AnomalyLog* const> parts, const FlowRenumber& flow_of);

 private:
  std::size_t cap_;
  std::vector<Anomaly> items_;
  std::array<std::uint64_t, static_cast<std::size_t>(AnomalyKind::count_)> by_kind_{};
  std::uint64_t dropped_ = 0;
  std::size_t retracted_ = 0;
  std::vector<GapRevision> revisions_;
  std::vector<SpuriousRevision> spurious_revisions_;
  std::vector<ReplayRevision> replay_revisions_;
  bool keep_order_keys_ = false;
  std::uint64_t order_key_ = 0;
  std::vector<std::uint64_t> order_keys_;
};

}  // namespace rdmadiag::decode
