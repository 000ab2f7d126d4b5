// The responder's packets on a reliable connection as seen at a capture point:
// IBA Vol 1 §9.7.5 (ACKs, which may cover many requests at once; NAKs and RNR
// NAKs, §9.7.5.2), §9.7.5.1.3 (READ responses: one PSN per response packet, in
// the requester's PSN space, consecutive within a response) and §9.7.5.1.2 /
// 9.9.4 (duplicate requests are answered again: re-sent READ responses carry the
// PSNs already used, an atomic is answered from the saved result).
//
// The cursor of the response stream lives on the responding flow; what the
// responses say about the requester's PSN space (acknowledged, answered, lost
// responses) goes into the requester's state (rc_requester.h), which may be
// unknown (an unpaired flow): then only the stream itself is checked.
#pragma once
#include <cstdint>

#include "decode/rc_requester.h"

namespace rdmadiag::decode {

struct ResponseCursor {
  bool in_read_response = false;  // between a READ response FIRST and its LAST
  std::uint32_t expected = 0;     // the next READ response PSN
  bool read_last_known = false;   // the last PSN of the READ being answered, when its request was seen
  std::uint32_t read_last = 0;
  RecentCopies recent;            // to recognise response copies made by the network
};

enum class RespStep : std::uint8_t {
  ack,              // acknowledges everything up to its PSN
  nak,              // NAK (PSN sequence error or an error) or RNR NAK
  ignored,          // a reserved AETH syndrome, or nothing to sequence
  read_data,        // a new READ response packet
  read_gap,         // READ response PSNs skipped (within a response, or its tail): lost before the capture point
  duplicate,        // a READ response or atomic ACK copied by the network (the same IPv4 ID)
  atomic_ack,       // the answer to an atomic
  atomic_replay,    // an atomic answered again (its resend)
  read_corrupt,     // a READ response with a bad CRC at the next PSN: held (not lost), its requester drops it
  answer_corrupt,   // an ACK or atomic ACK with a bad CRC: its requester drops it (a timer resend may follow)
};

struct ResponseEvent {
  RespStep step = RespStep::ignored;
  std::uint32_t first = 0;    // read_gap: the first PSN skipped
  std::uint32_t missing = 0;  // read_gap: PSNs skipped
  bool resent = false;        // READ data whose PSN the capture held already: re-sent for a re-issued READ
};

// `q`: the requester's state (the reverse flow), or nullptr when not paired.
// An outstanding READ starts at `psn`: its first response may be the stream's first.
bool read_starts_at(const RequesterState& q, std::uint32_t psn);

ResponseEvent classify(const ResponseCursor& r, const RequesterState* q, const SeqPacket& p);
// Reports on the response flow through `resp`; latencies go to the requester's flow through `req`
// (non-null when `q` is). Returns the segment size a completed multi-packet READ response
// shows (its length over its packets), a hint of the path MTU; 0 if none.
std::uint32_t apply(ResponseCursor& r, RequesterState* q, const ResponseEvent& e, const SeqPacket& p, SeqSink& resp, SeqSink* req);

}  // namespace rdmadiag::decode
