// Requester side of a reliable connection: IBA Vol 1 §9.7.1, 9.7.2, 9.7.5.2, 9.7.6.
#include "decode/rc_requester.h"

#include <algorithm>

namespace rdmadiag::decode {

namespace {

bool is_first(OpKind k) { return k == OpKind::send_first || k == OpKind::write_first; }
bool is_middle(OpKind k) { return k == OpKind::send_middle || k == OpKind::write_middle; }
bool is_last(OpKind k) { return k == OpKind::send_last || k == OpKind::write_last; }
bool is_only(OpKind k) { return k == OpKind::send_only || k == OpKind::write_only; }

OpClass op_class(OpKind k) {
  switch (k) {
    case OpKind::write_first: case OpKind::write_middle: case OpKind::write_last: case OpKind::write_only:
    case OpKind::atomic_write: case OpKind::flush:
      return OpClass::write;
    case OpKind::read_request: return OpClass::read;
    case OpKind::compare_swap: case OpKind::fetch_add: return OpClass::atomic;
    default: return OpClass::send;
  }
}

// A READ re-issued from inside an outstanding READ's span (not its first PSN):
// the requester saw the responses before this PSN and not this one (IBA 9.7.6.1).
bool reissued_mid_read(const RequesterState& q, std::uint32_t psn) {
  for (const PendingRequest& r : q.pending)
    if (r.op == OpClass::read && psn_diff(psn, r.first) > 0 && psn_diff(r.last, psn) >= 0) return true;
  return false;
}

// A requester re-issues a READ from the first response PSN it lacks (IBA 9.7.6.1).
// The capture holds the answer to the last request for that PSN, intact, with no
// lower response after it (so the requester had all below it), on a response flow
// not reordered before the capture point lately (the responder's IPv4 IDs; without
// them the order is unknown): that answer was lost, or held up, after the capture point.
bool answer_lost_after(const RequesterState& q, const SeqPacket& p) {
  const AnswersInOrder* o = q.in_order.get();
  if (!o || p.ip_id < 0 || !o->got.holds(p.psn)) return false;
  const std::int32_t d = psn_diff(p.psn, o->reordered_psn), window = PsnWindow::kBits;
  return !o->reordered || d >= window || d <= -window;
}

// A resend with no NAK and no loss before it: the transport timer. Unless the
// capture holds no answer of the queue pair at all: then the NAKs and ACKs may
// have passed where the capture does not look (one direction mirrored, the
// other path of an ECMP pair), and the cause cannot be told.
ResendCause timer_cause(const RequesterState& q) {
  return q.answers_captured ? ResendCause::timer : ResendCause::no_answer_captured;
}

// Why a resend with no NAK before it was made.
ResendCause cause_without_nak(const RequesterState& q, const SeqPacket& p, const OpenLoss* loss) {
  // Go-back-N resends from the oldest unacknowledged request (IBA 9.7.6): a loss
  // open at or after this PSN is what the timer found missing.
  if (!loss)
    for (const OpenLoss& l : q.losses)
      if (!l.response && psn_diff(l.first, p.psn) >= 0 && psn_diff(l.first, q.high_next) < 0) loss = &l;
  if (loss) return loss->corrupt ? ResendCause::corrupt : ResendCause::request_loss;
  if (p.kind != OpKind::read_request) return timer_cause(q);
  if (q.loss_at(p.psn, true)) return ResendCause::response_loss;  // missing or corrupt here
  if (answer_lost_after(q, p)) return ResendCause::response_lost_after;
  // A READ whose response PSN the capture lacks while it holds later ones: the
  // responder answers in order, so that response was lost before the capture point.
  const bool response_missing = !q.answered.holds(p.psn) && q.answered.covers(p.psn);
  if (response_missing || reissued_mid_read(q, p.psn)) return ResendCause::response_loss;
  return timer_cause(q);
}

// A gap recovered by a resend whose original of `p.psn` comes now: sent before
// the packet that showed the gap, so it was late, not lost (its resend overtook it).
// The gap may still be open (other PSNs of it missing) or recovered already.
const OpenLoss* recovered_late(const RequesterState& q, const SeqPacket& p) {
  auto late_in = [&](const OpenLoss& l) {
    return l.part_count && !l.corrupt && !l.resend_hole && !l.response && l.contains(p.psn) &&
           p.ts - l.ts < kIpIdClockSeconds && sent_before(p.ip_id, l.ip_id_at);
  };
  for (const OpenLoss& l : q.losses)
    if (late_in(l)) return &l;
  for (const OpenLoss& l : q.recovered)
    if (late_in(l)) return &l;
  return nullptr;
}

// The copy that first brought `p.psn` to the capture point, and every copy
// since, were sent after `p` (the sender's clock): `p` is an earlier copy,
// overtaken on the path by its resend.
bool overtaken_by_copies(const RequesterState& q, const SeqPacket& p) {
  if (p.ip_id < 0) return false;
  bool first_seen = false, later = true;
  q.recent.any([&](const RecentCopies::Copy& c) {
    if (c.psn != p.psn || c.ts <= 0) return false;
    first_seen = first_seen || c.first_seen;
    later = later && p.ts - c.ts < kIpIdClockSeconds && sent_before(p.ip_id, c.ip_id);
    return !later;
  });
  return first_seen && later;
}

// Sent before the pending NAK reached the requester (its IPv4 ID is not newer
// than the newest one captured before the NAK), so not the resend it asks for.
bool sent_before_nak(const RequesterState& q, const SeqPacket& p) {
  return p.ip_id >= 0 && q.nak_ip_id >= 0 && p.ts - q.nak_ts < kIpIdClockSeconds && !sent_before(q.nak_ip_id, p.ip_id);
}

// The sender's previous packet (the IPv4 ID before) is captured, carried the
// PSN before, and belongs to the last resend: this one goes on with that resend.
// So does a packet on the resend's run: as many IDs after the packet that started
// it as PSNs after its PSN (the sender sent the round with nothing else between the
// two hosts; its previous packet may be long out of the recent copies under heavy
// reordering). A new go-back-N round goes back in PSNs while its IDs go forward,
// so it is never on the run.
bool continues_episode(const RequesterState& q, const SeqPacket& p) {
  if (p.ip_id < 0 || q.episode_ip_id < 0 || p.ts - q.episode_ts > kIpIdClockSeconds) return false;
  if (p.ip_id != q.episode_ip_id && !sent_before(q.episode_ip_id, p.ip_id)) return false;
  const std::int32_t ids = (p.ip_id - q.episode_ip_id) & 0xFFFF;
  if (ids > 0 && ids == psn_diff(p.psn, q.episode_psn)) return true;
  // Or it falls inside the round in both orders: sent after the packet that started
  // it with a higher PSN, and before the round's newest packet with a lower PSN. A
  // round sends its PSNs in order; a new round (a NAK's) would be sent after all of it.
  if (sent_before(p.ip_id, q.episode_newest_ip_id) && psn_diff(p.psn, q.episode_psn) > 0 &&
      psn_diff(p.psn, q.episode_newest_psn) < 0)
    return true;
  const std::int32_t before = (p.ip_id - 1) & 0xFFFF;
  const std::uint32_t psn_before = (p.psn - 1) & kPsnMask;
  return q.recent.any([&](const RecentCopies::Copy& c) { return c.ip_id == before && c.psn == psn_before; });
}

// An older PSN than the next new one (IBA 9.7.5.2.2, 9.7.6): which kind of copy is it?
RequesterEvent classify_older(const RequesterState& q, const SeqPacket& p) {
  RequesterEvent e;
  const OpenLoss* loss = q.loss_at(p.psn, false);
  // Without an IPv4 ID, a copy right behind its original is the network's, unless
  // the requester has a reason to resend (a loss, a NAK, a resend under way).
  const double within = !loss && !q.nak_frame && !q.resending ? kTimeoutSilenceSeconds : -1;
  if (q.recent.has_copy(p.psn, p.ip_id, p.ts, within)) {
    e.step = ReqStep::duplicate;
    return e;
  }
  if (q.sent.holds(p.psn) && recovered_late(q, p)) {
    e.step = ReqStep::late_after_resend;
    return e;
  }
  if (q.sent.holds(p.psn) && overtaken_by_copies(q, p)) {
    e.step = ReqStep::late;  // the original, overtaken on the path by its own resend
    return e;
  }
  // A PSN the capture never held, sent before the packet that carried the
  // highest PSN: its first copy, overtaken on the path (a go-back-N resend of it
  // would be sent after every higher PSN's original). Late, whatever NAK came meanwhile.
  const bool unheld = q.sent.covers(p.psn) && !q.sent.holds(p.psn);
  const bool never_seen = loss && !loss->corrupt && !loss->resend_hole && unheld;
  // The IPv4 ID counter is shared by every flow between two hosts: trusted over a short time only.
  const bool clock_fresh = p.ts - q.high_ts < kIpIdClockSeconds;
  // Without a clock (IPv6, native IB), a gap filled with no NAK or resend under way is taken as late.
  const bool clock = never_seen && p.ip_id >= 0 && loss->ip_id_at >= 0;
  if ((unheld && clock_fresh && sent_before(p.ip_id, q.high_ip_id)) ||
      (never_seen && (clock ? sent_before(p.ip_id, loss->ip_id_at) : !q.nak_frame && !q.resending))) {
    e.step = ReqStep::late;
    return e;
  }
  e.step = ReqStep::resend;
  // A copy of a held PSN sent before the packet the last resend was first seen
  // at: part of that resend, overtaken on the path (even if the resend caught up).
  if (q.sent.holds(p.psn) && p.ts - q.episode_ts < kIpIdClockSeconds && sent_before(p.ip_id, q.episode_ip_id)) {
    e.step = ReqStep::resend_early;
    return e;
  }
  // During a resend, an older PSN than its cursor but after a NAK's PSN: the resend
  // that NAK asked for, whose first packets were overtaken on the path.
  // A NAK's resend starts by going back, so a packet whose sender's previous one
  // carried the PSN before goes on with the last resend instead.
  const bool nak = q.nak_frame && !sent_before_nak(q, p) && !continues_episode(q, p);
  const bool nak_resend_ahead =
      nak && q.resending && psn_diff(p.psn, q.nak_psn) > 0 && psn_diff(p.psn, q.resend_next) < 0;
  if (nak && (p.psn == q.nak_psn || !q.resending || nak_resend_ahead)) {
    // The resend the NAKs asked for; older than every NAKed PSN (and filling nothing): a delayed copy.
    if (psn_diff(p.psn, q.nak_first_psn) < 0 && !loss) e.step = ReqStep::stray;
    e.new_episode = true;
    e.cause = ResendCause::nak;
  } else if (q.resending) {
    // Continuing a resend; a NAK that arrived meanwhile waits for its own PSN.
    const std::int32_t c = psn_diff(p.psn, q.resend_next);
    // Sent before the packet this resend was first seen at: the same go-back-N, reordered on the path.
    if (c < 0 && !loss) e.step = sent_before(p.ip_id, q.episode_ip_id) ? ReqStep::resend_early : ReqStep::stray;
    if (c > 0) e.ahead = static_cast<std::uint32_t>(c);  // the resend skipped PSNs
  } else if (continues_episode(q, p)) {
    e.step = ReqStep::resend_early;  // the next packet of the last resend, sent right after one captured
  } else {
    e.new_episode = true;  // a resend without a NAK: the requester's timer, or a READ re-issued
    e.cause = cause_without_nak(q, p, loss);
  }
  return e;
}

OpenLoss loss_of(std::uint32_t first, std::uint32_t count, std::uint32_t remaining, const SeqPacket& at) {
  OpenLoss l;
  l.ip_id_at = at.ip_id;
  l.first = first;
  l.last = (first + count - 1) & kPsnMask;
  l.remaining = remaining;
  l.frame = at.frame;
  l.ts = at.ts;
  return l;
}

std::size_t open_loss(RequesterState& q, const OpenLoss& l) {
  if (q.losses.size() == kMaxOpenLosses) q.losses.erase(q.losses.begin());
  q.losses.push_back(l);
  return q.losses.size() - 1;
}

void close_loss(RequesterState& q, std::size_t i, const SeqPacket& at, SeqSink& sink) {
  const OpenLoss& l = q.losses[i];
  const double us = (at.ts - l.ts) * 1e6;
  if (l.resend_hole) {
    // recovered by a later resend: nothing more to say
  } else if (!l.corrupt) {
    if (l.late < l.reported) {  // else every PSN came late: reordered, nothing was recovered
      ++sink.stats().faults_for_update().gaps_recovered;
      sink.stats().recovery.add(us);
    }
  } else if (Anomaly* a = sink.anomaly(l.anomaly)) {
    a->duration_us = us;  // the corrupt packet's recovery
  }
  sink.relate(l.anomaly, at.frame);
  if (Anomaly* e = sink.anomaly(q.episode_anomaly)) e->duration_us = std::max(e->duration_us, us);
  // Its originals may still come, overtaken by the resend: kept a while to tell.
  if (!l.corrupt && !l.resend_hole && l.ip_id_at >= 0) {
    if (q.recovered.size() < kMaxRecovered)
      q.recovered.push_back(l);
    else
      q.recovered[q.recovered_next++ % kMaxRecovered] = l;
  }
  q.losses.erase(q.losses.begin() + static_cast<std::ptrdiff_t>(i));
}

// The part of the gap (the entry, or one split off it) whose range holds `x`.
OpenLoss::Part* part_holding(OpenLoss& l, std::uint32_t x) {
  for (std::uint8_t i = 0; i < l.part_count; ++i) {
    OpenLoss::Part& p = l.parts[i];
    if (psn_diff(x, p.first) >= 0 && psn_diff(p.last, x) >= 0) return &p;
  }
  return nullptr;
}

// The next PSN after `x` towards `last` that is still missing: not one that
// came inside the part earlier (while there was no room to split it).
std::uint32_t next_missing(const OpenLoss& l, std::uint32_t x, std::uint32_t last) {
  do x = (x + 1) & kPsnMask;
  while (x != last && l.came_inside(x));
  return x;
}
std::uint32_t previous_missing(const OpenLoss& l, std::uint32_t x, std::uint32_t first) {
  do x = (x - 1) & kPsnMask;
  while (x != first && l.came_inside(x));
  return x;
}

// A late PSN inside a part: the PSNs after it become a part of their own. With
// no room for another part it stays inside the range, off the part's count,
// and is remembered (a few) so that the range's ends skip it.
void split_part(OpenLoss& l, OpenLoss::Part& p, std::uint32_t x, SeqSink& sink) {
  if (l.part_count == l.parts.size()) {
    if (l.inside_count < l.inside.size()) l.inside[l.inside_count++] = x;
    return;
  }
  OpenLoss::Part upper{next_missing(l, x, p.last), p.last, SIZE_MAX, 0};
  std::uint32_t came = 0;
  for (std::uint8_t i = 0; i < l.inside_count; ++i)
    came += psn_diff(l.inside[i], upper.first) >= 0 && psn_diff(upper.last, l.inside[i]) >= 0;
  upper.missing = std::min(p.missing, static_cast<std::uint32_t>(psn_diff(upper.last, upper.first)) + 1 - came);
  p.last = previous_missing(l, x, p.first);
  p.missing -= upper.missing;
  if (const Anomaly* a = sink.anomaly(p.anomaly)) {
    Anomaly part = *a;
    part.expected_psn = upper.first;
    part.count = upper.missing;
    upper.anomaly = sink.add_part(part);
  }
  l.parts[l.part_count++] = upper;
}

}  // namespace

// PSN `x` of an open loss arrived late (reordered on the path): it is taken out
// of the gap entry that names it (the range trimmed at an end, or split in two
// around it), and out of the flow's missing PSNs. A gap whose every PSN came late
// is withdrawn: it was no loss; so is a part none of whose PSNs is missing any more.
bool unlose(OpenLoss& l, std::uint32_t x, SeqSink& sink) {
  OpenLoss::Part* p = part_holding(l, x);
  if (!p) return false;  // not named by the gap any more
  ++l.late;
  FlowSummary& s = sink.stats();
  if (s.faults().missing) --s.faults_for_update().missing;
  GapRevision r{l.frame, s.index, -1, 0};
  if (l.late == l.reported && s.faults().gaps) {
    --s.faults_for_update().gaps;
    r.gaps = -1;
  }
  sink.revise(r);
  if (Anomaly* a = sink.anomaly(p->anomaly)) a->late = true;
  if (p->missing) --p->missing;
  if (p->missing == 0 || p->first == p->last) {
    sink.retract(p->anomaly);
    *p = l.parts[--l.part_count];
    return true;
  }
  if (x == p->first) p->first = next_missing(l, x, p->last);
  else if (x == p->last) p->last = previous_missing(l, x, p->first);
  else split_part(l, *p, x, sink);
  if (Anomaly* a = sink.anomaly(p->anomaly)) {  // (after a split, which may have moved the log)
    a->expected_psn = p->first;
    a->count = p->missing;
  }
  return true;
}

void mark_seen(RequesterState& q, bool response, std::uint32_t psn, std::uint32_t span, const SeqPacket& at,
               SeqSink& sink, bool late) {
  PsnWindow& w = response ? q.answered : q.sent;
  const std::uint32_t n = std::min(span, PsnWindow::kBits);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t x = (psn + i) & kPsnMask;
    const bool fresh = w.mark(x);
    if (q.losses.empty() || at.corrupt) continue;
    for (std::size_t j = 0; j < q.losses.size();) {
      OpenLoss& l = q.losses[j];
      const bool fills = l.response == response && l.contains(x) && (fresh || l.corrupt || l.resend_hole) && l.remaining;
      // The first copy of a PSN called lost, sent before the packet that showed the gap: it was only late.
      if (fills && fresh && !l.corrupt && !l.resend_hole &&
          (l.ip_id_at >= 0 && at.ip_id >= 0 ? sent_before(at.ip_id, l.ip_id_at) : late))
        unlose(l, x, sink);
      // A copy sent before the packet that showed the hole was only late: not lost after all.
      if (fills && l.resend_hole && sent_before(at.ip_id, l.ip_id_at) && sink.stats().faults().lost_resends)
        --sink.stats().faults_for_update().lost_resends;
      if (fills && --l.remaining == 0)
        close_loss(q, j, at, sink);
      else
        ++j;
    }
  }
}

