// Every fixture cut at every byte offset: no crash, no read past the captured
// bytes (each cut is its own heap block, so AddressSanitizer sees an over-read),
// the decoded prefix kept, truncation reported, and never a "bad" CRC for bytes
// that simply are not there. Cut with the wire length kept (snap length) and
// with the wire length cut too (a packet that lies about its length).
#include <gtest/gtest.h>

#include <memory>

#include "decode/packet.h"
#include "fixtures.h"
#include "real_frames.h"

using namespace rdmadiag::decode;

namespace {

struct Case {
  const char* name;
  std::uint32_t linktype;
  fixtures::Frame frame;
};

std::vector<Case> cases() {
  return {
      {"cm_req", linktype::kEthernet, real_frames::kCmReq},
      {"send_only", linktype::kEthernet, real_frames::kSendOnly},
      {"ack", linktype::kEthernet, real_frames::kAck},
      {"write_only", linktype::kEthernet, real_frames::kWriteOnly},
      {"read_request", linktype::kEthernet, real_frames::kReadRequest},
      {"read_response", linktype::kEthernet, real_frames::kReadResponseOnly},
      {"nak", linktype::kEthernet, real_frames::kNakSeqError},
      {"vlan", linktype::kEthernet, fixtures::with_vlan_tags(real_frames::kAck, {{0x88a8, 1}, {0x8100, 2}})},
      {"sll2", linktype::kLinuxSll2, fixtures::as_sll2(real_frames::kWriteOnly)},
      {"sll", linktype::kLinuxSll, fixtures::as_sll(real_frames::kReadRequest)},
      {"raw_ip", linktype::kRaw, fixtures::without_ethernet(real_frames::kSendOnly)},
  };
}

DecodedPacket decode_cut(const Case& c, std::size_t n, std::uint32_t wirelen) {
  // A heap block of exactly n bytes: any read past it is an ASan error.
  std::unique_ptr<std::uint8_t[]> block(new std::uint8_t[n ? n : 1]);
  std::copy_n(c.frame.begin(), n, block.get());
  DecodedPacket p;
  decode_frame(c.linktype, Bytes(block.get(), n), wirelen, {}, p);
  return p;
}

}  // namespace

TEST(Truncation, EveryCutOfEveryFixtureBySnapLength) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto full_len = static_cast<std::uint32_t>(c.frame.size());
    const DecodedPacket full = decode_cut(c, c.frame.size(), full_len);
    ASSERT_TRUE(full.has_bth);
    ASSERT_EQ(full.icrc, CrcStatus::ok);
    for (std::size_t n = 0; n < c.frame.size(); ++n) {
      SCOPED_TRACE(n);
      const DecodedPacket p = decode_cut(c, n, full_len);
      EXPECT_NE(p.icrc, CrcStatus::bad);
      EXPECT_NE(p.icrc, CrcStatus::ok);
      EXPECT_TRUE(p.truncated || p.diags.contains(DiagCode::truncated)) << "cut not reported";
      for (const auto& d : p.diags) EXPECT_NE(d.severity, Severity::error) << to_string(d.code);
      if (n >= full.bth_offset + kBthLength) {
        // The decoded prefix: the BTH is all here, so it decodes as in the whole frame.
        ASSERT_TRUE(p.has_bth);
        EXPECT_EQ(p.ib.bth.opcode, full.ib.bth.opcode);
        EXPECT_EQ(p.ib.bth.dest_qp, full.ib.bth.dest_qp);
        EXPECT_EQ(p.ib.bth.psn, full.ib.bth.psn);
        EXPECT_EQ(p.icrc, CrcStatus::unverifiable);
        if (n >= full.bth_offset + full.ib.header_len) {
          EXPECT_EQ(p.ib.present, full.ib.present);
        }
      } else {
        EXPECT_FALSE(p.has_bth);
      }
    }
  }
}

TEST(Truncation, EveryCutOfEveryFixtureAsAShortPacket) {
  // The wire length is cut too: the headers' own lengths now lie. No crash, and a
  // complete-looking packet whose length fields disagree is an error, not "truncated".
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    for (std::size_t n = 0; n < c.frame.size(); ++n) {
      SCOPED_TRACE(n);
      const DecodedPacket p = decode_cut(c, n, static_cast<std::uint32_t>(n));
      EXPECT_NE(p.icrc, CrcStatus::ok);
      EXPECT_FALSE(p.diags.contains(DiagCode::truncated));
    }
  }
}

// Regression: a frame whose packet rdmadiag does not decode (here an ARP request,
// 42 bytes) cut by the snap length was not counted truncated; tshark marks every
// frame with a captured length below its wire length "[Packet size limited during
// capture]" (the hunt's 3 ARP + 2 RoCE frames cut by editcap -s 20: tshark 5, rdmadiag 2).
TEST(Truncation, AFrameOfAnUndecodedProtocolCutBySnapLength) {
  fixtures::Frame arp(real_frames::kSendOnly.begin(), real_frames::kSendOnly.begin() + 12);  // the MACs
  const std::uint8_t rest[] = {0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1};  // ARP, Ethernet/IPv4, request
  arp.insert(arp.end(), std::begin(rest), std::end(rest));
  arp.resize(42, 0x0a);
  EXPECT_FALSE(fixtures::decode(linktype::kEthernet, arp).truncated);
  for (std::size_t n : {0u, 13u, 20u, 41u}) {
    SCOPED_TRACE(n);
    EXPECT_TRUE(fixtures::decode(linktype::kEthernet, arp, n).truncated);
  }
  // A packet whose end its IP header gives: cutting only the Ethernet padding after it is not a cut packet.
  fixtures::Frame padded = real_frames::kAck;
  const std::size_t end = padded.size();
  padded.resize(end + 8, 0);
  EXPECT_FALSE(fixtures::decode(linktype::kEthernet, padded, end).truncated);
}

// Regression: a record whose original length is below its captured length (a
// damaged record header; rxe_send_lat.pcap's frame 3 rewritten to len 88,
// caplen 98) got no diagnostic. tshark flags it "Frame length is less than
// captured length" (Error/Malformed) and dissects the captured bytes all the
// same; so does rdmadiag now.
TEST(Truncation, AWireLengthBelowTheCapturedLengthIsADamagedRecord) {
  const fixtures::Frame& ack = real_frames::kAck;
  const auto wirelen = static_cast<std::uint32_t>(ack.size() - 10);
  DecodedPacket p;
  decode_frame(linktype::kEthernet, Bytes(ack.data(), ack.size()), wirelen, {}, p);
  ASSERT_EQ(p.diags.size(), 1u);
  EXPECT_EQ(p.diags.begin()->code, DiagCode::wire_length_below_captured);
  EXPECT_EQ(p.diags.begin()->severity, Severity::error);
  EXPECT_EQ(p.diags.begin()->offset, wirelen);
  EXPECT_TRUE(p.has_bth);
  EXPECT_EQ(p.icrc, CrcStatus::ok);
  EXPECT_FALSE(p.truncated);
  decode_frame(linktype::kEthernet, Bytes(ack.data(), ack.size()), static_cast<std::uint32_t>(ack.size()), {}, p);
  EXPECT_TRUE(p.diags.empty());
}
