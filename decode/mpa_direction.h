// The framing mode of one direction of a TCP connection that may carry MPA
// (RFC 5044), as a small state machine over what the byte machinery of the
// iWARP pass (iwarp_analysis.cpp: buffer, FPDU cutting, marker removal,
// boundary hunting) finds at the head of the stream:
//  - section 7.1: a stream that starts at the SYN begins with the MPA Request
//    (initiator) or Reply (responder); FPDUs follow the Request only once the
//    Reply accepted (the initiator waits for it), follow an accepting Reply at
//    once, and never follow a Reject;
//  - section 4 (FPDU format) and 4.3 (markers): in FPDU mode every unit is an
//    FPDU; bytes that cannot be one mean the framing is lost (a wrong marker is
//    reported but does not lose it);
//  - without the negotiation (a capture that starts mid-connection, or bytes
//    lost to the capture: after a TCP hole the stream cannot be followed until
//    an FPDU boundary is found again) the boundary is hunted for; a stream
//    hunted long without one was never MPA.
// DDP sequencing (ddp_sequence.h) restarts with the framing: MSNs known (1 on
// every queue, RFC 5041 section 5.3) after the negotiation, unknown after a
// resync. classify() is pure; apply() changes the state and reports through a
// narrow sink (the anomaly log and the DDP state are the owner's).
#pragma once
#include <cstdint>

namespace rdmadiag::decode {

enum class MpaMode : std::uint8_t {
  start,        // nothing of the stream seen yet
  negotiation,  // an MPA Request/Reply is at the head
  await_reply,  // the initiator after its Request: FPDUs only after the peer's Reply
  fpdu,         // framed: FPDUs back to back
  hunting,      // looking for an FPDU boundary
  not_iwarp,    // not MPA: ignored from here on
};

// What was found at the head of a direction's stream (or, for the peer_*
// units, what the other direction's Reply settled for this one).
struct MpaUnit {
  enum class Kind : std::uint8_t {
    start_negotiation,   // the first bytes are an MPA key (mpa_classify_start)
    start_mid_stream,    // no key, not from the SYN: the framing must be found
    start_not_mpa,       // from the SYN and no key: not MPA
    request,             // a well-formed MPA Request
    reply_accepted,      // a well-formed MPA Reply that accepts (mpa_settle)
    reply_rejected,      // a well-formed MPA Reply with R set
    negotiation_malformed,
    negotiation_not_captured,  // the snap length cut a Request/Reply's header (also said to a waiting initiator)
    peer_accepted,       // to the initiator: the responder's Reply accepted
    peer_rejected,       // to the initiator: the responder's Reply rejected
    reply_overdue,       // the initiator's bytes after its Request outgrew the buffer, no Reply seen
    fpdu,                // an FPDU cut at the head (its CRC is not framing's business)
    not_an_fpdu,         // the bytes at the head cannot be an FPDU
    boundary_found,      // hunting found an FPDU boundary, `count` bytes on
    hunt_exhausted,      // hunted long without a boundary
    bytes_lost,          // a TCP hole that was never filled
  };
  Kind kind = Kind::fpdu;
  std::uint32_t count = 0;  // fpdu / not_an_fpdu: markers whose value was wrong; boundary_found: bytes skipped
};

struct MpaDirState {
  MpaMode mode = MpaMode::start;
  bool identified = false;     // the connection is known to carry MPA (a negotiation or a resync seen)
  bool reliable = false;       // framed from the negotiation and no byte lost since
  bool quiet_framing = false;  // markers at no stride found (said once): no framing report after that
};

struct MpaStep {
  MpaMode next = MpaMode::start;
  bool reliable = false;
  bool identifies = false;          // the connection is now known to carry MPA
  bool starts_framing = false;      // FPDU mode begins (framing settled or found)
  bool bad_framing = false;         // report mpa_bad_framing (count: wrong markers)
  bool resync = false;              // report iwarp_resync (count: bytes skipped)
  bool reset_ddp = false;           // DDP sequencing starts again ...
  bool msns_known = false;          // ... with MSN 1 on every queue (else nothing known)
  std::uint32_t count = 0;
};

class MpaDirSink {
 public:
  virtual ~MpaDirSink() = default;
  virtual void identified() = 0;
  virtual void framing_started() = 0;
  virtual void bad_framing(std::uint32_t wrong_markers) = 0;
  virtual void resync(std::uint32_t bytes_skipped) = 0;
  virtual void reset_ddp(bool msns_known) = 0;
};

MpaStep mpa_dir_classify(const MpaDirState& s, const MpaUnit& u);
void mpa_dir_apply(MpaDirState& s, const MpaStep& step, MpaDirSink& sink);

}  // namespace rdmadiag::decode