namespace {

void report_copy(AnomalyKind kind, const RequesterState& q, const SeqPacket& p, SeqSink& sink) {
  Anomaly a{kind};
  a.frame = p.frame;
  a.psn = p.psn;
  a.expected_psn = q.high_next;
  if (kind == AnomalyKind::psn_out_of_order)
    if (const OpenLoss* l = q.loss_at(p.psn, false)) a.relate(l->frame);
  sink.report(a);
}

// The highest PSN sent before the resend `p`: answers up to it answer its copies.
// A resend delayed on the path may have been sent before the highest PSN seen
// (the sender's clock says so): then only what the clock puts before it counts.
std::uint32_t highest_sent_before(const RequesterState& q, const SeqPacket& p) {
  const std::uint32_t high = (q.high_next - 1) & kPsnMask;
  if (!sent_before(p.ip_id, q.high_ip_id) || p.ts - q.high_ts > kIpIdClockSeconds) return high;
  std::uint32_t best = p.psn;
  q.recent.any([&](const RecentCopies::Copy& c) {
    if (c.ts > 0 && p.ts - c.ts < kIpIdClockSeconds && sent_before(c.ip_id, p.ip_id) && psn_diff(c.psn, best) > 0 &&
        psn_diff(high, c.psn) >= 0)
      best = c.psn;
    return false;  // look at every copy
  });
  return best;
}

void open_spurious_check(RequesterState& q, const SeqPacket& p, SeqSink& sink) {
  if (q.spur.open && q.spur.psn == p.psn && !q.spur.closing) {
    ++q.spur.copies;
    return;
  }
  if (q.spur.open) spurious_verdict(q, sink, true);
  // The original may have been answered already (the requester was slow to see it).
  const std::uint32_t answered = q.acked_valid && psn_diff(q.acked_through, p.psn) >= 0 ? 1 : 0;
  q.spur = SpuriousCheck{true, p.psn, 2, answered, highest_sent_before(q, p), false, p.frame,
                         p.kind == OpKind::read_request};
  // The original's ACK captured corrupt (after the last intact answer): dropped by the requester.
  const bool covers = psn_diff(q.corrupt_ack_psn, p.psn) >= 0 && psn_diff(q.spur.limit, q.corrupt_ack_psn) >= 0;
  if (q.corrupt_ack_frame && covers && !answered) q.spur.corrupt_answer = q.corrupt_ack_frame;
}

void report_episode(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, SeqSink& sink) {
  FlowSummary& s = sink.stats();
  ++s.faults_for_update().retransmission_episodes;
  const bool response = e.cause == ResendCause::response_loss;
  OpenLoss* loss = q.loss_at(p.psn, response);
  // No NAK and no response gap seen before it: the requester's transport timer,
  // if the capture sees the responder's direction at all (else a NAK may have passed unseen).
  if (e.cause != ResendCause::nak && !(response && loss) && q.answers_captured)
    ++s.faults_for_update().timeout_retransmissions;
  Anomaly a{AnomalyKind::retransmission};
  a.frame = p.frame;
  a.psn = p.psn;
  a.expected_psn = q.high_next;
  a.count = 1;
  a.cause = e.cause;
  if (q.nak_frame) a.relate(q.nak_frame);
  if (!loss && !response)
    for (OpenLoss& l : q.losses)
      if (!l.response && psn_diff(l.first, p.psn) >= 0) {
        loss = &l;
        break;
      }
  if (loss) a.relate(loss->frame);
  if (loss && loss->corrupt) a.cause = ResendCause::corrupt;  // what the NAK answered: a bit error
  q.episode_anomaly = sink.report(a);
  // The response stream's gap is recovered on the other flow: say there what answered it.
  if (loss && response) sink.relate(loss->anomaly, p.frame);
}

// The newest packet (by the sender's clock) of the resend in progress.
void note_episode_packet(RequesterState& q, const SeqPacket& p) {
  if (p.ip_id < 0 || (q.episode_newest_ip_id >= 0 && !sent_before(q.episode_newest_ip_id, p.ip_id))) return;
  q.episode_newest_ip_id = p.ip_id;
  q.episode_newest_psn = p.psn;
}

void apply_resend(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, SeqSink& sink) {
  sink.verdict().retransmission = true;
  if (e.new_episode) {
    // A new go-back-N episode starts at this PSN.
    q.resending = true;
    q.msg.kind = MessageState::Kind::unknown;  // go-back-N may restart in the middle of a message
    // A timer resend of what the responder lacks (its earlier copy came out of
    // sequence, or never) was needed: only one of what it holds may be needless.
    // Judged by the answers to come (spurious_verdict), also while none has been captured yet.
    const bool timer = e.cause == ResendCause::timer || e.cause == ResendCause::no_answer_captured;
    q.spurious_episode = timer && q.responder.holds(p.psn);
    q.resend_after_nak = q.nak_frame != 0;
    q.episode_anomaly = SIZE_MAX;
    q.episode_ip_id = p.ip_id;
    q.episode_ts = p.ts;
    q.episode_psn = p.psn;
    q.episode_newest_ip_id = -1;
    if (q.spurious_episode) open_spurious_check(q, p, sink);
    else report_episode(q, e, p, sink);
    q.nak_frame = 0;
  } else if (Anomaly* a = sink.anomaly(q.episode_anomaly)) {
    ++a->count;
  }
  note_episode_packet(q, p);
  if (q.spurious_episode && (p.kind == OpKind::read_request || q.responder.holds(p.psn))) {
    ++sink.stats().faults_for_update().spurious_retransmissions;
    // A READ is re-issued in go-back-N rounds whose responses overlap: only the
    // count of answers (spurious_verdict) can tell, so the packet is not called spurious.
    sink.verdict().spurious_retransmission = p.kind != OpKind::read_request;
    if (sink.verdict().spurious_retransmission && q.spur.open) q.spur.last_flagged = p.frame;
  } else {
    ++sink.stats().faults_for_update().retransmissions;
  }
}

// A packet with a bad CRC at the next PSN: the capture holds it (so it is not
// lost), its receiver drops it and NAKs the next one; kept open until its resend.
void apply_corrupt(RequesterState& q, const SeqPacket& p, SeqSink& sink) {
  open_corrupt(q, false, p);
  mark_seen(q, false, p.psn, p.span, p, sink);
  q.msg.kind = MessageState::Kind::unknown;
  const std::uint32_t next = (p.psn + p.span) & kPsnMask;
  if (q.resending && p.psn == q.resend_next) {
    q.resend_next = next;  // a corrupt copy in a resend: the resend goes on past it
    if (psn_diff(next, q.high_next) >= 0) q.resending = false;
    return;
  }
  q.high_next = next;
  if (!q.resending) q.resend_next = q.high_next;
}

// Moves the cursors past a request that took its place in the sequence (IBA 9.7.2, 9.7.5.2.2):
// `high_next` one past the highest PSN seen, `resend_next` the next PSN a resend must carry.
void advance(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, bool unplaced, SeqSink& sink) {
  const std::uint32_t next = (p.psn + p.span) & kPsnMask;
  if (e.step == ReqStep::resend) {
    q.resend_next = next;
    if (psn_diff(next, q.high_next) >= 0) q.resending = false;  // the resend caught up
  } else if (q.resending) {
    // New data while a resend was incomplete: what it did not resend is lost again
    // (only what the capture does not hold: nothing, unless a NAK made it needed again).
    const std::int32_t left = psn_diff(q.high_next, q.resend_next);
    if (left > 0 && e.step != ReqStep::restart && !(unplaced && left == 1)) {
      report_skipped(q, false, q.resend_next, static_cast<std::uint32_t>(left), p, sink);
      q.msg.kind = MessageState::Kind::unknown;  // what came before this packet is incomplete
    }
    q.resending = false;
  }
  if (e.step == ReqStep::restart || psn_diff(next, q.high_next) > 0) {
    q.high_next = next;
    q.high_ip_id = p.ip_id;
    q.high_ts = p.ts;
  }
  if (!q.resending) q.resend_next = q.high_next;
  if (q.spur.open && psn_diff(q.resend_next, q.spur.limit) > 0) q.spur.complete = true;
}

void remember(RequesterState& q, const SeqPacket& p) {
  if (!p.span_known) {
    q.read_span_unknown = true;
    q.read_psn = p.psn;
    q.read_len = p.read_len;
  }
  q.recent.add(p.psn, p.ip_id, p.ts);
  // Outstanding requests, matched by responses on the reverse flow. Only the
  // packet that ends a message (or a READ / atomic) is answered as an operation.
  if (is_first(p.kind) || is_middle(p.kind)) return;
  if (q.pending.size() == kMaxPending) q.pending.pop_front();
  q.pending.push_back(PendingRequest{p.psn, (p.psn + p.span - 1) & kPsnMask, p.frame, p.ts_ns, op_class(p.kind), p.ack_req,
                                     p.kind == OpKind::read_request ? p.read_len : 0});
}

}  // namespace

