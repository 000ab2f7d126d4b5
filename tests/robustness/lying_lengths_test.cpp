// Length fields that lie, on real frames from the rxe captures: an IP total
// length or UDP length larger or smaller than the packet, a RETH DMA length of
// 4 GB, a pad count larger than the payload. Each case checks the decoded
// prefix and the exact diagnostic; where the lie leaves the ICRC valid (the
// frame is resealed with the new header) the verdict must be "ok", so the
// diagnostic comes from the length check and not from a CRC failure.
#include <gtest/gtest.h>

#include "decode/analyzer.h"
#include "decode/packet.h"
#include "tests/decode/fixtures.h"
#include "tests/decode/real_frames.h"

using namespace rdmadiag::decode;
using fixtures::Frame;

namespace {

// Offsets in the Ethernet/IPv4/UDP RoCEv2 frames of real_frames.h.
constexpr std::size_t kIpAt = 14, kUdpAt = 34, kBthAt = 42, kRethAt = 54;

void put16(Frame& f, std::size_t at, std::uint16_t v) {
  f[at] = std::uint8_t(v >> 8);
  f[at + 1] = std::uint8_t(v);
}
void put32(Frame& f, std::size_t at, std::uint32_t v) {
  put16(f, at, std::uint16_t(v >> 16));
  put16(f, at + 2, std::uint16_t(v));
}

// Recomputes the ICRC (the last 4 bytes) over the frame as it now is.
void reseal(Frame& f) {
  const Bytes all(f);
  const std::uint32_t icrc = compute_icrc({IcrcInput::Kind::roce_v2_ipv4, all.subspan(kIpAt, 20), all.subspan(kUdpAt, 8),
                                           all.subspan(kBthAt, 12), all.subspan(kBthAt + 12, f.size() - kBthAt - 12 - 4), {}});
  for (int i = 0; i < 4; ++i) f[f.size() - 4 + i] = std::uint8_t(icrc >> (8 * i));
}

DecodedPacket decode(const Frame& f) { return fixtures::decode(linktype::kEthernet, f); }

Severity severity_of_diag(const DecodedPacket& p, DiagCode c) {
  for (const auto& d : p.diags)
    if (d.code == c) return d.severity;
  ADD_FAILURE() << "no " << to_string(c);
  return Severity::note;
}

}  // namespace

TEST(LyingLengths, UntouchedFramesDecodeClean) {
  for (const Frame* f : {&real_frames::kWriteOnly, &real_frames::kReadRequest}) {
    const DecodedPacket p = decode(*f);
    EXPECT_TRUE(p.has_bth);
    EXPECT_EQ(p.icrc, CrcStatus::ok);
    EXPECT_EQ(p.diags.size(), 0u);
  }
}

TEST(LyingLengths, IpTotalLengthLargerThanTheFrame) {
  Frame f = real_frames::kWriteOnly;
  put16(f, kIpAt + 2, 0xffff);
  reseal(f);  // the ICRC covers the IP total length: reseal so only the length is wrong
  const DecodedPacket p = decode(f);
  EXPECT_EQ(severity_of_diag(p, DiagCode::ip_length_mismatch), Severity::error);
  EXPECT_FALSE(p.truncated);  // the wire length says the frame is whole: the header lies, the capture does not
  ASSERT_TRUE(p.has_bth);     // the UDP length still fits the frame: everything below IP decodes
  EXPECT_EQ(p.ib.bth.opcode, 0x0a);
  EXPECT_EQ(p.payload_len, 2u);
  EXPECT_EQ(p.icrc, CrcStatus::ok);
}

TEST(LyingLengths, IpTotalLengthShorterThanTheUdpDatagram) {
  Frame f = real_frames::kWriteOnly;
  put16(f, kIpAt + 2, 20 + 8 + 12);  // IP ends right after the BTH: UDP's 44 bytes do not fit
  const DecodedPacket p = decode(f);
  EXPECT_EQ(severity_of_diag(p, DiagCode::bad_udp_length), Severity::error);
  EXPECT_FALSE(p.truncated);
  EXPECT_NE(p.icrc, CrcStatus::ok);
}

