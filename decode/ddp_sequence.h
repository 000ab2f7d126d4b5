// DDP / RDMAP sequencing of one direction of an iWARP connection, as a small
// state machine written from the RFCs, over the DDP segments MPA framing cut:
//  - RFC 5041 section 5 (untagged model): every untagged queue (QN 0 Send,
//    1 RDMA Read Request, 2 Terminate; RFC 7306 QN 3 Atomic) numbers its
//    messages with its own MSN, from 1, +1 per message; MO is 0 at a message's
//    first segment and runs on by the payload of each;
//  - RFC 5041 section 4 (tagged model) and RFC 5040 section 4.2: an RDMA
//    Write's segments place data at a tagged offset that runs on within the
//    message;
//  - RFC 5040 section 4.4 / 5.2.1: Read Responses come back in request order,
//    at the request's sink STag and TO, adding up to its RDMA Read Message Size;
//  - RFC 5040 section 4.8: a Terminate is reported; RFC 7306 section 5: Atomic
//    Responses answer Atomic Requests by request identifier.
// classify() is pure: what one segment means for the state. apply() changes
// the state and says what it found through a narrow sink, which owns frames,
// flows and the peer direction (requests this direction sends are answered by
// the other one). Memory: a bounded ring of outstanding requests.
#pragma once
#include <array>
#include <cstdint>

#include "decode/ddp_rdmap.h"
#include "decode/flow_ring.h"

namespace rdmadiag::decode {

struct DdpQueueState {
  bool known = false;        // expected_msn is meaningful
  std::uint32_t expected_msn = 1;
  bool in_message = false;
  std::uint32_t msn = 0;     // of the message in progress
  std::uint32_t next_mo = 0;
};

struct DdpPendingRead {
  RdmaReadRequest rq;
  std::uint64_t frame = 0;
  std::int64_t ts_ns = 0;
  std::uint64_t done = 0;    // bytes of Read Response seen so far
};

struct DdpPendingAtomic {
  std::uint32_t id = 0;
  std::uint64_t frame = 0;
  std::int64_t ts_ns = 0;
};

// What one direction's next segments are checked against.
struct DdpDirState {
  static constexpr std::size_t kMaxPendingRequests = 4096;
  static constexpr std::size_t kQueues = 4;
  std::array<DdpQueueState, kQueues> queues{};
  bool write_open = false;   // an RDMA Write message in progress
  std::uint32_t write_stag = 0;
  std::uint64_t write_next_to = 0;
  FlowRing<DdpPendingRead> reads;      // the peer's Read Requests, answered in this direction
  FlowRing<DdpPendingAtomic> atomics;  // the peer's Atomic Requests
  // Every request the peer sent was seen (both streams followed from the
  // negotiation, nothing lost): only then is a response without one an anomaly.
  bool requests_complete = false;
};

// Back to the state after the MPA negotiation (msns_known: MSNs start at 1) or
// after bytes were lost (nothing known). Outstanding requests are kept.
void ddp_reset(DdpDirState& s, bool msns_known);

enum class DdpStep : std::uint8_t {
  untagged,            // a segment of an untagged message on a queue followed here
  untagged_other_queue,  // QN past the queues RDMAP uses: not followed
  rdma_write,
  read_response,       // answers the oldest outstanding Read Request
  read_response_unmatched,
};

// Findings (bits of DdpEvent::findings).
enum DdpFinding : std::uint16_t {
  kMsnGap = 1,             // a message's MSN is not the queue's next one
  kMoAtStart = 2,          // a message's first segment with MO != 0
  kMoJump = 4,             // MO does not run on within a message
  kToJump = 8,             // tagged: STag / TO not where the message or the request says
  kReadSizeMismatch = 16,  // the last Read Response segment: total != the request's size
  kUnmatchedResponse = 32, // a Read Response with none outstanding, all requests seen
  kTerminate = 64,
};

struct DdpEvent {
  DdpStep step = DdpStep::untagged;
  std::uint16_t findings = 0;
  DdpHeader ddp;                  // the segment's header
  std::uint32_t payload = 0;
  std::uint32_t expected_msn = 0;   // kMsnGap
  std::uint32_t expected_mo = 0;    // kMoAtStart (0) / kMoJump
  std::uint32_t expected_stag = 0;  // kToJump
  std::uint64_t expected_to = 0;    // kToJump
  std::uint64_t read_total = 0;     // read_response: bytes of the response so far, this segment included
  bool new_message = false;         // untagged: the segment starts a message
  bool has(DdpFinding f) const { return findings & f; }
};

// Reports of apply(). The owner adds frames, flows and timing.
class DdpSink {
 public:
  virtual ~DdpSink() = default;
  virtual void finding(const DdpEvent& e, DdpFinding f, const DdpPendingRead* request) = 0;
  // A request this direction sent: the peer direction answers it.
  virtual void read_requested(const RdmaReadRequest& rq) = 0;
  virtual void atomic_requested(std::uint32_t request_id) = 0;
  // A response that completed an outstanding request of the peer.
  virtual void read_answered(const DdpPendingRead& request) = 0;
  virtual void atomic_answered(const DdpPendingAtomic& request) = 0;
};

DdpEvent ddp_classify(const DdpDirState& s, const DdpSegment& seg);
void ddp_apply(DdpDirState& s, const DdpEvent& e, const DdpSegment& seg, DdpSink& sink);

}  // namespace rdmadiag::decode