OpenLoss* RequesterState::loss_at(std::uint32_t psn, bool response) {
  for (OpenLoss& l : losses)
    if (l.response == response && l.contains(psn)) return &l;
  return nullptr;
}

void RequesterState::restart(std::uint32_t psn) {
  started = true;
  high_next = resend_next = psn & kPsnMask;
  resending = false;
  nak_frame = 0;
  losses.clear();
  recovered.clear();
  recovered_next = 0;
  pending.clear();
  sent.reset(psn);
  answered.reset(psn);
  in_order.reset();
  read_span_unknown = false;
}

std::uint32_t before_request(RequesterState& q, const SeqPacket& p, SeqSink& sink) {
  std::uint32_t learned = 0;
  if (q.read_span_unknown && !p.corrupt) {
    q.read_span_unknown = false;
    const std::int32_t k = psn_diff(p.psn, q.read_psn);
    const std::uint32_t most = std::max<std::uint32_t>((q.read_len + 255) / 256, 1);
    if (k >= 1 && static_cast<std::uint32_t>(k) <= most) {
      mark_seen(q, false, q.read_psn, static_cast<std::uint32_t>(k), p, sink);
      if (psn_diff(p.psn, q.high_next) > 0) q.high_next = p.psn;
      if (!q.resending) q.resend_next = q.high_next;
      learned = static_cast<std::uint32_t>(k);
    }
  }
  // A READ is answered by its data, which comes before the next request is sent
  // in the cases that matter (ping-pong); other requests wait for a newer ACK.
  if (q.spur.open && q.spur.is_read && q.started && psn_diff(p.psn, q.spur.psn) > 0 && psn_diff(p.psn, q.high_next) >= 0)
    spurious_verdict(q, sink, true);
  return learned;
}