TEST(LyingLengths, IpTotalLengthShorterThanItsOwnHeader) {
  Frame f = real_frames::kWriteOnly;
  put16(f, kIpAt + 2, 12);
  const DecodedPacket p = decode(f);
  EXPECT_FALSE(p.has_bth);
  EXPECT_FALSE(p.udp.has_value());
  EXPECT_FALSE(p.diags.empty());
  for (const auto& d : p.diags) EXPECT_NE(d.code, DiagCode::truncated);
}

TEST(LyingLengths, UdpLengthLargerThanTheIpPayload) {
  Frame f = real_frames::kWriteOnly;
  put16(f, kUdpAt + 4, 0xffff);
  const DecodedPacket p = decode(f);
  EXPECT_EQ(severity_of_diag(p, DiagCode::bad_udp_length), Severity::error);
  ASSERT_TRUE(p.has_bth);  // decoded up to the IP end instead
  EXPECT_EQ(p.payload_len, 2u);
}

TEST(LyingLengths, UdpLengthShorterThanTheUdpHeader) {
  Frame f = real_frames::kWriteOnly;
  put16(f, kUdpAt + 4, 4);
  const DecodedPacket p = decode(f);
  EXPECT_FALSE(p.has_bth);
  EXPECT_EQ(severity_of_diag(p, DiagCode::bad_udp_length), Severity::error);
}

TEST(LyingLengths, RethDmaLengthOf4GbOnATwoByteWrite) {
  Frame f = real_frames::kWriteOnly;
  put32(f, kRethAt + 12, 0xffffffff);
  f[kBthAt + 11] = std::uint8_t(f[kBthAt + 11] + 1);  // the next PSN after the original frame
  reseal(f);
  const DecodedPacket p = decode(f);
  ASSERT_TRUE(p.has_bth);
  EXPECT_EQ(p.icrc, CrcStatus::ok);
  ASSERT_TRUE(p.ib.has(ExtHeader::kReth));
  EXPECT_EQ(p.ib.reth.dma_len, 0xffffffffu);
  EXPECT_EQ(p.payload_len, 2u);
  // After the genuine WRITE Only (which sets the flow's expected PSN), the analysis
  // flags the one whose payload is not its DMA length, and allocates nothing for
  // the 4 GB it announces.
  Analyzer an;
  PacketAnalysis a;
  an.add(decode(real_frames::kWriteOnly), 1, 1.0, a);
  an.add(p, 2, 1.001, a);
  EXPECT_EQ(a.anomaly_count, 1u);
  an.finish();
  EXPECT_EQ(an.anomalies().count(AnomalyKind::payload_length_mismatch), 1u);
  EXPECT_EQ(an.anomalies().total(), 1u);
}

TEST(LyingLengths, PadCountLargerThanThePayload) {
  Frame f = real_frames::kReadRequest;  // no payload at all
  f[kBthAt + 1] = 0x30;                   // PadCnt 3
  reseal(f);
  const DecodedPacket p = decode(f);
  ASSERT_TRUE(p.has_bth);
  EXPECT_EQ(p.icrc, CrcStatus::ok);
  EXPECT_EQ(p.payload_len, 0u);
  EXPECT_EQ(severity_of_diag(p, DiagCode::pad_exceeds_payload), Severity::error);
}

TEST(LyingLengths, PadCountEatingTheWholePayload) {
  Frame f = real_frames::kWriteOnly;  // 2 payload bytes + 2 pad on the wire
  f[kBthAt + 1] = (f[kBthAt + 1] & ~0x30) | 0x30;  // PadCnt 3: 1 payload byte
  reseal(f);
  const DecodedPacket p = decode(f);
  ASSERT_TRUE(p.has_bth);
  EXPECT_EQ(p.payload_len, 1u);
  EXPECT_FALSE(p.diags.contains(DiagCode::pad_exceeds_payload));
}
