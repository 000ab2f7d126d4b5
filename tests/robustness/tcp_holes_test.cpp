// TCP reassembly (decode/tcp_reassembly.h) against hostile segment orders: a
// hole at every position of a stream (given up at the end, or filled later by
// a retransmission), and overlapping retransmissions whose bytes differ from
// the first copy. The sink records every byte it is handed, so the tests check
// the stream's content, not just counters: every stream byte is delivered
// exactly once, in order, and which copy of a byte wins is fixed (what was already
// passed to the MPA parser cannot be taken back; of two held copies the earlier
// one wins; a retransmission that fills a gap is taken whole and the held copy
// after it trimmed, as the Linux receiver under siw does).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "decode/tcp_reassembly.h"

using namespace rdmadiag::decode;

namespace {

constexpr std::uint32_t kIsn = 0xfffffff0u;  // the stream wraps around 2^32 after 15 bytes

struct RecordingSink : TcpStreamSink {
  std::uint32_t next = kIsn + 1;
  bool keep_bytes = true;
  std::vector<int> bytes;  // -1: a byte the capture lost
  std::vector<TcpHoleEvent> holes;
  bool order_ok = true;
  void stream_data(std::uint32_t seq, Bytes captured, std::uint32_t wire_len, std::uint64_t, std::int64_t) override {
    if (seq != next) order_ok = false;
    for (std::uint32_t i = 0; keep_bytes && i < wire_len; ++i) bytes.push_back(i < captured.size() ? captured[i] : -2);
    next = seq + wire_len;
  }
  void stream_hole(const TcpHoleEvent& h) override {
    holes.push_back(h);
    if (!h.recovered) {
      if (h.seq != next) order_ok = false;
      if (keep_bytes) bytes.insert(bytes.end(), h.bytes, -1);
      next = h.seq + h.bytes;
    }
  }
};

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t salt) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::uint8_t(i * 7 + salt);
  return v;
}

void send(TcpStream& s, RecordingSink& sink, const std::vector<std::uint8_t>& data, std::size_t from, std::size_t n,
          std::uint64_t frame) {
  s.segment(kIsn + 1 + std::uint32_t(from), Bytes(data).subspan(from, n), std::uint32_t(n), frame, std::int64_t(frame), sink);
}

}  // namespace

TEST(TcpHoles, HoleAtEveryPositionIsReportedOnceAndTheRestDelivered) {
  const auto data = pattern(96, 1);
  for (std::size_t hole_len : {1u, 5u}) {
    for (std::size_t at = 1; at + hole_len < data.size(); ++at) {  // bytes after it make it a hole
      SCOPED_TRACE(testing::Message() << "hole of " << hole_len << " at " << at);
      TcpStream s;
      RecordingSink sink;
      s.syn(kIsn);
      send(s, sink, data, 0, at, 1);
      // The rest after the hole, in 11-byte segments.
      std::uint64_t frame = 2;
      for (std::size_t off = at + hole_len; off < data.size(); off += 11)
        send(s, sink, data, off, std::min<std::size_t>(11, data.size() - off), frame++);
      s.flush(frame, std::int64_t(frame), sink);
      EXPECT_TRUE(sink.order_ok);
      ASSERT_EQ(sink.bytes.size(), data.size());
      for (std::size_t i = 0; i < data.size(); ++i) {
        const bool lost = i >= at && i < at + hole_len;
        ASSERT_EQ(sink.bytes[i], lost ? -1 : int(data[i])) << "byte " << i;
      }
      ASSERT_EQ(sink.holes.size(), 1u);
      EXPECT_EQ(sink.holes[0].seq, std::uint32_t(kIsn + 1 + at));
      EXPECT_EQ(sink.holes[0].bytes, hole_len);
      EXPECT_FALSE(sink.holes[0].recovered);
      EXPECT_EQ(sink.holes[0].frame_detected, 2u);
      EXPECT_EQ(s.stats().holes_lost, 1u);
      EXPECT_EQ(s.stats().bytes_lost, hole_len);
      EXPECT_EQ(s.held_bytes(), 0u);
    }
  }
}

TEST(TcpHoles, HoleAtEveryPositionFilledByARetransmissionWithOtherBytes) {
  const auto data = pattern(96, 1);
  const auto other = pattern(96, 100);  // what the retransmissions carry where they overlap old bytes
  for (std::size_t at = 1; at + 4 < data.size(); ++at) {
    SCOPED_TRACE(at);
    TcpStream s;
    RecordingSink sink;
    s.syn(kIsn);
    send(s, sink, data, 0, at, 1);
    send(s, sink, data, at + 4, data.size() - at - 4, 2);  // held beyond the 4-byte hole
    // The retransmission covers the hole and overlaps both sides with different bytes.
    std::vector<std::uint8_t> resend = other;
    for (std::size_t i = at; i < at + 4; ++i) resend[i] = data[i];
    const std::size_t from = at > 3 ? at - 3 : 0;
    send(s, sink, resend, from, std::min<std::size_t>(at + 4 + 3, data.size()) - from, 3);
    s.flush(4, 4, sink);
    EXPECT_TRUE(sink.order_ok);
    ASSERT_EQ(sink.bytes.size(), data.size());
    // Bytes before `at` were delivered before the retransmission: they stay. Past
    // them the retransmission is the in-order segment and its bytes are taken whole;
    // the held copy is trimmed, as Linux's receiver does (tcp_ofo_queue).
    const std::size_t resend_end = std::min<std::size_t>(at + 4 + 3, data.size());
    for (std::size_t i = 0; i < data.size(); ++i) {
      const int expected = i >= at && i < resend_end ? resend[i] : data[i];
      ASSERT_EQ(sink.bytes[i], expected) << "byte " << i;
    }
    ASSERT_EQ(sink.holes.size(), 1u);
    EXPECT_TRUE(sink.holes[0].recovered);
    EXPECT_EQ(sink.holes[0].frame_resolved, 3u);
    EXPECT_EQ(s.stats().holes_recovered, 1u);
    EXPECT_EQ(s.stats().bytes_lost, 0u);
    EXPECT_EQ(s.held_bytes(), 0u);
  }
}