RequesterEvent classify(const RequesterState& q, const SeqPacket& p) {
  RequesterEvent e;
  if (p.corrupt) {
    // A corrupt packet right at the next PSN (new, or of the resend) is taken for
    // what it says it is; one a little ahead is held (the PSNs before it may be lost).
    const bool next = p.psn == q.high_next || (q.resending && p.psn == q.resend_next);
    const std::int32_t d = psn_diff(p.psn, q.high_next);
    e.step = !q.started || !p.span_known ? ReqStep::corrupt_other
             : next                      ? ReqStep::corrupt
             : d > 0 && d < kCorruptAhead ? ReqStep::corrupt_ahead
                                          : ReqStep::corrupt_other;
    return e;
  }
  if (!q.started) {
    e.step = ReqStep::restart;
    return e;
  }
  const std::int32_t d = psn_diff(p.psn, q.high_next);
  if (d > kRestartJump || d < -kRestartJump) {
    e.step = ReqStep::restart;
  } else if (d >= 0) {
    e.step = d ? ReqStep::gap : ReqStep::in_order;
    e.ahead = static_cast<std::uint32_t>(d);
  } else {
    e = classify_older(q, p);
  }
  return e;
}

namespace {

// A late original of PSNs a resend already counted as lost and resent: the loss
// it belonged to is undone for them; the stream goes on from where it was.
[[gnu::always_inline]] inline void apply_late_after_resend(RequesterState& q, const SeqPacket& p, SeqSink& sink) {
  ++sink.stats().faults_for_update().out_of_order;
  sink.verdict().out_of_order = true;
  auto& l = const_cast<OpenLoss&>(*recovered_late(q, p));
  Anomaly a{AnomalyKind::psn_out_of_order};
  a.frame = p.frame;
  a.psn = p.psn;
  a.expected_psn = q.high_next;
  a.relate(l.frame);
  sink.report(a);
  for (std::uint32_t i = 0; i < p.span; ++i) unlose(l, (p.psn + i) & kPsnMask, sink);
  if (l.late == l.reported && sink.stats().faults().gaps_recovered) --sink.stats().faults_for_update().gaps_recovered;
  q.recent.add(p.psn, p.ip_id, p.ts);
}

// An older copy than the resend in progress (a delayed packet): the sender did
// send it again, but it changes nothing in the sequence. Needless only if the
// responder took an earlier copy; else (the earlier copies came out of
// sequence and were discarded) it is the copy the responder needed.
[[gnu::always_inline]] inline void apply_stray(RequesterState& q, const SeqPacket& p, SeqSink& sink) {
  PacketVerdict& v = sink.verdict();
  v.retransmission = true;
  v.spurious_retransmission = q.responder.holds(p.psn);
  FlowFaults& f = sink.stats().faults_for_update();
  ++(v.spurious_retransmission ? f.spurious_retransmissions : f.retransmissions);
}

void apply_step(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, SeqSink& sink) {
  // One PSN skipped right after a corrupt packet whose PSN could not be trusted:
  // the capture holds that packet, most likely with a damaged PSN. Not a loss.
  const bool unplaced = q.corrupt_unplaced && !p.corrupt;
  if (!p.corrupt) q.corrupt_unplaced = false;
  PacketVerdict& v = sink.verdict();
  v.expected_psn = !q.started ? -1 : static_cast<std::int64_t>(q.resending ? q.resend_next : q.high_next);
  // A packet the message check does not see breaks the run it checks (check_message).
  if (e.step != ReqStep::restart && e.step != ReqStep::in_order && e.step != ReqStep::gap && e.step != ReqStep::resend)
    q.msg.next_valid = false;
  switch (e.step) {
    case ReqStep::corrupt_other: q.corrupt_unplaced = true; return;
    case ReqStep::corrupt: apply_corrupt(q, p, sink); return;
    case ReqStep::corrupt_ahead:
      q.corrupt_unplaced = false;
      open_corrupt(q, false, p);
      mark_seen(q, false, p.psn, p.span, p, sink);  // held: no gap will name these PSNs
      return;
    case ReqStep::duplicate:
      ++sink.stats().faults_for_update().duplicates;
      v.duplicate = true;
      report_copy(AnomalyKind::psn_duplicate, q, p, sink);
      return;  // a copy: the sequence state is unchanged
    case ReqStep::late:
      ++sink.stats().faults_for_update().out_of_order;
      v.out_of_order = true;
      report_copy(AnomalyKind::psn_out_of_order, q, p, sink);
      mark_seen(q, false, p.psn, p.span, p, sink, true);
      q.recent.add(p.psn, p.ip_id, p.ts);  // to know its network copies
      return;  // a late original: the stream goes on from where it was
    case ReqStep::late_after_resend: apply_late_after_resend(q, p, sink); return;
    case ReqStep::resend_early:
      // Part of the go-back-N under way, overtaken on the path by later packets of it.
      apply_resend(q, e, p, sink);
      mark_seen(q, false, p.psn, p.span, p, sink);
      q.recent.add(p.psn, p.ip_id, p.ts);
      return;
    case ReqStep::stray: apply_stray(q, p, sink); return;
    case ReqStep::restart:
      if (q.spur.open) spurious_verdict(q, sink, false);  // a new incarnation of the QP
      q.restart(p.psn);
      q.msg.kind = MessageState::Kind::unknown;
      break;
    case ReqStep::gap:
      // New PSNs beyond anything seen: those in between never passed the capture point.
      if (!(unplaced && e.ahead == 1)) report_loss(q, false, q.high_next, e.ahead, p, sink);
      q.msg.kind = MessageState::Kind::unknown;
      break;
    case ReqStep::resend:
      apply_resend(q, e, p, sink);
      if (e.ahead) {
        // Skipped by the resend: lost (again) before the capture point, unless the capture holds them.
        if (!(unplaced && e.ahead == 1)) report_skipped(q, false, q.resend_next, e.ahead, p, sink);
        q.msg.kind = MessageState::Kind::unknown;
      }
      break;
    case ReqStep::in_order: break;
  }
  mark_seen(q, false, p.psn, p.span, p, sink);
  advance(q, e, p, unplaced, sink);
  remember(q, p);
}

// A READ request the responder gets (original, re-issue or copy): it answers its
// PSNs again, so what was captured of them before answers an older request.
void asked(RequesterState& q, const SeqPacket& p) {
  if (!q.in_order) {
    q.in_order = std::make_unique<AnswersInOrder>();
    q.in_order->got.reset(p.psn);
  }
  const std::uint32_t n = std::min(p.span, PsnWindow::kBits);
  for (std::uint32_t i = 0; i < n; ++i) q.in_order->got.forget((p.psn + i) & kPsnMask);
}

}  // namespace

