// NVMe data matching (decode/nvme_data.h) and the queue timeline
// (decode/nvme_timeline.h) on hand-made packet sequences. Expected values
// follow from IBA 9.4.3/9.4.4 (an RDMA WRITE's packets and a READ's responses
// take consecutive PSNs from the first packet's / the request's) and from the
// timeline's stated binning (1 ms bins, doubled when 128 no longer hold the
// span), worked out by hand here; the lab captures are checked against
// tshark's fields by nvme_crosscheck.
#include <gtest/gtest.h>

#include "decode/ddp_rdmap.h"
#include "decode/ib_opcodes.h"
#include "decode/nvme_data.h"
#include "decode/nvme_timeline.h"

namespace rdmadiag::decode {
namespace {

// RC opcodes (IBA table 38).
constexpr std::uint8_t kWriteFirst = 6, kWriteMiddle = 7, kWriteLast = 8, kReadRequest = 12;
constexpr std::uint8_t kReadFirst = 13, kReadMiddle = 14, kReadLast = 15;

DecodedPacket packet(std::uint8_t opcode, std::uint32_t psn, std::uint32_t payload_len = 1024) {
  DecodedPacket p;
  p.has_bth = true;
  p.ib.bth.opcode = opcode;
  p.ib.bth.psn = psn;
  p.payload_len = payload_len;
  return p;
}

DecodedPacket with_reth(DecodedPacket p, std::uint32_t key, std::uint64_t va, std::uint32_t len) {
  p.ib.present |= kReth;
  p.ib.reth = Reth{va, key, len};
  return p;
}

// Command CID 7 owns key 0x55 over [0x1000, 0x1000 + 8192); nothing else is outstanding.
std::optional<std::uint16_t> find(std::uint32_t key, std::uint64_t va) {
  if (key == 0x55 && va >= 0x1000 && va < 0x1000 + 8192) return 7;
  return std::nullopt;
}

TEST(NvmeDataMatcher, WritePacketsFollowTheirFirstByPsn) {
  NvmeDataMatcher m;
  const auto first = m.on_packet(with_reth(packet(kWriteFirst, 100), 0x55, 0x1000, 3000), find);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->starts_operation);
  EXPECT_EQ(first->target.cid, 7);
  EXPECT_EQ(first->length, 3000u);
  // 3000 bytes at a 1024-byte PMTU: PSNs 100, 101, 102.
  EXPECT_TRUE(m.on_packet(packet(kWriteMiddle, 101), find));
  EXPECT_TRUE(m.on_packet(packet(kWriteLast, 102, 952), find));
  // A resend of the middle packet (go-back-N) is the same operation's.
  EXPECT_TRUE(m.on_packet(packet(kWriteMiddle, 101), find));
  // PSN 103 is past the operation: no command.
  EXPECT_FALSE(m.on_packet(packet(kWriteLast, 103, 10), find));
}

TEST(NvmeDataMatcher, ReadResponsesTakeTheRequestsPsns) {
  NvmeDataMatcher m;
  ASSERT_TRUE(m.on_packet(with_reth(packet(kReadRequest, 500, 0), 0x55, 0x1000, 8192), find));
  // A READ for another key opens an operation of no command at PSN 508.
  EXPECT_FALSE(m.on_packet(with_reth(packet(kReadRequest, 508, 0), 0x99, 0x1000, 1024), find));
  EXPECT_TRUE(m.on_packet(packet(kReadFirst, 500), find));
  EXPECT_TRUE(m.on_packet(packet(kReadMiddle, 503), find));  // first response lost or not: PSN decides
  EXPECT_TRUE(m.on_packet(packet(kReadLast, 507, 1024), find));
  EXPECT_FALSE(m.on_packet(packet(kReadFirst, 508), find));  // the other key's READ
  // WRITE packets never continue a READ.
  EXPECT_FALSE(m.on_packet(packet(kWriteMiddle, 501), find));
}

TEST(NvmeDataMatcher, AddressOutsideTheSglIsNotMatched) {
  NvmeDataMatcher m;
  EXPECT_FALSE(m.on_packet(with_reth(packet(kWriteFirst, 1), 0x55, 0x1000 + 8192, 1024), find));
  EXPECT_FALSE(m.on_packet(packet(kWriteLast, 2), find));
}

// iWARP (RFC 5040 4.3-4.4, RFC 5041 4.2): a tagged Write / Read Response segment, an untagged Read Request.
DdpSegment tagged(RdmapOpcode op, std::uint32_t stag, std::uint64_t to, std::uint32_t len, bool last) {
  DdpSegment s;
  s.ddp.tagged = true;
  s.ddp.last = last;
  s.ddp.rdmap_control = static_cast<std::uint8_t>(0x40 | static_cast<std::uint8_t>(op));
  s.ddp.stag = stag;
  s.ddp.to = to;
  s.payload_len = len;
  return s;
}

DdpSegment read_request(std::uint32_t sink_stag, std::uint64_t sink_to, std::uint32_t size, std::uint32_t src_stag,
                        std::uint64_t src_to) {
  DdpSegment s;
  s.ddp.last = true;
  s.ddp.qn = kQueueReadRequest;
  s.ddp.rdmap_control = 0x40 | static_cast<std::uint8_t>(RdmapOpcode::read_request);
  s.has_read_request = true;
  s.read = RdmaReadRequest{sink_stag, sink_to, size, src_stag, src_to};
  return s;
}

TEST(NvmeIwarpDataMatcher, WriteSegmentsByStagAndOffsetTheFirstAfterALastStartsAnOperation) {
  NvmeIwarpDataMatcher m;
  const auto a = m.on_segment(tagged(RdmapOpcode::rdma_write, 0x55, 0x1000, 1428, false), find);
  const auto b = m.on_segment(tagged(RdmapOpcode::rdma_write, 0x55, 0x1594, 1240, true), find);
  const auto c = m.on_segment(tagged(RdmapOpcode::rdma_write, 0x55, 0x1A6C, 100, true), find);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->target.cid, 7);
  EXPECT_TRUE(a->starts_operation);
  EXPECT_FALSE(b->starts_operation);
  EXPECT_TRUE(c->starts_operation);
  EXPECT_EQ(b->address + b->length, 0x1A6Cu);
  EXPECT_FALSE(m.on_segment(tagged(RdmapOpcode::rdma_write, 0x56, 0x1000, 100, true), find));  // another STag
}

