// The DDP/RDMAP direction state machine (decode/ddp_sequence.h), one transition
// at a time, on hand-built segments. Expected outcomes are the RFCs' rules:
// RFC 5041 section 5 (MSN per untagged queue from 1, MO from 0 within a
// message), RFC 5040 sections 4.2 / 4.4 / 5.2.1 (tagged offsets run on; Read
// Responses answer the oldest request at its sink STag/TO and size), RFC 7306
// section 5 (Atomic Responses by request id).
#include <gtest/gtest.h>

#include <vector>

#include "decode/ddp_sequence.h"

using namespace rdmadiag::decode;

namespace {

DdpSegment segment(bool is_tagged, RdmapOpcode op, std::uint32_t payload, bool last) {
  DdpSegment s;
  s.ddp.tagged = is_tagged;
  s.ddp.last = last;
  s.ddp.version = 1;
  s.ddp.rdmap_control = static_cast<std::uint8_t>(0x40 | static_cast<std::uint8_t>(op));
  s.payload_len = payload;
  return s;
}

DdpSegment untagged(std::uint32_t qn, std::uint32_t msn, std::uint32_t mo, std::uint32_t payload, bool last,
                    RdmapOpcode op = RdmapOpcode::send) {
  DdpSegment s = segment(false, op, payload, last);
  s.ddp.qn = qn;
  s.ddp.msn = msn;
  s.ddp.mo = mo;
  return s;
}

DdpSegment tagged(RdmapOpcode op, std::uint32_t stag, std::uint64_t to, std::uint32_t payload, bool last) {
  DdpSegment s = segment(true, op, payload, last);
  s.ddp.stag = stag;
  s.ddp.to = to;
  return s;
}

DdpSegment read_request(std::uint32_t msn, std::uint32_t sink_stag, std::uint64_t sink_to, std::uint32_t size) {
  DdpSegment s = untagged(kQueueReadRequest, msn, 0, 0, true, RdmapOpcode::read_request);
  s.has_read_request = true;
  s.read.sink_stag = sink_stag;
  s.read.sink_to = sink_to;
  s.read.read_size = size;
  return s;
}

struct Recorder final : DdpSink {
  std::vector<DdpFinding> findings;
  std::vector<RdmaReadRequest> reads_requested;
  std::vector<std::uint32_t> atomics_requested;
  std::vector<DdpPendingRead> reads_answered;
  std::vector<DdpPendingAtomic> atomics_answered;
  void finding(const DdpEvent&, DdpFinding f, const DdpPendingRead*) override { findings.push_back(f); }
  void read_requested(const RdmaReadRequest& rq) override { reads_requested.push_back(rq); }
  void atomic_requested(std::uint32_t id) override { atomics_requested.push_back(id); }
  void read_answered(const DdpPendingRead& r) override { reads_answered.push_back(r); }
  void atomic_answered(const DdpPendingAtomic& a) override { atomics_answered.push_back(a); }
};

// classify, then apply: the event and what the sink heard.
DdpEvent step(DdpDirState& s, const DdpSegment& seg, Recorder& rec) {
  const DdpEvent e = ddp_classify(s, seg);
  ddp_apply(s, e, seg, rec);
  return e;
}

// The state after the MPA negotiation: every queue's MSN starts at 1.
void negotiated(DdpDirState& s) { ddp_reset(s, true); }

}  // namespace

TEST(DdpSequence, ClassifyIsPure) {
  DdpDirState s;
  negotiated(s);
  const DdpSegment seg = untagged(0, 2, 0, 10, true);
  const DdpEvent a = ddp_classify(s, seg), b = ddp_classify(s, seg);
  EXPECT_EQ(a.findings, b.findings);
  EXPECT_TRUE(a.has(kMsnGap));
  EXPECT_EQ(s.queues[0].expected_msn, 1u);  // untouched
}