void apply(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, SeqSink& sink) {
  const bool fresh = !p.corrupt && (!q.started || e.step == ReqStep::restart || !q.sent.holds(p.psn));
  // Marked by the packet's add() (every step that takes a fresh PSN adds it), else here.
  if (fresh) q.recent.arm_first_seen();
  apply_step(q, e, p, sink);
  if (q.recent.first_seen_armed()) q.recent.mark_first_seen(p.psn, p.ip_id);
  const bool stale = p.ts - q.newest_ts > kIpIdClockSeconds;
  if (p.ip_id >= 0 && (q.newest_ip_id < 0 || stale || sent_before(q.newest_ip_id, p.ip_id))) {
    q.newest_ip_id = p.ip_id;
    q.newest_ts = p.ts;
  }
  if (e.step == ReqStep::restart) q.responder = ResponderView{};
  if (p.corrupt) return;  // dropped by its receiver
  q.responder.takes(p.psn, p.span);
  if (p.kind == OpKind::read_request) asked(q, p);
}

void note_answer(RequesterState& q, const SeqPacket& p, const RecentCopies::Copy* prev) {
  if (!q.in_order) return;
  AnswersInOrder& o = *q.in_order;
  if (prev && p.ts - prev->ts < kIpIdClockSeconds && sent_before(p.ip_id, prev->ip_id)) {
    o.reordered = true;
    o.reordered_psn = p.psn;
  }
  // Higher PSNs captured before it may have reached the requester before it: not
  // taken then. (No PSN above the last one captured is held, so that bounds it.)
  const std::int32_t above = std::min<std::int32_t>(o.any ? psn_diff(o.last, p.psn) : 0, PsnWindow::kBits);
  for (std::int32_t i = 1; i <= above; ++i) o.got.forget((p.psn + i) & kPsnMask);
  o.got.mark(p.psn);
  o.any = true;
  o.last = p.psn;
}