TEST(TcpHoles, OverlappingOutOfOrderSegmentsWithDifferentBytesKeepTheFirstCopy) {
  const auto first = pattern(60, 1), second = pattern(60, 50);
  TcpStream s;
  RecordingSink sink;
  s.syn(kIsn);
  send(s, sink, first, 20, 20, 1);   // held: [20, 40)
  send(s, sink, second, 30, 20, 2);  // held, overlapping [30, 40) with other bytes: [40, 50) is new
  send(s, sink, second, 25, 10, 3);  // entirely inside what is held
  send(s, sink, first, 0, 20, 4);    // fills the gap
  send(s, sink, second, 50, 10, 5);
  s.flush(6, 6, sink);
  EXPECT_TRUE(sink.order_ok);
  ASSERT_EQ(sink.bytes.size(), 60u);
  for (std::size_t i = 0; i < 60; ++i) {
    const int expected = i < 40 ? first[i] : second[i];
    ASSERT_EQ(sink.bytes[i], expected) << "byte " << i;
  }
  EXPECT_EQ(s.stats().bytes, 60u);
  EXPECT_EQ(s.stats().holes_lost, 0u);
}

TEST(TcpHoles, SegmentsFromFarOutsideTheWindowAreBounded) {
  // A hostile or corrupt stream: segments scattered over the whole 2^32 sequence space.
  TcpBufferBudget budget;
  budget.limit = 1u << 20;
  TcpStream s(&budget);
  RecordingSink sink;
  sink.keep_bytes = false;  // the holes given up span gigabytes of sequence space
  s.syn(kIsn);
  const auto data = pattern(1400, 3);
  for (std::uint32_t i = 0; i < 5000; ++i)
    s.segment(kIsn + 1 + 100 + i * 858993u, Bytes(data), 1400, i + 1, std::int64_t(i), sink);
  EXPECT_LE(s.held_bytes(), TcpStream::kMaxOutOfOrderBytes);
  EXPECT_LE(budget.used, budget.limit);
  s.flush(6000, 6000, sink);
  EXPECT_EQ(budget.used, 0u);
  EXPECT_TRUE(sink.order_ok);
}

// Two gaps open at once are two holes, each with its own bytes and the frame
// that first showed bytes beyond it (issue 15: they were one hole spanning both,
// claiming captured bytes missing). What filled each is told by IPv4 IDs: a
// resend carries a newer ID than the segment after the gap, a late original an
// older one; without IDs it is not guessed.
TEST(TcpHoles, TwoGapsAreTwoHolesAndIpIdsTellResendFromReordering) {
  const auto data = pattern(60, 3);
  struct Case { std::int32_t fill_id_base; TcpGapFill want; };
  for (const Case c : {Case{100, TcpGapFill::retransmission}, Case{0, TcpGapFill::reordering}, Case{-1, TcpGapFill::unknown}}) {
    SCOPED_TRACE(int(c.want));
    TcpStream s;
    RecordingSink sink;
    s.syn(kIsn);
    auto seg = [&](std::size_t from, std::size_t n, std::uint64_t frame, std::int32_t id) {
      s.segment(kIsn + 1 + std::uint32_t(from), Bytes(data).subspan(from, n), std::uint32_t(n), frame, std::int64_t(frame), sink,
                c.fill_id_base < 0 ? -1 : id);
    };
    seg(0, 10, 1, 10);    // IDs 10.. in the order the sender sent the originals: bytes 10..14 (ID 11)
    seg(15, 15, 2, 12);   // and 30..34 (ID 13) did not reach the capture point
    seg(35, 25, 3, 14);
    seg(10, 5, 4, c.fill_id_base + 11);
    seg(30, 5, 5, c.fill_id_base + 13);
    EXPECT_TRUE(sink.order_ok);
    ASSERT_EQ(sink.holes.size(), 2u);
    EXPECT_EQ(sink.holes[0].seq, kIsn + 1 + 10);
    EXPECT_EQ(sink.holes[0].bytes, 5u);
    EXPECT_EQ(sink.holes[0].frame_detected, 2u);
    EXPECT_EQ(sink.holes[0].frame_resolved, 4u);
    EXPECT_EQ(sink.holes[1].seq, kIsn + 1 + 30);
    EXPECT_EQ(sink.holes[1].bytes, 5u);
    EXPECT_EQ(sink.holes[1].frame_detected, 3u);
    EXPECT_EQ(sink.holes[1].frame_resolved, 5u);
    for (const auto& h : sink.holes) {
      EXPECT_TRUE(h.recovered);
      EXPECT_EQ(h.fill, c.want);
    }
    EXPECT_EQ(s.stats().holes_recovered, 2u);
    EXPECT_EQ(sink.bytes.size(), data.size());
  }
}
