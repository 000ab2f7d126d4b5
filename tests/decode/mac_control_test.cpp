// MAC Control frames built byte by byte from the layouts in IEEE 802.3 Annex
// 31B (PAUSE) and 31D (PFC, IEEE 802.1Qbb): every field decoded, VLAN tags
// followed, and every cut of the frame (by snap length, and a frame that is
// itself too short) reported without reading past the captured bytes.
#include <gtest/gtest.h>

#include <memory>

#include "decode/packet.h"
#include "fixtures.h"

using namespace rdmadiag::decode;

namespace {

// 01-80-C2-00-00-01 <- 02-00-00-00-00-0a, Ethertype 0x8808, then `body`, padded to 60 bytes.
fixtures::Frame mac_control_frame(std::initializer_list<std::uint8_t> body) {
  fixtures::Frame f(60, 0);
  const std::uint8_t header[] = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x88, 0x08};
  std::size_t at = 0;
  for (std::uint8_t b : header) f[at++] = b;
  for (std::uint8_t b : body) f[at++] = b;
  return f;
}

// PFC: opcode 0x0101, enable vector 0x0009 (priorities 0 and 3), time[0] = 0xFFFF,
// time[3] = 0x1234, time[5] = 7 (bit 5 clear: meaningless, still decoded).
const fixtures::Frame kPfc = mac_control_frame({0x01, 0x01, 0x00, 0x09, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x12,
                                                0x34, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00});
const fixtures::Frame kPause = mac_control_frame({0x00, 0x01, 0x02, 0x00});  // pause_time 512 quanta

DecodedPacket decode_cut(const fixtures::Frame& f, std::size_t n, std::uint32_t wirelen) {
  std::unique_ptr<std::uint8_t[]> block(new std::uint8_t[n ? n : 1]);  // any over-read is an ASan error
  std::copy_n(f.begin(), n, block.get());
  DecodedPacket p;
  decode_frame(linktype::kEthernet, Bytes(block.get(), n), wirelen, {}, p);
  return p;
}

}  // namespace

TEST(MacControl, PfcFields) {
  const DecodedPacket p = fixtures::decode(linktype::kEthernet, kPfc);
  ASSERT_TRUE(p.mac_control);
  const MacControl& m = *p.mac_control;
  EXPECT_TRUE(m.is_pfc());
  EXPECT_EQ(m.enable_vector, 0x0009);
  EXPECT_EQ(m.quanta, (std::array<std::uint16_t, 8>{0xFFFF, 0, 0, 0x1234, 0, 7, 0, 0}));
  EXPECT_TRUE(m.enables(0));
  EXPECT_TRUE(m.enables(3));
  EXPECT_FALSE(m.enables(5));
  EXPECT_FALSE(m.reserved_bits);
  EXPECT_EQ(m.length, 20);
  EXPECT_EQ(p.eth->dst, kMacControlMulticast);
  EXPECT_EQ(p.transport, Transport::other);
  EXPECT_TRUE(p.diags.empty());
}

TEST(MacControl, PauseSpeaksForEveryPriority) {
  const DecodedPacket p = fixtures::decode(linktype::kEthernet, kPause);
  ASSERT_TRUE(p.mac_control);
  EXPECT_TRUE(p.mac_control->is_pause());
  EXPECT_EQ(p.mac_control->pause_quanta, 512);
  for (std::size_t n = 0; n < kPriorities; ++n) {
    EXPECT_TRUE(p.mac_control->enables(n));
    EXPECT_EQ(p.mac_control->quanta_for(n), 512);
  }
  EXPECT_TRUE(p.diags.empty());
}

TEST(MacControl, VlanTaggedPfc) {
  const auto tagged = fixtures::with_vlan_tags(kPfc, {{0x8100, 0x6005}});  // PCP 3, VID 5
  const DecodedPacket p = fixtures::decode(linktype::kEthernet, tagged);
  ASSERT_TRUE(p.mac_control);
  EXPECT_EQ(p.eth->vlan_count, 1);
  EXPECT_EQ(p.mac_control->quanta[3], 0x1234);
}

TEST(MacControl, ReservedVectorBitsWarnButDecode) {
  const auto f = mac_control_frame({0x01, 0x01, 0x80, 0x01, 0x00, 0x10});
  const DecodedPacket p = fixtures::decode(linktype::kEthernet, f);
  ASSERT_TRUE(p.mac_control);
  EXPECT_TRUE(p.mac_control->reserved_bits);
  EXPECT_TRUE(p.mac_control->enables(0));
  EXPECT_FALSE(p.mac_control->enables(7));  // the reserved octet enables nothing
  EXPECT_EQ(p.mac_control->quanta[0], 0x10);
  ASSERT_EQ(p.diags.size(), 1u);
  EXPECT_EQ(p.diags.begin()->code, DiagCode::pfc_reserved_bits);
  EXPECT_EQ(p.diags.begin()->offset, 16u);
}

TEST(MacControl, OtherOpcodeDecodedToTheOpcodeOnly) {
  const DecodedPacket p = fixtures::decode(linktype::kEthernet, mac_control_frame({0x00, 0x02, 0xAA, 0xBB}));
  ASSERT_TRUE(p.mac_control);
  EXPECT_EQ(p.mac_control->opcode, 2);
  EXPECT_FALSE(p.mac_control->enables(0));
  EXPECT_TRUE(p.diags.empty());
}

// A cut inside the opcode's fields: truncated (a note) when the snap length cut
// it, bad_mac_control (an error) when the frame itself is that short; past the
// fields nothing is lost and no diagnostic is raised.
TEST(MacControl, EveryCut) {
  for (const fixtures::Frame* f : {&kPfc, &kPause}) {
    const DecodedPacket whole = fixtures::decode(linktype::kEthernet, *f);
    const std::size_t end = 14 + whole.mac_control->length;
    for (std::size_t n = 0; n < f->size(); ++n) {
      SCOPED_TRACE(n);
      const DecodedPacket snap = decode_cut(*f, n, static_cast<std::uint32_t>(f->size()));
      const DecodedPacket runt = decode_cut(*f, n, static_cast<std::uint32_t>(n));
      if (n >= end) {
        ASSERT_TRUE(snap.mac_control);
        EXPECT_EQ(snap.mac_control->quanta, whole.mac_control->quanta);
        EXPECT_EQ(snap.mac_control->pause_quanta, whole.mac_control->pause_quanta);
        EXPECT_TRUE(snap.diags.empty());
        EXPECT_TRUE(runt.diags.empty());
        continue;
      }
      EXPECT_FALSE(snap.mac_control);
      EXPECT_FALSE(runt.mac_control);
      EXPECT_TRUE(snap.truncated);
      ASSERT_EQ(snap.diags.size(), 1u);
      EXPECT_EQ(snap.diags.begin()->code, DiagCode::truncated);
      ASSERT_EQ(runt.diags.size(), 1u);
      EXPECT_EQ(runt.diags.begin()->code, n < 14 ? DiagCode::frame_too_short : DiagCode::bad_mac_control);
      if (n >= 14) {
        EXPECT_EQ(runt.diags.begin()->offset, 14u);
      }
    }
  }
}