void open_corrupt(RequesterState& q, bool response, const SeqPacket& p) {
  OpenLoss l = loss_of(p.psn, p.span, std::min(p.span, PsnWindow::kBits), p);
  l.anomaly = p.anomaly;
  l.corrupt = true;
  l.response = response;
  open_loss(q, l);
}

namespace {

// Lost before the capture point, by the rule: the capture does not hold it
// since its last use, and no open loss holds it already.
bool lost_here(const RequesterState& q, const PsnWindow& w, std::uint32_t psn, bool response) {
  return !w.holds(psn) && !q.loss_at(psn, response);
}

}  // namespace

bool report_loss(RequesterState& q, bool response, std::uint32_t first, std::uint32_t count, const SeqPacket& at,
                 SeqSink& sink) {
  const PsnWindow& w = response ? q.answered : q.sent;
  std::uint32_t missing = count;
  if (count <= PsnWindow::kBits) {
    missing = 0;
    for (std::uint32_t i = 0; i < count; ++i) missing += lost_here(q, w, (first + i) & kPsnMask, response);
    if (!missing) return false;
    while (!lost_here(q, w, first, response)) first = (first + 1) & kPsnMask, --count;
    while (!lost_here(q, w, (first + count - 1) & kPsnMask, response)) --count;
  }
  FlowFaults& f = sink.stats().faults_for_update();
  ++f.gaps;
  f.missing += missing;
  // A packet flagged with a gap says where the gap starts (not the cursor of a
  // resend under way; a READ response that opens a new response has no expected PSN of its own).
  if (sink.verdict().expected_psn < 0 || !sink.verdict().gap) sink.verdict().expected_psn = first;
  sink.verdict().gap += missing;
  Anomaly a{AnomalyKind::psn_gap};
  a.frame = at.frame;
  a.psn = at.psn;
  a.expected_psn = first;
  a.count = missing;
  const std::size_t handle = sink.report(a);
  if (count > PsnWindow::kBits / 2) return true;  // too wide to follow its recovery
  OpenLoss l = loss_of(first, count, missing, at);
  l.anomaly = handle;
  l.reported = missing;
  l.parts[0] = OpenLoss::Part{l.first, l.last, handle, missing};
  l.part_count = 1;
  l.response = response;
  open_loss(q, l);
  return true;
}

