// The requester side of a reliable connection as seen at a capture point:
// IBA Vol 1 §9.7.1-9.7.2 (PSN assignment, RDMA READ PSN reservation §9.7.2.1),
// §9.7.5.2 (NAK: PSN sequence error, RNR) and §9.7.6 (go-back-N retransmission
// from the NAK's PSN or on the transport timer; READs re-issued from the first
// missing response PSN, atomics replayed). One state per requester flow; it
// also holds what the reverse flow's responses said about this PSN space
// (READ response PSNs seen, acknowledged PSNs), because they are this PSN space.
//
// Each packet goes through two steps: `classify` (pure: what is this packet in
// the sequence?) and `apply` (update the state, report through a SeqSink).
//
// The rule every loss report obeys (enforced in one place, report_loss): a PSN
// is never called lost if the capture holds it since its last use, even
// corrupt. The windows of PSNs seen (psn_window.h) answer that.
//
// Memory per flow: two PSN windows (48 bytes each, 256 more once one spans
// more than 256 PSNs; a third once it sends a READ), a ring of the last 64
// requests' IP IDs (16 bytes a copy, allocated as it fills: 8 copies, then 64,
// 1 KB), at most 4096 outstanding requests, 64
// open losses and the last 32 recovered ones (only once a gap was recovered).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "decode/flow_ring.h"
#include "decode/ib_opcodes.h"
#include "decode/psn_window.h"
#include "decode/seq_sink.h"

