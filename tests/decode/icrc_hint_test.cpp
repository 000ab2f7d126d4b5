// An ICRC verified ahead of the decode (decode/icrc_hint.h, used by analyze -j's
// walker): made only where the ICRC holds, and used by decode_frame() only on
// the spans it covered, so a decode with it says what one without it says.
// Frames: real Soft-RoCE frames (tests/decode/real_frames.h), whose ICRCs the
// kernel's rxe computed and its peer accepted.
#include <gtest/gtest.h>

#include <vector>

#include "decode/icrc_hint.h"
#include "decode/packet.h"
#include "real_frames.h"

using namespace rdmadiag::decode;

namespace {

const std::vector<const std::vector<std::uint8_t>*> kRoceV2Frames = {
    &real_frames::kCmReq,     &real_frames::kSendOnly,  &real_frames::kAck,          &real_frames::kWriteOnly,
    &real_frames::kReadRequest, &real_frames::kReadResponseOnly, &real_frames::kWriteFirst, &real_frames::kNakSeqError};

DecodedPacket decode(Bytes frame, const IcrcHint& hint = {}) {
  DecodedPacket p;
  decode_frame(linktype::kEthernet, frame, static_cast<std::uint32_t>(frame.size()), DecodeOptions{}, p, hint);
  return p;
}

void expect_same_icrc(const DecodedPacket& a, const DecodedPacket& b) {
  EXPECT_EQ(a.icrc, b.icrc);
  EXPECT_EQ(a.icrc_wire, b.icrc_wire);
  EXPECT_EQ(a.icrc_computed, b.icrc_computed);
  EXPECT_EQ(a.icrc_offset, b.icrc_offset);
  EXPECT_EQ(a.diags.size(), b.diags.size());
  EXPECT_EQ(a.payload_len, b.payload_len);
}

}  // namespace

TEST(IcrcHint, MadeForEveryRealRoceV2FrameAndChangesNothing) {
  for (const auto* f : kRoceV2Frames) {
    const Bytes frame(*f);
    const DecodedPacket plain = decode(frame);
    ASSERT_EQ(plain.icrc, CrcStatus::ok);
    const IcrcHint hint = verified_icrc_hint(linktype::kEthernet, frame);
    ASSERT_TRUE(hint);
    EXPECT_EQ(hint.kind(), IcrcHint::Kind::roce_v2_ipv4);
    EXPECT_EQ(hint.net_off, 14);
    EXPECT_EQ(hint.udp_off(), 34u);
    EXPECT_EQ(hint.icrc_off, frame.size() - 4);  // rxe frames carry no Ethernet padding
    EXPECT_EQ(hint.wire, plain.icrc_wire);
    EXPECT_TRUE(hint.covers(plain.icrc_input, frame));
    expect_same_icrc(decode(frame, hint), plain);
  }
}

TEST(IcrcHint, NoneWhereTheIcrcFails) {
  std::vector<std::uint8_t> bytes = real_frames::kWriteFirst;
  bytes[bytes.size() / 2] ^= 0x10;  // a payload bit
  const Bytes frame(bytes);
  EXPECT_FALSE(verified_icrc_hint(linktype::kEthernet, frame));
  EXPECT_EQ(decode(frame).icrc, CrcStatus::bad);
}

TEST(IcrcHint, NoneOffTheRoceV2Port) {
  // The UDP destination port took a bit error (4791 -> 4787): the decoder's
  // heuristic finds it; the walk leaves it to the decoder.
  const Bytes frame(real_frames::kReadRequestPortBitError);
  EXPECT_FALSE(verified_icrc_hint(linktype::kEthernet, frame));
}

TEST(IcrcHint, NoneForAFrameCutBeforeItsIcrc) {
  const Bytes whole(real_frames::kWriteOnly);
  for (std::size_t n = 0; n < whole.size(); ++n)
    EXPECT_FALSE(verified_icrc_hint(linktype::kEthernet, whole.first(n))) << "cut at " << n;
}

TEST(IcrcHint, NotUsedOnOtherSpans) {
  // A hint names what it covered: given with a frame of another layout, or
  // with spans moved, it is ignored and the decoder finds the damage itself.
  std::vector<std::uint8_t> bytes = real_frames::kWriteFirst;
  bytes[bytes.size() / 2] ^= 0x10;
  const Bytes damaged(bytes);
  const IcrcHint other = verified_icrc_hint(linktype::kEthernet, Bytes(real_frames::kSendOnly));
  ASSERT_TRUE(other);
  EXPECT_EQ(decode(damaged, other).icrc, CrcStatus::bad);

  const IcrcHint own = verified_icrc_hint(linktype::kEthernet, Bytes(real_frames::kWriteFirst));
  ASSERT_TRUE(own);
  std::vector<IcrcHint> moved(3, own);
  moved[0].icrc_off -= 4;
  moved[1].net += 4;  // the UDP header 4 bytes on
  moved[2].net ^= IcrcHint::kIpv6;
  for (const IcrcHint& h : moved) {
    EXPECT_FALSE(h.covers(decode(damaged).icrc_input, damaged));
    EXPECT_EQ(decode(damaged, h).icrc, CrcStatus::bad);
  }
  // Offsets out of order or past the frame (a hint altered, or of a longer frame): never taken apart.
  IcrcHint beyond = own;
  beyond.icrc_off = static_cast<std::uint16_t>(own.udp_off() + 8 + 11);
  EXPECT_FALSE(beyond.covers(decode(damaged).icrc_input, damaged));
  beyond.icrc_off = 60000;
  EXPECT_FALSE(beyond.covers(decode(damaged).icrc_input, damaged));
  EXPECT_EQ(decode(damaged, beyond).icrc, CrcStatus::bad);
  // Its own hint on its own spans is taken as it says: the contract is the same bytes.
  EXPECT_TRUE(own.covers(decode(damaged).icrc_input, damaged));
}

TEST(IcrcHint, RawIpLinkTypes) {
  const Bytes eth(real_frames::kSendOnly);
  const Bytes ip = eth.subspan(14);
  for (std::uint32_t lt : {linktype::kRaw, linktype::kIpv4}) {
    const IcrcHint hint = verified_icrc_hint(lt, ip);
    ASSERT_TRUE(hint) << lt;
    EXPECT_EQ(hint.net_off, 0);
    DecodedPacket plain, hinted;
    decode_frame(lt, ip, static_cast<std::uint32_t>(ip.size()), DecodeOptions{}, plain);
    decode_frame(lt, ip, static_cast<std::uint32_t>(ip.size()), DecodeOptions{}, hinted, hint);
    EXPECT_EQ(plain.icrc, CrcStatus::ok);
    expect_same_icrc(hinted, plain);
  }
  EXPECT_FALSE(verified_icrc_hint(linktype::kIpv6, ip));  // an IPv4 header is no IPv6 one
}