void report_skipped(RequesterState& q, bool response, std::uint32_t first, std::uint32_t count, const SeqPacket& at,
                    SeqSink& sink) {
  report_loss(q, response, first, count, at, sink);
  if ((!response && !q.resend_after_nak) || count > PsnWindow::kBits) return;
  // Re-sent after a NAK (the responder discarded them, IBA 9.7.5.2.2) or for a
  // re-issued READ, but missing here, though an earlier copy passed. Not a lost
  // PSN (the capture holds it), but what a NAK or re-issue answers; open until resent.
  const std::uint32_t held = count - (response ? q.answered : q.sent).not_held(first, count);
  if (!held) return;
  sink.stats().faults_for_update().lost_resends += held;
  OpenLoss l = loss_of(first, count, held, at);
  l.resend_hole = true;
  l.response = response;
  open_loss(q, l);
}

void check_message(RequesterState& q, const RequesterEvent& e, const SeqPacket& p, const MessageFacts& m, SeqSink& sink) {
  const OpKind k = p.kind;
  auto report = [&](AnomalyKind kind, std::int64_t expected, std::uint64_t got) {
    Anomaly a{kind};
    a.frame = p.frame;
    a.psn = p.psn;
    if (kind == AnomalyKind::bad_opcode_sequence) {
      ++sink.stats().faults_for_update().bad_opcode_sequence;
    } else {
      ++sink.stats().faults_for_update().length_mismatches;
      a.expected_psn = expected;
      a.count = static_cast<std::uint32_t>(got);
    }
    sink.report(a);
  };
  using Kind = MessageState::Kind;
  const bool checkable = (e.step == ReqStep::in_order || e.step == ReqStep::resend) && !m.truncated &&
                         q.msg.next_valid && q.msg.next == p.psn;
  const Kind kind = (k == OpKind::send_first || k == OpKind::send_middle || k == OpKind::send_last) ? Kind::send : Kind::write;
  if (checkable) {
    const bool in_msg = q.msg.kind == Kind::send || q.msg.kind == Kind::write;
    if (is_first(k) || is_only(k) || k == OpKind::read_request || k == OpKind::compare_swap || k == OpKind::fetch_add) {
      if (in_msg) report(AnomalyKind::bad_opcode_sequence, 0, 0);
    } else if ((is_middle(k) || is_last(k)) && q.msg.kind != Kind::unknown && q.msg.kind != kind) {
      report(AnomalyKind::bad_opcode_sequence, 0, 0);
    }
    const bool full = is_first(k) || is_middle(k);
    if (full && m.pmtu && m.payload_len != m.pmtu && m.flow_pmtu == m.pmtu) report(AnomalyKind::payload_length_mismatch, m.pmtu, m.payload_len);
    if ((m.payload_len + m.pad) % 4 != 0 && m.carries_payload)
      report(AnomalyKind::payload_length_mismatch, 0, m.payload_len);
  }
  if (is_first(k)) {
    q.msg = MessageState{.bytes = m.payload_len, .reth_len = k == OpKind::write_first ? m.reth_len : 0, .kind = kind};
  } else if (is_middle(k)) {
    q.msg.bytes += m.payload_len;
  } else if (is_last(k)) {
    if (q.msg.kind == Kind::write && checkable && q.msg.bytes + m.payload_len != q.msg.reth_len)
      report(AnomalyKind::payload_length_mismatch, q.msg.reth_len, q.msg.bytes + m.payload_len);
    q.msg.kind = Kind::none;
  } else {
    if (k == OpKind::write_only && checkable && m.payload_len != m.reth_len) report(AnomalyKind::payload_length_mismatch, m.reth_len, m.payload_len);
    q.msg.kind = Kind::none;
  }
  q.msg.next = (p.psn + p.span) & kPsnMask;
  q.msg.next_valid = true;
}

