#include "decode/mpa_direction.h"

namespace rdmadiag::decode {

namespace {

using Kind = MpaUnit::Kind;

// RFC 5044 section 7.1: the negotiation, and what the Reply settles for the initiator.
bool classify_negotiation(const MpaDirState& s, const MpaUnit& u, MpaStep& st) {
  switch (u.kind) {
    case Kind::request:  // the initiator sends FPDUs only after the Reply
      st.next = MpaMode::await_reply;
      st.identifies = true;
      return true;
    case Kind::reply_accepted:
      st.next = MpaMode::fpdu;
      st.identifies = st.starts_framing = true;
      st.reliable = st.reset_ddp = st.msns_known = true;
      return true;
    case Kind::reply_rejected:
      st.next = MpaMode::not_iwarp;
      st.identifies = true;
      return true;
    case Kind::negotiation_malformed:  // on a connection known to carry MPA, the framing is lost
      st.next = s.identified ? MpaMode::hunting : MpaMode::not_iwarp;
      st.bad_framing = s.identified;
      return true;
    case Kind::peer_accepted:
      if (s.mode != MpaMode::await_reply) return true;
      st.next = MpaMode::fpdu;
      st.starts_framing = true;
      st.reliable = st.reset_ddp = st.msns_known = true;
      return true;
    case Kind::peer_rejected:
      st.next = MpaMode::not_iwarp;
      return true;
    case Kind::reply_overdue:
    case Kind::negotiation_not_captured:  // nothing wrong seen: no report
      st.next = MpaMode::hunting;
      return true;
    default:
      return false;
  }
}

// RFC 5044 section 4: FPDUs back to back; a boundary found again after the framing was lost.
bool classify_framing(const MpaDirState& s, const MpaUnit& u, MpaStep& st) {
  switch (u.kind) {
    case Kind::fpdu:  // a wrong marker is reported, the FPDU still framed
      st.bad_framing = u.count != 0 && !s.quiet_framing;
      return true;
    case Kind::not_an_fpdu:
      st.next = MpaMode::hunting;
      st.reliable = false;
      st.bad_framing = !s.quiet_framing;
      return true;
    case Kind::boundary_found:  // nothing known of the MSNs: the bytes before were not followed
      st.next = MpaMode::fpdu;
      st.identifies = st.starts_framing = true;
      st.reliable = false;
      st.resync = !s.quiet_framing;
      st.reset_ddp = true;
      st.msns_known = false;
      return true;
    case Kind::hunt_exhausted:
      st.next = MpaMode::not_iwarp;
      return true;
    case Kind::bytes_lost:  // what was buffered cannot be completed: find the next boundary
      if (s.mode == MpaMode::not_iwarp) return true;
      if (s.mode != MpaMode::hunting) st.next = MpaMode::hunting;
      st.reliable = false;
      st.reset_ddp = true;
      st.msns_known = false;
      return true;
    default:
      return false;
  }
}

MpaMode start_mode(Kind k) {
  switch (k) {
    case Kind::start_negotiation: return MpaMode::negotiation;
    case Kind::start_mid_stream: return MpaMode::hunting;
    default: return MpaMode::not_iwarp;
  }
}

}  // namespace

MpaStep mpa_dir_classify(const MpaDirState& s, const MpaUnit& u) {
  MpaStep st;
  st.next = s.mode;
  st.reliable = s.reliable;
  st.count = u.count;
  if (u.kind == Kind::start_negotiation || u.kind == Kind::start_mid_stream || u.kind == Kind::start_not_mpa) {
    st.next = start_mode(u.kind);
    return st;
  }
  if (!classify_negotiation(s, u, st)) classify_framing(s, u, st);
  return st;
}

void mpa_dir_apply(MpaDirState& s, const MpaStep& step, MpaDirSink& sink) {
  if (step.identifies && !s.identified) {
    s.identified = true;
    sink.identified();
  }
  if (step.bad_framing) sink.bad_framing(step.count);
  if (step.resync) sink.resync(step.count);
  s.mode = step.next;
  s.reliable = step.reliable;
  if (step.reset_ddp) sink.reset_ddp(step.msns_known);
  if (step.starts_framing) sink.framing_started();
}

}  // namespace rdmadiag::decode