namespace rdmadiag::decode {

inline constexpr std::int32_t kRestartJump = 1 << 20;  // a PSN jump this large is a new connection, not loss
inline constexpr std::size_t kMaxPending = 4096;
inline constexpr std::size_t kMaxOpenLosses = 64;
inline constexpr std::size_t kMaxRecovered = 32;  // under heavy reordering many gaps recover before their originals come
inline constexpr double kTimeoutSilenceSeconds = 0.001;
inline constexpr std::int32_t kCorruptAhead = 4096;  // how far ahead a corrupt packet's PSN is believed
inline constexpr double kIpIdClockSeconds = 0.5;  // how long an IPv4 ID orders packets (a 16-bit counter per host pair)
inline constexpr double kLateAnswerSeconds = 0.05;  // how long an answer reordered behind a newer one is waited for

// The sender numbers its IPv4 packets in order (mod 2^16): whether `ip_id` was
// sent before `than` (false without an IPv4 header).
inline bool sent_before(std::int32_t ip_id, std::int32_t than) {
  if (ip_id < 0 || than < 0) return false;
  const std::uint32_t d = (static_cast<std::uint32_t>(than) - static_cast<std::uint32_t>(ip_id)) & 0xFFFF;
  return d > 0 && d < 0x8000;
}

// What the sequence machines need of one packet.
struct SeqPacket {
  std::uint64_t frame = 0;
  double ts = 0;
  std::int64_t ts_ns = 0;  // the same time, exact: latencies (a double of epoch seconds resolves 0.24 us)
  std::uint32_t psn = 0;
  std::uint32_t dest_qp = 0;
  OpKind kind = OpKind::invalid;
  std::uint32_t span = 1;        // PSNs it occupies (a READ request: one per response packet)
  bool span_known = true;        // false: a READ whose PMTU is not known yet
  std::int32_t ip_id = -1;       // -1: no IPv4 header
  bool corrupt = false;          // bad ICRC/VCRC: its receiver dropped it
  bool ack_req = false;
  std::uint32_t read_len = 0;    // a READ request's RETH length
  std::size_t anomaly = SIZE_MAX;  // a corrupt packet: its icrc_bad / vcrc_bad entry
  Aeth aeth{};                   // acknowledgements
};

// What the analyzer reads of a decoded packet besides its SeqPacket before
// handing it to the reliable-service machines (PMTU learning, READ spans,
// message checks): small enough to keep for a packet whose verdict is replayed
// (icrc_origin.h).
struct SeqFacts {
  std::uint8_t opcode = 0;
  std::uint8_t pad = 0;      // BTH pad count
  bool truncated = false;    // cut by the snap length
  std::uint32_t payload_len = 0;
  std::uint32_t reth_len = 0;  // RETH DMA length (0: none)
};

struct PendingRequest {
  std::uint32_t first, last;  // PSNs this request occupies
  std::uint64_t frame;
  std::int64_t ts_ns;  // exact: a latency is a difference of two such times
  OpClass op;
  bool ack_req;
  std::uint32_t read_len;
};

// PSNs missing at the capture point (lost before it) or captured corrupt,
// kept open until they arrive intact, to link NAKs and resends to them and
// to time the recovery.
struct OpenLoss {
  std::uint32_t first = 0, last = 0;  // inclusive
  std::uint32_t remaining = 0;        // PSNs of it not yet seen intact
  std::uint64_t frame = 0;            // where it was seen
  double ts = 0;
  std::size_t anomaly = SIZE_MAX;     // its psn_gap (or icrc_bad) entry
  bool response = false;              // READ response PSNs (else request PSNs)
  bool corrupt = false;               // captured with a bad CRC, not missing
  bool resend_hole = false;           // missing from a resend after a NAK; an earlier copy was captured
  std::uint64_t nak_frame = 0;
  std::int32_t ip_id_at = -1;         // IPv4 ID of the packet that showed it (-1: none)
  std::uint32_t reported = 0;         // PSNs called lost when it was reported
  std::uint32_t late = 0;             // of those, PSNs that arrived late (reordered, not lost after all)
  // The anomaly entries that name its PSNs still missing: the gap, and the parts a
  // late PSN in the middle split off it (first/last PSN each, inclusive).
  // A part's ends are missing PSNs, as far as known; PSNs between them may have
  // come (a gap can hold PSNs another gap names, and a late PSN splits a part
  // only while there is room for another): `missing` counts those still missing.
  struct Part {
    std::uint32_t first = 0, last = 0;
    std::size_t anomaly = SIZE_MAX;
    std::uint32_t missing = 0;
  };
  std::array<Part, 4> parts{};
  std::uint8_t part_count = 0;
  // Late PSNs that came inside a part while all four were in use (the first few).
  std::array<std::uint32_t, 4> inside{};
  std::uint8_t inside_count = 0;
  bool came_inside(std::uint32_t psn) const {
    for (std::uint8_t i = 0; i < inside_count; ++i)
      if (inside[i] == psn) return true;
    return false;
  }
  bool contains(std::uint32_t psn) const { return psn_diff(psn, first) >= 0 && psn_diff(last, psn) >= 0; }
};

// A resend with no NAK before it whose original passed the capture point: the
// verdict (spurious, or an ACK lost before the capture point) waits for the
// answers. Responders answer every copy (IBA 9.7.5.1.2).
struct SpuriousCheck {
  bool open = false;
  std::uint32_t psn = 0, copies = 0, answers = 0;
  std::uint32_t limit = 0;  // the highest PSN sent when it was resent: answers to copies go up to it
  bool complete = false;    // the resend has reached `limit`: answers from now on answer the whole copy
  std::uint64_t frame = 0;
  bool is_read = false;
  // An answer beyond `limit` came: the copies' answers are due, but one may still
  // arrive late (reordered on the path) for kLateAnswerSeconds after it.
  bool closing = false;
  double close_ts = 0;
  std::uint64_t corrupt_answer = 0;  // an answer to a copy captured corrupt: the requester dropped it
  std::uint64_t last_flagged = 0;    // the last of its packets called spurious (0: none)
};

// The last 64 copies a flow sent (PSN, IPv4 ID, time), to tell a network's
// copy from a resend. The first entry (head) is inline; entries 1..7 are
// allocated at the second copy, and the ring doubles as it first fills (1..15,
// 1..31, 1..63): a many-QP capture holds many flows of a few packets each, and
// the full ring (1 KB per requester) was the largest part of their state; at
// 16K connections, flows of ~10 requests each that had grown to it held 13.7 MB
// of fresh memory, whose first touch (a page fault) cost more CPU than its use.
// Only the entries written are ever read, so an allocation is not cleared.
struct RecentCopies {
  struct Copy {
    std::uint32_t psn : 24;
    std::uint32_t first_seen : 1;  // the copy that first brought its PSN to the capture point
    std::int32_t ip_id;
    double ts;
  };
  static constexpr std::size_t kSize = 64;
  static constexpr std::uint32_t kFirstBlock = 7;  // entries allocated at the second copy
  static_assert(2 * (2 * (2 * kFirstBlock + 1) + 1) + 1 == kSize - 1, "grow() doubles the ring up to kSize");
  Copy head{};
  std::unique_ptr<Copy[]> rest;  // entries 1..rest_size of the ring
  std::uint64_t pos = 0;
  void add(std::uint32_t psn, std::int32_t ip_id, double ts) {
    const std::uint32_t first = first_seen_armed_;
    first_seen_armed_ = 0;
    const std::size_t i = pos++ % kSize;
    if (i == 0) {
      head = Copy{psn, first, ip_id, ts};
      reframe(psn);
      return;
    }
    if (i > rest_size_) grow();
    // Copied whole: GCC stores an assigned Copy's bit fields as a read-modify-write
    // of their word, a load of the entry's old bytes for every copy recorded (in
    // a new flow's ring, a miss on memory not yet read).
    const Copy c{psn, first, ip_id, ts};
    std::memcpy(&rest[i - 1], &c, sizeof c);
    const std::int32_t d = psn_diff(psn, range_ref_);
    range_lo_ = std::min(range_lo_, d);
    range_hi_ = std::max(range_hi_, d);
  }
  // The next add() records the first copy of its PSN: marked as it is written,
  // not loaded again after (in a ring not in the cache, a miss per request).
  void arm_first_seen() { first_seen_armed_ = 1; }
  // Armed, and no add() since.
  bool first_seen_armed() const { return first_seen_armed_ != 0; }
  // Marks the copy added last (if it is that packet) as the first of its PSN (and disarms).
  void mark_first_seen(std::uint32_t psn, std::int32_t ip_id) {
    first_seen_armed_ = 0;
    if (!pos) return;
    const std::size_t i = (pos - 1) % kSize;
    Copy& c = i == 0 ? head : rest[i - 1];
    if (c.psn == psn && c.ip_id == ip_id) c.first_seen = 1;
  }
  // The copy added last, or nullptr.
  const Copy* last() const {
    if (!pos) return nullptr;
    const std::size_t i = (pos - 1) % kSize;
    return i == 0 ? &head : &rest[i - 1];
  }
  // A copy made by the network keeps the IPv4 ID of its original; without an
  // IPv4 header, only a copy within `within` seconds of its original counts.
  bool has_copy(std::uint32_t psn, std::int32_t ip_id, double ts, double within) const {
    if (!in_range(psn)) return false;  // (an in-order packet: every READ response, without the scan)
    return any([&](const Copy& c) {
      return c.psn == psn && c.ts > 0 && (ip_id >= 0 ? c.ip_id == ip_id : ts - c.ts < within);
    });
  }
  // Whether `pred` holds for any copy held (stops at the first), in ring order.
  template <typename Pred>
  bool any(Pred pred) const {
    const std::size_t held = pos < kSize ? static_cast<std::size_t>(pos) : kSize;
    if (held == 0) return false;
    if (pred(head)) return true;
    for (std::size_t i = 1; i < held; ++i)
      if (pred(rest[i - 1])) return true;
    return false;
  }
 private:
  void grow() {  // only while the ring fills for the first time: entries 1..i-1 are all written
    const std::uint16_t size = rest_size_ ? 2 * rest_size_ + 1 : kFirstBlock;  // ring sizes 8, 16, 32, 64
    auto bigger = std::make_unique_for_overwrite<Copy[]>(size);
    for (std::uint16_t k = 0; k < rest_size_; ++k) bigger[k] = rest[k];
    rest = std::move(bigger);
    rest_size_ = size;
  }
  // Every held copy's PSN is in [ref + lo, ref + hi] (by psn_diff from ref,
  // which gives one PSN one value: a PSN outside is held by no copy). Taken
  // again from the held copies each time the ring wraps, with the newest as
  // ref, so that it stays as narrow as they are.
  bool in_range(std::uint32_t psn) const {
    const std::int32_t d = psn_diff(psn, range_ref_);
    return d >= range_lo_ && d <= range_hi_;
  }
  void reframe(std::uint32_t psn) {
    range_ref_ = psn;
    range_lo_ = range_hi_ = 0;
    const std::size_t held = pos < kSize ? 0 : kSize - 1;  // the others (none before the first wrap)
    for (std::size_t k = 0; k < held; ++k) {
      const std::int32_t d = psn_diff(rest[k].psn, psn);
      range_lo_ = std::min(range_lo_, d);
      range_hi_ = std::max(range_hi_, d);
    }
  }
  std::uint16_t rest_size_ = 0;  // (at most kSize - 1)
  std::uint8_t first_seen_armed_ = 0;
  std::uint32_t range_ref_ = 0;
  std::int32_t range_lo_ = 0, range_hi_ = -1;  // empty until the first copy
};

// What a READ requester can have got of its responses, by the capture's order
// (its completer takes them in PSN order only, IBA 9.7.5.1.3; rxe drops one that
// comes early): the PSNs captured intact since the last READ request covering
// them with no lower response captured after them, and the last response
// captured after one its responder sent later (IPv4 ID): reordered before the
// capture point, where the requester's view cannot be told.
struct AnswersInOrder {
  AnswersInOrder() {}  // user-provided: `got`'s bits stay unwritten (psn_window.h), not zeroed
  PsnWindow got;
  bool any = false;
  std::uint32_t last = 0;  // the response captured last
  bool reordered = false;
  std::uint32_t reordered_psn = 0;
};

// Message structure (IBA 9.4: FIRST, MIDDLE..., LAST; or ONLY).
struct MessageState {  // (the kind after the wider fields: 24 bytes, not 32)
  enum class Kind : std::uint8_t { none, send, write, unknown };
  std::uint64_t bytes = 0;
  std::uint32_t reth_len = 0;
  // The PSN that continues the last packet checked; the next packet is checked
  // only if it is that PSN and nothing else came between (reordering breaks the view).
  std::uint32_t next = 0;
  Kind kind = Kind::unknown;
  bool next_valid = false;
};

// What the responder holds, replayed from the requests in the order captured
// (IBA 9.7.5.2.2: a request at its ePSN is taken, a later one discarded, an
// earlier one a duplicate) and set again by what it says itself: a NAK names
// its ePSN, an ACK the last PSN it took. Exact when the capture point is next
// to the responder; elsewhere its own answers correct it.
struct ResponderView {
  bool valid = false;
  std::uint32_t epsn = 0;
  bool holds(std::uint32_t psn) const { return valid && psn_diff(epsn, psn) > 0; }
  void takes(std::uint32_t psn, std::uint32_t span) {
    if (!valid) valid = true, epsn = psn;
    if (psn == epsn) epsn = (psn + span) & kPsnMask;
  }
  void expects(std::uint32_t psn) {  // a NAK: the responder's ePSN
    valid = true;
    epsn = psn & kPsnMask;
  }
  void acked(std::uint32_t upto) {  // an ACK: it took everything up to `upto`
    const std::uint32_t next = (upto + 1) & kPsnMask;
    if (!valid || psn_diff(next, epsn) > 0) expects(next);
  }
};

struct RequesterState {
  // User-provided, so that make_unique does not zero the whole state first:
  // the PSN windows' bits stay unwritten (psn_window.h).
  RequesterState() {}
  // What every request reads or writes comes first, in the state's first four
  // lines (classify, apply, before_request, mark_seen, check_message on the
  // in-order path; the ACK path's acked_* too); the rest is touched only on
  // events (resends, NAKs, losses, READ answers). Spread over the state, the
  // fields of an in-order request were 7-8 lines, each a miss on a flow not
  // in the cache (docs/performance.md, session 31).
  bool started = false;
  bool resending = false;
  bool read_span_unknown = false;  // the last READ's span waits for the next PSN
  bool corrupt_unplaced = false;   // the last packet was corrupt with a PSN that fit nowhere
  bool acked_valid = false;
  // An answer (ACK, NAK, response; intact or not) of this requester was captured:
  // the capture sees the responder's direction. Kept across restarts.
  bool answers_captured = false;
  std::uint32_t high_next = 0;    // one past the highest PSN a request used
  std::uint32_t resend_next = 0;  // during a resend: the next PSN it should carry
  std::uint32_t acked_through = 0;  // the highest PSN an ACK or response covered
  std::uint32_t read_psn = 0, read_len = 0;
  std::int32_t high_ip_id = -1;    // IPv4 ID of the packet that carried the highest PSN (the sender's clock)
  std::int32_t newest_ip_id = -1;  // the newest IPv4 ID of a request captured (by the sender's clock)
  double high_ts = 0;              // when it was captured
  double newest_ts = 0;
  ResponderView responder;
  MessageState msg;
  PsnWindow sent;                   // request PSNs seen (a READ's reserved PSNs included)
  FlowRing<PendingRequest> pending;
  std::vector<OpenLoss> losses;
  RecentCopies recent;
  SpuriousCheck spur;  // (every request reads its first field, `open`)
  // Events only.
  bool resend_after_nak = false;
  bool spurious_episode = false;
  std::uint8_t recovered_next = 0;
  std::size_t episode_anomaly = SIZE_MAX;
  std::uint64_t nak_frame = 0;    // a NAK (or RNR NAK) not yet followed by its resend
  double nak_ts = 0;
  std::uint32_t nak_psn = 0;
  std::uint32_t nak_first_psn = 0;  // the lowest PSN NAKed since the last resend began
  PsnWindow answered;               // READ response / atomic ACK PSNs seen
  std::unique_ptr<AnswersInOrder> in_order;  // allocated at the flow's first READ
  // The last gaps a resend recovered (at most kMaxRecovered, allocated at the
  // first): their originals may still come, overtaken by the resend.
  std::vector<OpenLoss> recovered;
  std::uint64_t corrupt_ack_frame = 0;  // the last ACK captured corrupt, and the PSN it says
  std::uint32_t corrupt_ack_psn = 0;
  std::int32_t nak_ip_id = -1;     // the newest one captured before the pending NAK: sent before the NAK arrived
  std::int32_t episode_ip_id = -1; // IPv4 ID of the packet that started the resend in progress
  double episode_ts = 0;
  std::uint32_t episode_psn = 0;   // and its PSN
  std::int32_t episode_newest_ip_id = -1;  // the newest packet of that resend (the sender's clock), and its PSN
  std::uint32_t episode_newest_psn = 0;