void spurious_verdict(RequesterState& q, SeqSink& sink, bool conclusive) {
  q.spur.open = false;
  // No answer of the queue pair captured at all: the capture may not see the
  // responder's direction, so neither "spurious" nor "an ACK was lost" can be told.
  const bool unseen = !q.answers_captured;
  if (!conclusive && !unseen) return;            // the capture ended before the answers could come: no verdict
  if (q.spur.answers >= q.spur.copies) return;   // every copy was answered: nothing was lost
  // An answer went missing before the capture point: the resend recovered a loss.
  FlowSummary& s = sink.stats();
  const std::uint64_t resent = q.spur.copies - 1;
  FlowFaults& f = s.faults_for_update();
  f.spurious_retransmissions -= std::min<std::uint64_t>(f.spurious_retransmissions, resent);
  f.retransmissions += resent;
  ++f.retransmission_episodes;
  if (!unseen) ++f.timeout_retransmissions;
  // The packets called spurious as they were read were needed after all.
  if (q.spur.last_flagged) sink.revise(SpuriousRevision{q.spur.frame, q.spur.last_flagged, 0});
  Anomaly a{AnomalyKind::retransmission};
  a.frame = q.spur.frame;
  a.psn = q.spur.psn;
  a.count = static_cast<std::uint32_t>(resent);
  if (unseen) {
    a.cause = ResendCause::no_answer_captured;
  } else if (q.spur.corrupt_answer) {
    a.cause = ResendCause::answer_corrupt;
    a.relate(q.spur.corrupt_answer);
  } else {
    a.expected_psn = -2;  // marks "the ACK was lost" for the explanation
  }
  sink.report(a);
}

}  // namespace rdmadiag::decode
