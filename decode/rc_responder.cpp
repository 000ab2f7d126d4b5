// Responses on a reliable connection: IBA Vol 1 §9.7.5, 9.7.5.1.3, 9.7.5.2, 9.9.4.
#include "decode/rc_responder.h"

namespace rdmadiag::decode {

namespace {

bool starts_response(OpKind k) { return k == OpKind::read_response_first || k == OpKind::read_response_only; }
bool ends_response(OpKind k) { return k == OpKind::read_response_last || k == OpKind::read_response_only; }

// From the request to its answer, exact to the capture's nanosecond (the two
// times' difference, not that of two doubles of epoch seconds).
double latency_us(const SeqPacket& answer, const PendingRequest& request) {
  return static_cast<double>(answer.ts_ns - request.ts_ns) * 1e-3;
}

const PendingRequest* read_holding(const RequesterState& q, std::uint32_t psn) {
  for (const PendingRequest& r : q.pending)
    if (r.op == OpClass::read && psn_diff(psn, r.first) >= 0 && psn_diff(r.last, psn) >= 0) return &r;
  return nullptr;
}

ResponseEvent classify_read(const ResponseCursor& r, const RequesterState* q, const SeqPacket& p) {
  ResponseEvent e{RespStep::read_data};
  e.first = r.expected;
  if (r.recent.has_copy(p.psn, p.ip_id, p.ts, -1)) {
    e.step = RespStep::duplicate;  // the same IPv4 ID: a copy made by the network
    return e;
  }
  // The capture holds this PSN already: answered again (a re-issued READ).
  e.resent = q ? q->answered.holds(p.psn) : false;
  if (starts_response(p.kind) && r.in_read_response && r.read_last_known && psn_diff(r.read_last, r.expected) >= 0 &&
      psn_diff(p.psn, r.read_last) > 0) {
    // A new response while the last one had not ended: its tail was lost.
    e.missing = static_cast<std::uint32_t>(psn_diff(r.read_last, r.expected)) + 1;
  } else if (!starts_response(p.kind) && r.in_read_response) {
    const std::int32_t d = psn_diff(p.psn, r.expected);
    if (d > 0) e.missing = static_cast<std::uint32_t>(d);
    if (d < 0 && !q) e.resent = true;  // no record of the PSNs answered: an older PSN was sent again
  } else if (!starts_response(p.kind) && q) {
    // The middle of a response with no start: its first packets were lost.
    if (const PendingRequest* read = read_holding(*q, p.psn); read && read->first != p.psn) {
      e.first = read->first;
      e.missing = static_cast<std::uint32_t>(psn_diff(p.psn, read->first));
    }
  }
  if (e.missing) e.step = RespStep::read_gap;
  return e;
}

// Completes the requests whose PSNs end at or before `upto`; latency for those asking for an ACK.
void complete_upto(RequesterState& q, std::uint32_t upto, const SeqPacket& p, SeqSink& resp, SeqSink& req) {
  if (!q.acked_valid || psn_diff(upto, q.acked_through) > 0) {
    q.acked_valid = true;
    q.acked_through = upto;
  }
  q.responder.acked(upto);
  while (!q.pending.empty() && psn_diff(q.pending.front().last, upto) <= 0) {
    const PendingRequest r = q.pending.front();
    q.pending.pop_front();
    if (r.op == OpClass::read || !r.ack_req) continue;  // a READ completes with its data, not an ACK
    const double us = latency_us(p, r);
    req.stats().latency[static_cast<std::size_t>(r.op)].add(us);
    resp.verdict().request_frame = r.frame;
    resp.verdict().latency_us = us;
    resp.link(r.frame, p.frame, us);
  }
}

// Responders answer every copy of a request (IBA 9.7.5.1.2), a duplicate with an
// ACK of the latest PSN they took (coalesced): an answer from the resent PSN up to
// the highest PSN sent then counts once the resend got that far (an ACK in the
// middle of a resend answers a part of it). One beyond that says the answers are
// due; an answer reordered behind it still counts for kLateAnswerSeconds.
void count_answer(RequesterState& q, std::uint32_t psn, double ts, SeqSink& req) {
  SpuriousCheck& c = q.spur;
  if (!c.open) return;
  if (c.closing && ts - c.close_ts > kLateAnswerSeconds) return spurious_verdict(q, req, true);
  const std::int32_t d = psn_diff(psn, c.psn);
  if (d < 0) return;
  if (psn_diff(psn, c.limit) > 0) {
    if (d >= kRestartJump) return spurious_verdict(q, req, false);
    if (!c.closing) {
      c.closing = true;
      c.close_ts = ts;
    }
  } else if (c.complete || c.closing) {
    ++c.answers;
  }
  if (c.closing && c.answers >= c.copies) spurious_verdict(q, req, true);  // every copy answered
}

// A corrupt ACK explains a timer resend sent after it (open_spurious_check): the
// answer came, damaged. One captured after the resend cannot have caused it.
void note_corrupt_answer(RequesterState& q, std::uint32_t psn, std::uint64_t frame) {
  q.corrupt_ack_frame = frame;
  q.corrupt_ack_psn = psn;
}

void apply_ack(RequesterState* q, const SeqPacket& p, SeqSink& resp, SeqSink* req) {
  ++resp.stats().acks;
  if (!q) return;
  count_answer(*q, p.psn, p.ts, *req);
  complete_upto(*q, p.psn, p, resp, *req);
  resp.verdict().expected_psn = q->resend_next;
}

AnomalyKind nak_kind(const Aeth& aeth, FlowSummary& s) {
  if (aeth.kind() == AethKind::rnr_nak) {
    ++s.faults_for_update().rnr_naks;
    return AnomalyKind::rnr_nak;
  }
  ++s.faults_for_update().naks[aeth.value()];
  static constexpr AnomalyKind kNak[] = {AnomalyKind::nak_psn_seq_error, AnomalyKind::nak_invalid_request,
                                         AnomalyKind::nak_remote_access, AnomalyKind::nak_remote_op,
                                         AnomalyKind::nak_invalid_rd_request};
  return kNak[aeth.value()];
}

// Links a NAK to what it answers: a PSN sequence error to the loss (or corrupt
// packet) at its PSN, any other NAK to the request.
void link_nak(RequesterState& q, Anomaly& a, const SeqPacket& p, SeqSink& resp) {
  if (a.kind == AnomalyKind::nak_psn_seq_error) {
    if (OpenLoss* l = q.loss_at(p.psn, false)) {
      a.relate(l->frame);
      resp.verdict().nak_gap_frame = l->frame;
      l->nak_frame = p.frame;
      resp.relate(l->anomaly, p.frame);
    } else {
      // 1: its last copy passed the capture point (lost or discarded after it);
      // 2: not captured, with no gap showing it (before the flow's first captured packet).
      a.count = q.sent.holds(p.psn) ? 1 : 2;
    }
    return;
  }
  for (const PendingRequest& r : q.pending)
    if (psn_diff(p.psn, r.first) >= 0 && psn_diff(r.last, p.psn) >= 0) {
      a.relate(r.frame);
      resp.verdict().request_frame = r.frame;
      return;
    }
}

void apply_nak(RequesterState* q, const SeqPacket& p, SeqSink& resp, SeqSink* req) {
  Anomaly a{nak_kind(p.aeth, resp.stats())};
  a.frame = p.frame;
  a.psn = p.psn;
  if (a.kind == AnomalyKind::rnr_nak) a.duration_us = p.aeth.rnr_timer_ms() * 1000.0;
  if (q) {
    a.expected_psn = q->resend_next;
    // The responder expects PSN `psn`: everything before it is acknowledged (IBA 9.7.5.2.2).
    complete_upto(*q, (p.psn - 1) & kPsnMask, p, resp, *req);
    link_nak(*q, a, p, resp);
    // NAKs before the resend they ask for: go-back-N starts at the lowest PSN one asked for.
    if (!q->nak_frame || psn_diff(p.psn, q->nak_first_psn) < 0) q->nak_first_psn = p.psn;
    // What the requester had sent when the first NAK came (the sender's clock, if fresh).
    if (!q->nak_frame) q->nak_ip_id = p.ts - q->newest_ts < kIpIdClockSeconds ? q->newest_ip_id : -1;
    q->nak_frame = p.frame;
    q->nak_ts = p.ts;
    q->nak_psn = p.psn;
  }
  if (q && a.kind == AnomalyKind::nak_psn_seq_error) q->responder.expects(p.psn);
  resp.report(a);
}

// A READ sent while no PMTU was known holds one PSN so far; its response
// packets, following on from it in order, show how many it occupies.
void extend_unknown_read(RequesterState& q, const SeqPacket& p) {
  if (starts_response(p.kind) || !q.read_span_unknown || q.pending.empty()) return;
  PendingRequest& r = q.pending[q.pending.size() - 1];
  const std::uint32_t most = std::max<std::uint32_t>((r.read_len + 255) / 256, 1);
  if (r.op == OpClass::read && r.first == q.read_psn && ((r.last + 1) & kPsnMask) == p.psn &&
      static_cast<std::uint32_t>(psn_diff(p.psn, r.first)) < most)
    r.last = p.psn;
}

// Which READ is this data for? The last packet of a response completes it.
// Returns the segment size its span shows (0: none).
std::uint32_t match_read(ResponseCursor& r, RequesterState& q, bool complete, const SeqPacket& p, SeqSink& resp,
                         SeqSink& req) {
  for (auto it = q.pending.begin(); it != q.pending.end(); ++it) {
    if (it->op != OpClass::read || psn_diff(p.psn, it->first) < 0 || psn_diff(it->last, p.psn) < 0) continue;
    resp.verdict().request_frame = it->frame;
    r.read_last_known = true;
    r.read_last = it->last;
    if (!complete) return 0;
    const double us = latency_us(p, *it);
    resp.verdict().latency_us = us;
    req.stats().latency[static_cast<std::size_t>(OpClass::read)].add(us);
    resp.link(it->frame, p.frame, us);
    const std::uint32_t span = static_cast<std::uint32_t>(psn_diff(p.psn, it->first)) + 1;
    const std::uint32_t segment = span > 1 && it->read_len ? (it->read_len + span - 1) / span : 0;
    // Data for a READ also acknowledges every request before it (IBA 9.7.5.1.3).
    const std::uint32_t last = it->last;
    q.pending.erase(q.pending.begin(), it + 1);
    complete_upto(q, last, p, resp, req);
    return segment;
  }
  return 0;
}

}  // namespace

bool read_starts_at(const RequesterState& q, std::uint32_t psn) {
  for (const PendingRequest& r : q.pending)
    if (r.op == OpClass::read && r.first == psn) return true;
  return false;
}

namespace {

// A corrupt READ response packet at the next PSN: its requester drops it and
// re-issues the READ from it (IBA 9.7.6.1); the capture holds it, so it is no gap.
void apply_corrupt_read(ResponseCursor& r, RequesterState& q, const SeqPacket& p, SeqSink& resp) {
  // Even a copy of a response seen before: a re-issued READ asks for it again.
  open_corrupt(q, true, p);
  if (q.answered.holds(p.psn)) {
    ++resp.stats().faults_for_update().resent_responses;  // a corrupt copy of a re-sent response
    resp.verdict().retransmission = true;
  }
  mark_seen(q, true, p.psn, 1, p, resp);
  r.in_read_response = !ends_response(p.kind);
  r.expected = (p.psn + 1) & kPsnMask;
}

std::uint32_t apply_read(ResponseCursor& r, RequesterState* q, const ResponseEvent& e, const SeqPacket& p, SeqSink& resp,
                         SeqSink* req) {
  PacketVerdict& v = resp.verdict();
  if (!starts_response(p.kind) && r.in_read_response) v.expected_psn = r.expected;
  if (e.step == RespStep::duplicate) {
    ++resp.stats().faults_for_update().duplicates;
    v.duplicate = true;
    Anomaly a{AnomalyKind::psn_duplicate};
    a.frame = p.frame;
    a.psn = p.psn;
    a.expected_psn = r.expected;
    resp.report(a);
    return 0;  // a copy: the stream is unchanged
  }
  if (e.step == RespStep::read_gap) {
    RequesterState unpaired;  // no record of the requester: the gap is reported, not followed
    report_skipped(q ? *q : unpaired, true, e.first, e.missing, p, resp);
  }
  if (e.resent) {
    ++resp.stats().faults_for_update().resent_responses;
    v.retransmission = true;
  }
  r.in_read_response = !ends_response(p.kind);
  r.expected = (p.psn + 1) & kPsnMask;
  if (q) note_answer(*q, p, r.recent.last());
  r.recent.add(p.psn, p.ip_id, p.ts);
  if (!q) return 0;
  if (!r.in_read_response) count_answer(*q, p.psn, p.ts, *req);
  mark_seen(*q, true, p.psn, 1, p, resp);
  extend_unknown_read(*q, p);
  r.read_last_known = false;
  return match_read(r, *q, !r.in_read_response, p, resp, *req);
}

void apply_atomic(ResponseCursor& r, RequesterState* q, const ResponseEvent& e, const SeqPacket& p, SeqSink& resp,
                  SeqSink* req) {
  ++resp.stats().acks;
  r.recent.add(p.psn, p.ip_id, p.ts);
  if (e.step == RespStep::atomic_replay) {
    ++resp.stats().faults_for_update().resent_responses;
    resp.verdict().retransmission = true;
  }
  if (!q) return;
  count_answer(*q, p.psn, p.ts, *req);
  mark_seen(*q, true, p.psn, 1, p, resp);
  for (auto it = q->pending.begin(); it != q->pending.end(); ++it) {
    if (it->first != p.psn) continue;
    const double us = latency_us(p, *it);
    resp.verdict().request_frame = it->frame;
    resp.verdict().latency_us = us;
    req->stats().latency[static_cast<std::size_t>(OpClass::atomic)].add(us);
    resp.link(it->frame, p.frame, us);
    q->pending.erase(it);
    break;
  }
  complete_upto(*q, p.psn, p, resp, *req);
}

}  // namespace

ResponseEvent classify(const ResponseCursor& r, const RequesterState* q, const SeqPacket& p) {
  if (p.corrupt) {
    // Only READ data right at the next PSN of a response, or at a PSN already
    // answered (a corrupt copy of a re-sent response), is taken for what it says it is.
    const bool continues = p.kind == OpKind::read_response_middle || p.kind == OpKind::read_response_last;
    const bool read = continues || starts_response(p.kind);
    // A new response right after the last one ended is in place too (READ responses follow each other in PSN order).
    const bool fits = (continues && r.in_read_response && p.psn == r.expected) ||
                      (starts_response(p.kind) && !r.in_read_response && p.psn == r.expected) ||
                      (q && q->answered.holds(p.psn)) ||
                      (starts_response(p.kind) && !r.in_read_response && q && read_starts_at(*q, p.psn));
    if (q && read && fits) return {RespStep::read_corrupt};
    const bool ack = p.kind == OpKind::acknowledge || p.kind == OpKind::atomic_acknowledge;
    return {q && ack ? RespStep::answer_corrupt : RespStep::ignored};
  }
  switch (p.kind) {
    case OpKind::acknowledge: {
      const AethKind k = p.aeth.kind();
      if (k == AethKind::ack) return {RespStep::ack};
      if (k == AethKind::rnr_nak || (k == AethKind::nak && p.aeth.value() <= 4)) return {RespStep::nak};
      return {RespStep::ignored};  // reserved syndromes: nothing more to link
    }
    case OpKind::read_response_first: case OpKind::read_response_middle:
    case OpKind::read_response_last: case OpKind::read_response_only:
      return classify_read(r, q, p);
    case OpKind::atomic_acknowledge:
      if (r.recent.has_copy(p.psn, p.ip_id, p.ts, -1)) return {RespStep::duplicate};
      return {q && q->answered.holds(p.psn) ? RespStep::atomic_replay : RespStep::atomic_ack};
    default:
      return {RespStep::ignored};
  }
}

std::uint32_t apply(ResponseCursor& r, RequesterState* q, const ResponseEvent& e, const SeqPacket& p, SeqSink& resp,
                    SeqSink* req) {
  if (q) q->answers_captured = true;
  switch (e.step) {
    case RespStep::ack: apply_ack(q, p, resp, req); return 0;
    case RespStep::nak: apply_nak(q, p, resp, req); return 0;
    case RespStep::atomic_ack: case RespStep::atomic_replay: apply_atomic(r, q, e, p, resp, req); return 0;
    case RespStep::ignored: return 0;
    case RespStep::read_corrupt: apply_corrupt_read(r, *q, p, resp); return 0;
    case RespStep::answer_corrupt: note_corrupt_answer(*q, p.psn, p.frame); return 0;
    default: return apply_read(r, q, e, p, resp, req);
  }
}

}  // namespace rdmadiag::decode