TEST(NvmeIwarpDataMatcher, ReadResponsesFollowTheirRequestsSinkStag) {
  NvmeIwarpDataMatcher m;
  const auto rq = m.on_segment(read_request(0xAB, 0x9000, 2048, 0x55, 0x1800), find);
  ASSERT_TRUE(rq);
  EXPECT_TRUE(rq->starts_operation);
  EXPECT_EQ(rq->address, 0x1800u);
  const auto r1 = m.on_segment(tagged(RdmapOpcode::read_response, 0xAB, 0x9000, 1428, false), find);
  const auto r2 = m.on_segment(tagged(RdmapOpcode::read_response, 0xAB, 0x9594, 620, true), find);
  ASSERT_TRUE(r1 && r2);
  EXPECT_EQ(r2->target.cid, 7);
  EXPECT_FALSE(r2->starts_operation);
  EXPECT_FALSE(m.on_segment(tagged(RdmapOpcode::read_response, 0xAB, 0x9800, 16, true), find));  // past the request
  EXPECT_FALSE(m.on_segment(read_request(0xAC, 0, 16, 0x55, 0x4000), find));  // source outside the SGL
  EXPECT_FALSE(m.on_segment(tagged(RdmapOpcode::read_response, 0xAC, 0, 16, true), find));
}

TEST(NvmeTimeline, BinsHoldTheMostOutstandingAndCarryItOver) {
  NvmeTimeline t;
  t.outstanding(0, 1);                       // bin 0
  t.outstanding(200'000, 2);                 // bin 0
  t.outstanding(1'500'000, 1);               // bin 1: 2 outstanding when it began
  t.completion(1'500'000, 4096);
  t.outstanding(4'200'000, 2);               // bin 4; bins 2-3 carry 1
  ASSERT_EQ(t.bins(), 5u);
  EXPECT_EQ(t.bin_ns(), 1'000'000);
  EXPECT_EQ(t.bin(0).max_outstanding, 2u);
  EXPECT_EQ(t.bin(1).max_outstanding, 2u);
  EXPECT_EQ(t.bin(1).completions, 1u);
  EXPECT_EQ(t.bin(1).bytes, 4096u);
  EXPECT_EQ(t.bin(2).max_outstanding, 1u);
  EXPECT_EQ(t.bin(3).max_outstanding, 1u);
  EXPECT_EQ(t.bin(4).max_outstanding, 2u);
}

TEST(NvmeTimeline, WidthDoublesWhenTheSpanOutgrowsTheBins) {
  NvmeTimeline t;
  t.outstanding(0, 3);
  t.completion(127'999'999, 512);            // the last 1 ms bin
  EXPECT_EQ(t.bin_ns(), 1'000'000);
  t.completion(128'000'000, 512);            // 2 ms bins from here: 64 used + this one
  EXPECT_EQ(t.bin_ns(), 2'000'000);
  ASSERT_EQ(t.bins(), 65u);
  EXPECT_EQ(t.bin(0).max_outstanding, 3u);
  EXPECT_EQ(t.bin(63).completions, 1u);
  EXPECT_EQ(t.bin(64).completions, 1u);
  EXPECT_EQ(t.bin(63).bytes + t.bin(64).bytes, 1024u);
  // 1 s later: 8 ms bins (1000 ms / 8 = 125 < 128).
  t.completion(1'000'000'000, 0);
  EXPECT_EQ(t.bin_ns(), 8'000'000);
  EXPECT_EQ(t.bins(), 126u);
}

}  // namespace
}  // namespace rdmadiag::decode