TEST(DdpSequence, UntaggedMessagesRunOnPerQueue) {
  DdpDirState s;
  negotiated(s);
  Recorder rec;
  // QN 0 message 1 in three segments, QN 1 message 1 between them: both queues start at 1.
  EXPECT_EQ(step(s, untagged(0, 1, 0, 100, false), rec).findings, 0);
  EXPECT_EQ(step(s, read_request(1, 0x10, 0x1000, 64), rec).findings, 0);
  EXPECT_EQ(step(s, untagged(0, 1, 100, 100, false), rec).findings, 0);
  EXPECT_EQ(step(s, untagged(0, 1, 200, 5, true), rec).findings, 0);
  EXPECT_EQ(step(s, untagged(0, 2, 0, 5, true), rec).findings, 0);
  EXPECT_EQ(step(s, read_request(2, 0x11, 0x1000, 64), rec).findings, 0);
  EXPECT_EQ(step(s, untagged(kQueueTerminate, 1, 0, 28, true, RdmapOpcode::terminate), rec).findings, kTerminate);
  EXPECT_EQ(s.queues[0].expected_msn, 3u);
  EXPECT_EQ(s.queues[1].expected_msn, 3u);
  EXPECT_EQ(s.queues[2].expected_msn, 2u);
  EXPECT_EQ(rec.findings, std::vector<DdpFinding>{kTerminate});
  ASSERT_EQ(rec.reads_requested.size(), 2u);  // for the peer to answer
  EXPECT_EQ(rec.reads_requested[1].sink_stag, 0x11u);
}

TEST(DdpSequence, MsnGapAndRepeatOnOneQueue) {
  DdpDirState s;
  negotiated(s);
  Recorder rec;
  step(s, untagged(0, 1, 0, 1, true), rec);
  DdpEvent e = step(s, untagged(0, 4, 0, 1, true), rec);
  EXPECT_TRUE(e.has(kMsnGap));
  EXPECT_EQ(e.expected_msn, 2u);
  EXPECT_EQ(s.queues[0].expected_msn, 5u);  // follows the sender on
  e = step(s, untagged(0, 4, 0, 1, true), rec);
  EXPECT_TRUE(e.has(kMsnGap));
  EXPECT_EQ(e.expected_msn, 5u);
  EXPECT_EQ(rec.findings, (std::vector<DdpFinding>{kMsnGap, kMsnGap}));
}

TEST(DdpSequence, NothingKnownAfterLostBytesUntilAMessageEnds) {
  DdpDirState s;
  ddp_reset(s, false);
  Recorder rec;
  EXPECT_EQ(step(s, untagged(0, 77, 300, 10, true), rec).findings, 0);  // mid-message, any MSN: no judgement
  EXPECT_EQ(step(s, untagged(0, 78, 0, 10, true), rec).findings, 0);
  EXPECT_TRUE(step(s, untagged(0, 80, 0, 10, true), rec).has(kMsnGap));
}

TEST(DdpSequence, MessageOffsets) {
  DdpDirState s;
  negotiated(s);
  Recorder rec;
  DdpEvent e = step(s, untagged(0, 1, 8, 10, false), rec);
  EXPECT_TRUE(e.has(kMoAtStart));
  e = step(s, untagged(0, 1, 20, 10, false), rec);  // 18 was next
  EXPECT_TRUE(e.has(kMoJump));
  EXPECT_EQ(e.expected_mo, 18u);
  // A new MSN while a message is open: its last segment was not seen; a new message.
  e = step(s, untagged(0, 2, 0, 10, true), rec);
  EXPECT_EQ(e.findings, kMsnGap);  // message 1 never ended, so 1 is still next
  EXPECT_TRUE(e.new_message);
}

TEST(DdpSequence, QueuesPastRdmapsAreNotFollowed) {
  DdpDirState s;
  negotiated(s);
  Recorder rec;
  const DdpEvent e = step(s, untagged(9, 123, 5, 1, true), rec);
  EXPECT_EQ(e.step, DdpStep::untagged_other_queue);
  EXPECT_EQ(e.findings, 0);
}

