#include "decode/ddp_sequence.h"

namespace rdmadiag::decode {

void ddp_reset(DdpDirState& s, bool msns_known) {
  for (auto& q : s.queues) {
    q = DdpQueueState{};
    q.known = msns_known;
  }
  s.write_open = false;
}

namespace {

// RFC 5041 section 5: MSN per queue, MO per message.
void classify_untagged(const DdpDirState& s, DdpEvent& e) {
  const DdpHeader& d = e.ddp;
  if (d.qn >= s.queues.size()) {
    e.step = DdpStep::untagged_other_queue;
    return;
  }
  const DdpQueueState& q = s.queues[d.qn];
  // A new MSN while a message was open: its last segment was not seen.
  e.new_message = !q.in_message || d.msn != q.msn;
  if (!e.new_message) {
    e.expected_mo = q.next_mo;
    if (d.mo != q.next_mo) e.findings |= kMoJump;
    return;
  }
  if (q.known && d.msn != q.expected_msn) {
    e.findings |= kMsnGap;
    e.expected_msn = q.expected_msn;
  }
  if (q.known && d.mo != 0) e.findings |= kMoAtStart;
}

// RFC 5040 section 5.2.1: the oldest outstanding Read Request.
void classify_read_response(const DdpDirState& s, DdpEvent& e) {
  if (s.reads.empty()) {
    e.step = DdpStep::read_response_unmatched;
    if (s.requests_complete) e.findings |= kUnmatchedResponse;
    return;
  }
  e.step = DdpStep::read_response;
  const DdpPendingRead& r = s.reads.front();
  e.expected_stag = r.rq.sink_stag;
  e.expected_to = r.rq.sink_to + r.done;
  if (e.ddp.stag != e.expected_stag || e.ddp.to != e.expected_to) e.findings |= kToJump;
  e.read_total = r.done + e.payload;
  if (e.ddp.last && e.read_total != r.rq.read_size) e.findings |= kReadSizeMismatch;
}

}  // namespace

DdpEvent ddp_classify(const DdpDirState& s, const DdpSegment& seg) {
  DdpEvent e;
  e.ddp = seg.ddp;
  e.payload = seg.payload_len;
  if (seg.ddp.opcode() == static_cast<std::uint8_t>(RdmapOpcode::terminate)) e.findings |= kTerminate;
  if (!seg.ddp.tagged) {
    e.step = DdpStep::untagged;
    classify_untagged(s, e);
  } else if (seg.ddp.opcode() == static_cast<std::uint8_t>(RdmapOpcode::read_response)) {
    classify_read_response(s, e);
  } else {
    e.step = DdpStep::rdma_write;
    e.expected_stag = s.write_stag;
    e.expected_to = s.write_next_to;
    if (s.write_open && seg.ddp.stag == s.write_stag && seg.ddp.to != s.write_next_to) e.findings |= kToJump;
  }
  return e;
}

namespace {

void apply_untagged(DdpDirState& s, const DdpEvent& e) {
  if (e.step != DdpStep::untagged) return;
  DdpQueueState& q = s.queues[e.ddp.qn];
  if (e.new_message) {
    q.in_message = true;
    q.msn = e.ddp.msn;
  }
  q.next_mo = e.ddp.mo + e.payload;
  if (e.ddp.last) {
    q.in_message = false;
    q.known = true;
    q.expected_msn = e.ddp.msn + 1;
  }
}

// Requests go to the peer (through the sink); Atomic Responses answer this direction's ring.
void apply_requests(DdpDirState& s, const DdpSegment& seg, DdpSink& sink) {
  if (seg.has_read_request) sink.read_requested(seg.read);
  if (seg.has_atomic_request) sink.atomic_requested(seg.atomic.request_id);
  if (!seg.has_atomic_response) return;
  for (auto it = s.atomics.begin(); it != s.atomics.end(); ++it) {
    if (it->id != seg.atomic_resp.request_id) continue;
    const DdpPendingAtomic answered = *it;
    s.atomics.erase(it);
    sink.atomic_answered(answered);
    return;
  }
}

void apply_read_response(DdpDirState& s, const DdpEvent& e, DdpSink& sink) {
  DdpPendingRead& r = s.reads.front();
  r.done = e.read_total;
  if (e.has(kToJump)) sink.finding(e, kToJump, &r);
  if (!e.ddp.last) return;
  if (e.has(kReadSizeMismatch)) sink.finding(e, kReadSizeMismatch, &r);
  const DdpPendingRead answered = r;
  s.reads.pop_front();
  sink.read_answered(answered);
}

}  // namespace

void ddp_apply(DdpDirState& s, const DdpEvent& e, const DdpSegment& seg, DdpSink& sink) {
  if (e.has(kTerminate)) sink.finding(e, kTerminate, nullptr);
  for (const DdpFinding f : {kMsnGap, kMoAtStart, kMoJump, kUnmatchedResponse})
    if (e.has(f)) sink.finding(e, f, nullptr);
  switch (e.step) {
    case DdpStep::untagged:
    case DdpStep::untagged_other_queue:
      apply_untagged(s, e);
      apply_requests(s, seg, sink);
      break;
    case DdpStep::read_response:
      apply_read_response(s, e, sink);
      break;
    case DdpStep::read_response_unmatched:
      break;
    case DdpStep::rdma_write:
      if (e.has(kToJump)) sink.finding(e, kToJump, nullptr);
      s.write_open = !e.ddp.last;
      s.write_stag = e.ddp.stag;
      s.write_next_to = e.ddp.to + e.payload;
      break;
  }
}

}  // namespace rdmadiag::decode