  // The open loss holding `psn` in the request (or response) PSNs, or nullptr.
  OpenLoss* loss_at(std::uint32_t psn, bool response);
  const OpenLoss* loss_at(std::uint32_t psn, bool response) const {
    return const_cast<RequesterState*>(this)->loss_at(psn, response);
  }
  // Back to the start of a connection (a CM exchange or a new incarnation) at `psn`.
  void restart(std::uint32_t psn);
};

enum class ReqStep : std::uint8_t {
  restart,       // first packet, or a jump too large for loss: a new incarnation
  in_order,      // the next new PSN
  gap,           // new PSNs beyond the next: those in between never passed the capture point
  duplicate,     // a copy made by the network
  late,          // fills a gap with no NAK or resend before it: reordered
  resend,        // a retransmission
  stray,         // an older copy than the resend in progress: changes nothing
  late_after_resend,  // the original of a PSN called lost, overtaken by its own resend: reordered, not lost
  resend_early,  // a packet of the resend in progress sent before the one that started it here: reordered
  corrupt,       // bad CRC at the next PSN: held (not lost), its receiver drops it
  corrupt_ahead, // bad CRC a little beyond the next PSN: held, the sequence waits for what comes next
  corrupt_other, // bad CRC elsewhere: its fields cannot be trusted, only counted
};

// 8 bytes, the small fields first: returned in one register (12 bytes were
// stored field by field and reloaded whole, a store-forwarding stall per request).
struct RequesterEvent {
  ReqStep step = ReqStep::in_order;
  ResendCause cause = ResendCause::timer;
  bool new_episode = false;
  std::uint32_t ahead = 0;  // gap: PSNs skipped
};

// Before classifying a request: what it tells about the past. A READ whose span
// was unknown learns it from this PSN (returned: the span, 0 if not learned), and
// a resent READ answered before this request settles its spurious check.
std::uint32_t before_request(RequesterState& q, const SeqPacket& p, SeqSink& sink);
RequesterEvent classify(const RequesterState& q, const SeqPacket& p);
void apply(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, SeqSink& sink);

// Message structure and lengths of a request that passed in sequence.
struct MessageFacts {
  std::uint32_t payload_len = 0, pad = 0, reth_len = 0, pmtu = 0, flow_pmtu = 0;
  bool truncated = false;
  bool carries_payload = true;
};
void check_message(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, const MessageFacts& m, SeqSink& sink);

// An open loss recorded for `count` PSNs from `first` reported at `at`: only the PSNs
// the capture does not hold (the rule above). Returns false if there were none.
bool report_loss(RequesterState& q, bool response, std::uint32_t first, std::uint32_t count, const SeqPacket& at,
                 SeqSink& sink);
// PSNs a resend skipped: lost if the capture never held them; after a NAK, a hole
// in the resend (counted in lost_resends) if it did.
// READ responses: PSNs a response skipped (`response`), a hole if re-sent ones.
void report_skipped(RequesterState& q, bool response, std::uint32_t first, std::uint32_t count, const SeqPacket& at,
                    SeqSink& sink);
// PSN `x` of the open loss `l` arrived late (reordered, not lost): taken out of
// the gap entry that names it (trimmed, split, or withdrawn when empty) and out
// of the flow's missing PSNs. False if no entry of it names `x` any more.
bool unlose(OpenLoss& l, std::uint32_t x, SeqSink& sink);
// A packet captured corrupt at `p.psn` (its receiver drops it): open until its intact resend.
void open_corrupt(RequesterState& q, bool response, const SeqPacket& p);
// Marks `span` PSNs from `psn` (requests, or READ responses / atomic ACKs) seen,
// and closes what an intact packet fills of the open losses.
// `late`: the packet is a late original (reordered) even without an IPv4 ID to prove it.
void mark_seen(RequesterState& q, bool response, std::uint32_t psn, std::uint32_t span, const SeqPacket& at,
               SeqSink& sink, bool late = false);
// READ response `p` captured intact (AnswersInOrder); `prev`: the response captured
// just before it on its flow (nullptr: none). Higher PSNs captured before it no longer
// count (they came before it); sent before `prev` (the responder's IPv4 ID), it shows
// the response flow reordered before the capture point.
void note_answer(RequesterState& q, const SeqPacket& p, const RecentCopies::Copy* prev);
// Settles an open spurious-resend check (conclusive: the answers had time to come).
void spurious_verdict(RequesterState& q, SeqSink& sink, bool conclusive);

}  // namespace rdmadiag::decode