TEST(DdpSequence, RdmaWriteTaggedOffsetRunsOn) {
  DdpDirState s;
  negotiated(s);
  Recorder rec;
  EXPECT_EQ(step(s, tagged(RdmapOpcode::rdma_write, 5, 1000, 100, false), rec).findings, 0);
  DdpEvent e = step(s, tagged(RdmapOpcode::rdma_write, 5, 1200, 100, false), rec);
  EXPECT_TRUE(e.has(kToJump));
  EXPECT_EQ(e.expected_to, 1100u);
  EXPECT_EQ(step(s, tagged(RdmapOpcode::rdma_write, 5, 1300, 1, true), rec).findings, 0);
  // A new message may go anywhere.
  EXPECT_EQ(step(s, tagged(RdmapOpcode::rdma_write, 6, 0, 10, true), rec).findings, 0);
}

TEST(DdpSequence, ReadResponsesAnswerTheOldestRequest) {
  DdpDirState s;
  negotiated(s);
  s.reads.push_back(DdpPendingRead{{0x100, 0x5000, 300, 0, 0}, 7, 1000000000, 0});
  s.reads.push_back(DdpPendingRead{{0x200, 0x9000, 10, 0, 0}, 8, 1500000000, 0});
  Recorder rec;
  EXPECT_EQ(step(s, tagged(RdmapOpcode::read_response, 0x100, 0x5000, 200, false), rec).step, DdpStep::read_response);
  EXPECT_EQ(step(s, tagged(RdmapOpcode::read_response, 0x100, 0x5000 + 200, 100, true), rec).findings, 0);
  ASSERT_EQ(rec.reads_answered.size(), 1u);
  EXPECT_EQ(rec.reads_answered[0].frame, 7u);
  // The second request, answered at the wrong STag and short.
  const DdpEvent e = step(s, tagged(RdmapOpcode::read_response, 0x201, 0x9000, 4, true), rec);
  EXPECT_TRUE(e.has(kToJump));
  EXPECT_TRUE(e.has(kReadSizeMismatch));
  EXPECT_EQ(e.expected_stag, 0x200u);
  EXPECT_EQ(e.read_total, 4u);
  EXPECT_EQ(rec.findings, (std::vector<DdpFinding>{kToJump, kReadSizeMismatch}));
  EXPECT_TRUE(s.reads.empty());
}

TEST(DdpSequence, UnmatchedReadResponseOnlyWhenEveryRequestWasSeen) {
  DdpDirState s;
  negotiated(s);
  Recorder rec;
  DdpEvent e = step(s, tagged(RdmapOpcode::read_response, 1, 0, 4, true), rec);
  EXPECT_EQ(e.step, DdpStep::read_response_unmatched);
  EXPECT_EQ(e.findings, 0);  // the request may have been before the capture or in lost bytes
  s.requests_complete = true;
  e = step(s, tagged(RdmapOpcode::read_response, 1, 0, 4, true), rec);
  EXPECT_EQ(e.findings, kUnmatchedResponse);
}

TEST(DdpSequence, AtomicsByRequestId) {
  DdpDirState s;
  negotiated(s);
  Recorder rec;
  DdpSegment rq = untagged(kQueueAtomic, 1, 0, 0, true, RdmapOpcode::atomic_request);
  rq.has_atomic_request = true;
  rq.atomic.request_id = 42;
  step(s, rq, rec);
  ASSERT_EQ(rec.atomics_requested, std::vector<std::uint32_t>{42});
  DdpDirState other;
  negotiated(other);  // the peer direction, holding our requests
  other.atomics.push_back(DdpPendingAtomic{41, 3, 500000000});
  other.atomics.push_back(DdpPendingAtomic{43, 4, 600000000});
  DdpSegment resp = untagged(kQueueAtomic, 1, 0, 0, true, RdmapOpcode::atomic_response);
  resp.has_atomic_response = true;
  resp.atomic_resp.request_id = 43;  // out of order: by id
  step(other, resp, rec);
  ASSERT_EQ(rec.atomics_answered.size(), 1u);
  EXPECT_EQ(rec.atomics_answered[0].frame, 4u);
  ASSERT_EQ(other.atomics.size(), 1u);
  EXPECT_EQ(other.atomics.front().id, 41u);
}
