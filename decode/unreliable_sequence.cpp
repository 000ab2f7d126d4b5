// Unreliable services: IBA Vol 1 §9.8.
#include "decode/unreliable_sequence.h"

namespace rdmadiag::decode {

namespace {

void report(AnomalyKind kind, const UnreliableState& u, const SeqPacket& p, SeqSink& sink, std::int64_t expected) {
  Anomaly a{kind};
  a.frame = p.frame;
  a.psn = p.psn;
  a.expected_psn = expected;
  a.dest_qp = p.dest_qp;  // a UD flow is keyed by its source, not by this
  if (kind == AnomalyKind::psn_out_of_order)
    for (const OpenLoss& g : u.gaps)
      if (g.contains(p.psn)) a.relate(g.frame);
  sink.report(a);
}

void open_gap(UnreliableState& u, const UnreliableEvent& e, const SeqPacket& p, SeqSink& sink) {
  FlowFaults& f = sink.stats().faults_for_update();
  ++f.gaps;
  f.missing += e.ahead;
  sink.verdict().gap += e.ahead;
  Anomaly a{AnomalyKind::psn_gap};
  a.frame = p.frame;
  a.psn = p.psn;
  a.expected_psn = u.expected;
  a.count = e.ahead;
  OpenLoss g;
  g.first = u.expected;
  g.last = (p.psn - 1) & kPsnMask;
  g.remaining = e.ahead;
  g.frame = p.frame;
  g.ts = p.ts;
  g.anomaly = sink.report(a);
  g.reported = e.ahead;
  g.parts[0] = OpenLoss::Part{g.first, g.last, g.anomaly, e.ahead};
  g.part_count = 1;
  if (u.gaps.size() == kMaxOpenLosses) u.gaps.erase(u.gaps.begin());
  u.gaps.push_back(g);
}

// A late packet fills its gap (UC never resends: what fills a gap was only
// late, not lost); the gap is withdrawn when all of it came.
void fill_gap(UnreliableState& u, const SeqPacket& p, SeqSink& sink) {
  for (std::size_t i = 0; i < u.gaps.size(); ++i) {
    OpenLoss& g = u.gaps[i];
    if (!g.contains(p.psn)) continue;
    unlose(g, p.psn, sink);
    if (--g.remaining == 0) u.gaps.erase(u.gaps.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

}  // namespace

UnreliableEvent classify(const UnreliableState& u, bool ud, const SeqPacket& p) {
  UnreliableEvent e;
  if (ud) {
    e.step = p.ip_id >= 0 && u.recent.has_copy(p.psn, p.ip_id, p.ts, -1) ? UnreliableStep::duplicate
                                                                          : UnreliableStep::ud_datagram;
    return e;
  }
  const std::int32_t d = u.started ? psn_diff(p.psn, u.expected) : 0;
  if (p.corrupt && (!u.started || d < 0 || d >= kUcCorruptAhead)) {
    e.step = UnreliableStep::corrupt_ignored;  // what it says cannot be checked
    return e;
  }
  if (!u.started || d > kRestartJump || d < -kRestartJump) {
    e.step = UnreliableStep::start;
  } else if (d > 0) {
    e.step = UnreliableStep::gap;
    e.ahead = static_cast<std::uint32_t>(d);
  } else if (d < 0) {
    // Seen before: a copy; else sent before the packets seen after it: late (reordered).
    e.step = u.seen.holds(p.psn) ? UnreliableStep::duplicate : UnreliableStep::late;
  }
  return e;
}

void apply(UnreliableState& u, const UnreliableEvent& e, const SeqPacket& p, SeqSink& sink) {
  PacketVerdict& v = sink.verdict();
  switch (e.step) {
    case UnreliableStep::corrupt_ignored:
      return;
    case UnreliableStep::ud_datagram:
      u.recent.add(p.psn, p.ip_id, p.ts);
      return;
    case UnreliableStep::duplicate:
      ++sink.stats().faults_for_update().duplicates;
      v.duplicate = true;
      report(AnomalyKind::psn_duplicate, u, p, sink, u.started ? static_cast<std::int64_t>(u.expected) : -1);
      return;  // a copy: the sequence is unchanged
    case UnreliableStep::late:
      ++sink.stats().faults_for_update().out_of_order;
      v.out_of_order = true;
      report(AnomalyKind::psn_out_of_order, u, p, sink, u.expected);
      fill_gap(u, p, sink);
      u.seen.mark(p.psn);
      return;
    case UnreliableStep::start:
      u.started = true;
      u.gaps.clear();
      u.seen.reset(p.psn);
      break;
    case UnreliableStep::gap:
      v.expected_psn = u.expected;
      open_gap(u, e, p, sink);
      break;
    case UnreliableStep::in_order:
      v.expected_psn = u.expected;
      break;
  }
  u.seen.mark(p.psn);
  u.expected = (p.psn + 1) & kPsnMask;
}

}  // namespace rdmadiag::decode
