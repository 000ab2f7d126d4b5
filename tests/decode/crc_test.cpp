// CRC known answers, and ICRC/VCRC of a native-IB packet checked against
// bit-by-bit implementations written here straight from the definitions
// (IBA Vol 1 section 7.8; masking rules in docs/protocols.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "decode/analyzer.h"
#include "decode/crc.h"
#include "decode/packet.h"
#include "decode/transport_analysis.h"
#include "real_frames.h"

using namespace rdmadiag::decode;

namespace {
Bytes str(std::string_view s) { return Bytes(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()); }

// Reflected CRC-32, polynomial 0x04C11DB7, one bit at a time.
std::uint32_t crc32_bitwise(const std::vector<std::uint8_t>& b) {
  std::uint32_t c = 0xFFFFFFFF;
  for (auto byte : b) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

// CRC-16 with polynomial 0x100B, computed MSB-first on bit-reversed input, to be
// independent of the reflected table implementation under test.
std::uint16_t vcrc_bitwise(const std::vector<std::uint8_t>& b) {
  auto rev8 = [](std::uint8_t v) { std::uint8_t r = 0; for (int i = 0; i < 8; ++i) if (v & (1 << i)) r |= 1 << (7 - i); return r; };
  std::uint16_t c = 0xFFFF;
  for (auto byte : b) {
    c ^= static_cast<std::uint16_t>(rev8(byte) << 8);
    for (int k = 0; k < 8; ++k) c = (c & 0x8000) ? static_cast<std::uint16_t>((c << 1) ^ 0x100B) : static_cast<std::uint16_t>(c << 1);
  }
  std::uint16_t r = 0;
  for (int i = 0; i < 16; ++i) if (c & (1 << i)) r |= static_cast<std::uint16_t>(1 << (15 - i));
  return static_cast<std::uint16_t>(r ^ 0xFFFF);
}

void put_le32(std::vector<std::uint8_t>& v, std::uint32_t x) { for (int i = 0; i < 4; ++i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i))); }
void put_le16(std::vector<std::uint8_t>& v, std::uint16_t x) { v.push_back(static_cast<std::uint8_t>(x)); v.push_back(static_cast<std::uint8_t>(x >> 8)); }

// A native IB RC SEND ONLY: LRH (LNH=2) + BTH + 8 bytes payload, ICRC and VCRC
// computed by the bitwise functions above over the spec's masked copy.
std::vector<std::uint8_t> native_ib_send(std::uint8_t vl) {
  std::vector<std::uint8_t> pkt = {
      static_cast<std::uint8_t>(vl << 4), 0x02, 0x00, 0x05, 0x00, 0x00, 0x00, 0x07,  // LRH, length patched below
      0x04, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x42, 0x80, 0x12, 0x34, 0x56,      // BTH
      1, 2, 3, 4, 5, 6, 7, 8};
  const std::size_t words = (pkt.size() + 4) / 4;
  pkt[4] = static_cast<std::uint8_t>(words >> 8);
  pkt[5] = static_cast<std::uint8_t>(words);
  auto masked = pkt;
  masked[0] |= 0xF0;   // VL
  masked[8 + 4] = 0xFF;  // BTH byte 4
  put_le32(pkt, crc32_bitwise(masked));
  put_le16(pkt, vcrc_bitwise(pkt));
  return pkt;
}
}  // namespace

TEST(Crc32, KnownAnswer) {
  EXPECT_EQ(crc32_update(0, str("123456789")), 0xCBF43926u);
  EXPECT_EQ(crc32_update(crc32_update(0, str("1234")), str("56789")), 0xCBF43926u);  // chaining
  EXPECT_EQ(crc32_update(0, Bytes{}), 0u);
}

// The library's vector code takes other paths by length (under 16, 64, 256
// bytes and past them, with tails): every length up to a 1,100-byte payload,
// whole and in two calls (the ICRC's masked headers, then the rest).
TEST(Crc32, MatchesBitwiseAtEveryLengthAndSplit) {
  std::vector<std::uint8_t> b(1100);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 131 + 7);
  for (std::size_t n = 0; n <= b.size(); ++n) {
    const std::vector<std::uint8_t> v(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    ASSERT_EQ(crc32_update(0, Bytes(v)), crc32_bitwise(v)) << n;
    const std::size_t head = std::min<std::size_t>(n, 48);
    ASSERT_EQ(crc32_update(crc32_update(0, Bytes(v).first(head)), Bytes(v).subspan(head)), crc32_bitwise(v)) << n;
  }
}

TEST(Vcrc, MatchesBitwiseDefinition) {
  std::vector<std::uint8_t> b = {0xF0, 0x12, 0x00, 0x01, 0x00, 0x06, 0xFF, 0xFF, 0x00, 0x11, 0x22};
  EXPECT_EQ(vcrc16(Bytes(b)), vcrc_bitwise(b));
  std::vector<std::uint8_t> nine(str("123456789").begin(), str("123456789").end());
  EXPECT_EQ(vcrc16(Bytes(nine)), vcrc_bitwise(nine));
}

TEST(NativeIb, IcrcAndVcrcOnAHandBuiltPacket) {
  for (std::uint8_t vl : {0, 3, 15}) {
    const auto pkt = native_ib_send(vl);
    DecodedPacket p;
    decode_frame(linktype::kInfiniband, Bytes(pkt), static_cast<std::uint32_t>(pkt.size()), {}, p);
    EXPECT_EQ(p.transport, Transport::ib);
    ASSERT_TRUE(p.lrh);
    EXPECT_EQ(p.lrh->vl, vl);
    EXPECT_EQ(p.lrh->dlid, 5);
    EXPECT_EQ(p.lrh->slid, 7);
    ASSERT_TRUE(p.has_bth);
    EXPECT_EQ(p.ib.bth.dest_qp, 0x42u);
    EXPECT_EQ(p.ib.bth.psn, 0x123456u);
    EXPECT_EQ(p.payload_len, 8u);
    EXPECT_EQ(p.icrc, CrcStatus::ok);  // VL is masked: the ICRC holds whatever the VL
    EXPECT_EQ(p.vcrc, CrcStatus::ok);
  }
}

TEST(NativeIb, ErfType21Record) {
  const auto pkt = native_ib_send(0);
  std::vector<std::uint8_t> rec = {0, 0, 0, 0, 0, 0, 0, 0, kErfTypeInfiniband, 0x04, 0, 0, 0, 0, 0, 0};
  const std::size_t rlen = 16 + pkt.size();
  rec[10] = static_cast<std::uint8_t>(rlen >> 8);
  rec[11] = static_cast<std::uint8_t>(rlen);
  rec[15] = static_cast<std::uint8_t>(pkt.size());
  rec.insert(rec.end(), pkt.begin(), pkt.end());
  DecodedPacket p;
  decode_frame(linktype::kErf, Bytes(rec), static_cast<std::uint32_t>(rec.size()), {}, p);
  ASSERT_TRUE(p.erf);
  EXPECT_EQ(p.erf->type, kErfTypeInfiniband);
  EXPECT_EQ(p.ib.bth.psn, 0x123456u);
  EXPECT_EQ(p.icrc, CrcStatus::ok);
  EXPECT_EQ(p.vcrc, CrcStatus::ok);
}

namespace {
// An ERF type 21 record around `pkt` (what ibdump writes), with `ext`
// extension headers (type bit 0x80 chains them).
std::vector<std::uint8_t> erf_ib_record(const std::vector<std::uint8_t>& pkt, int ext) {
  std::vector<std::uint8_t> rec = {0, 0, 0, 0, 0, 0, 0, 0, kErfTypeInfiniband, 0x04, 0, 0, 0, 0, 0, 0};
  if (ext) rec[8] |= 0x80;
  for (int i = 0; i < ext; ++i) {
    std::vector<std::uint8_t> e(8, 0);
    e[0] = static_cast<std::uint8_t>(i + 1 < ext ? 0x80 | 0x01 : 0x01);
    rec.insert(rec.end(), e.begin(), e.end());
  }
  const std::size_t rlen = rec.size() + pkt.size();
  rec[10] = static_cast<std::uint8_t>(rlen >> 8);
  rec[11] = static_cast<std::uint8_t>(rlen);
  rec[14] = static_cast<std::uint8_t>(pkt.size() >> 8);
  rec[15] = static_cast<std::uint8_t>(pkt.size());
  rec.insert(rec.end(), pkt.begin(), pkt.end());
  return rec;
}
}  // namespace

// Regression (issue 15, class 5a): the ERF record header was counted in the
// packet's length, so every byte total of an ibdump capture was 16 bytes per
// packet too high. The IB packet's length comes from its own bytes: LRH PktLen
// counts 4-byte words from the LRH to the ICRC, and the 2-byte VCRC follows
// (IBA Vol 1 section 7.7.8); tshark's frame.len on ERF says the same.
TEST(NativeIb, ErfRecordHeaderIsNotCountedInThePacketLength) {
  const auto pkt = native_ib_send(0);
  const std::uint32_t ib_len = (static_cast<std::uint32_t>(pkt[4] & 0x07) << 8 | pkt[5]) * 4 + 2;
  ASSERT_EQ(ib_len, pkt.size());
  for (int ext : {0, 2}) {
    const auto rec = erf_ib_record(pkt, ext);
    DecodedPacket p;
    decode_frame(linktype::kErf, Bytes(rec), static_cast<std::uint32_t>(rec.size()), {}, p);
    ASSERT_TRUE(p.erf);
    EXPECT_EQ(p.erf->header_len, 16u + 8u * ext);
    EXPECT_EQ(p.wirelen, ib_len);
    EXPECT_EQ(p.caplen, ib_len);
    EXPECT_EQ(p.vcrc, CrcStatus::ok);
    // Cut by a snap length: still the packet's lengths, the captured part shorter.
    decode_frame(linktype::kErf, Bytes(rec.data(), rec.size() - 6), static_cast<std::uint32_t>(rec.size()), {}, p);
    EXPECT_EQ(p.wirelen, ib_len);
    EXPECT_EQ(p.caplen, ib_len - 6);
  }
}

// Regression: the ERF header's wlen was ignored. A record cut by a snap length
// keeps rlen = header + the bytes kept and wlen = the packet on the wire
// (tshark: frame.len = wlen, frame.cap_len = what was kept); the packet was
// taken as ending with the record, so its LRH and BTH lengths "lied" (bad_lrh,
// payload_length_mismatch errors). It is a cut packet: truncated, not malformed.
TEST(NativeIb, ErfRecordCutBySnapLengthIsTruncatedAtItsWireLength) {
  const auto pkt = native_ib_send(0);
  for (std::size_t keep : {std::size_t{8} + 12 + 4, pkt.size() - 2, std::size_t{4}}) {
    SCOPED_TRACE(keep);
    auto rec = erf_ib_record(pkt, 0);
    rec.resize(16 + keep);
    rec[10] = static_cast<std::uint8_t>(rec.size() >> 8);  // rlen: what the record holds
    rec[11] = static_cast<std::uint8_t>(rec.size());
    DecodedPacket p;
    decode_frame(linktype::kErf, Bytes(rec), static_cast<std::uint32_t>(rec.size()), {}, p);
    EXPECT_EQ(p.wirelen, pkt.size());
    EXPECT_EQ(p.caplen, keep);
    EXPECT_TRUE(p.truncated || p.vcrc == CrcStatus::unverifiable);
    for (const auto& d : p.diags) EXPECT_EQ(d.severity, Severity::note) << to_string(d.code);
    EXPECT_NE(p.icrc, CrcStatus::bad);
    EXPECT_NE(p.vcrc, CrcStatus::bad);
  }
}

// ERF Ethernet (type 2): 2 bytes of offset/pad after the record header; wlen
// counts the FCS (tshark's frame.len does too), whether the record kept it or not.
TEST(NativeIb, ErfEthernetLengthsAreWlenAndWhatTheRecordHolds) {
  const auto& frame = real_frames::kSendOnly;  // RoCEv2 RC SEND ONLY
  const std::size_t wlen = frame.size() + 4;
  for (const bool fcs_kept : {false, true}) {
    std::vector<std::uint8_t> rec = {0, 0, 0, 0, 0, 0, 0, 0, kErfTypeEth, 0x04, 0, 0, 0, 0, 0, 0, 0, 0};
    rec.insert(rec.end(), frame.begin(), frame.end());
    if (fcs_kept) rec.insert(rec.end(), {0x11, 0x22, 0x33, 0x44});  // not checked
    rec[11] = static_cast<std::uint8_t>(rec.size());
    rec[15] = static_cast<std::uint8_t>(wlen);
    DecodedPacket p;
    decode_frame(linktype::kErf, Bytes(rec), static_cast<std::uint32_t>(rec.size()), {}, p);
    EXPECT_EQ(p.wirelen, wlen);
    EXPECT_EQ(p.caplen, fcs_kept ? wlen : frame.size());
    EXPECT_EQ(p.transport, Transport::roce_v2);
    EXPECT_EQ(p.icrc, CrcStatus::ok);
    EXPECT_TRUE(p.diags.empty());
  }
}

// The same through the analysis: capture summary, per-transport and per-opcode
// totals and the queue pair's byte count hold the IB packets' bytes only.
TEST(NativeIb, ErfByteTotalsCountIbPacketsOnly) {
  const auto pkt = native_ib_send(0);
  const auto rec = erf_ib_record(pkt, 1);
  Analyzer an;
  PacketAnalysis out;
  constexpr int kPackets = 3;
  for (int i = 0; i < kPackets; ++i) {
    auto r = rec;
    r[r.size() - pkt.size() + 8 + 11] = static_cast<std::uint8_t>(0x56 + i);  // next PSN (ICRC no longer matters here)
    DecodedPacket p;
    decode_frame(linktype::kErf, Bytes(r), static_cast<std::uint32_t>(r.size()), {}, p);
    an.add(p, static_cast<std::uint64_t>(i + 1), i * 1e-3, out);
  }
  an.finish();
  const std::uint64_t want = kPackets * pkt.size();
  EXPECT_EQ(an.summary().packets, static_cast<std::uint64_t>(kPackets));
  EXPECT_EQ(an.summary().bytes, want);
  EXPECT_EQ(an.summary().by_transport[static_cast<std::size_t>(Transport::ib)].bytes, want);
  EXPECT_EQ(an.summary().by_opcode[0x04].bytes, want);
  ASSERT_EQ(an.transport().flows().size(), 1u);
  EXPECT_EQ(an.transport().flows()[0].bytes, want);
}

TEST(NativeIb, FlippedBitsAreCaughtByTheRightCrc) {
  auto pkt = native_ib_send(0);
  auto flip_vl = pkt;
  flip_vl[0] ^= 0x10;  // VL: variant, so only the VCRC sees it
  DecodedPacket p;
  decode_frame(linktype::kInfiniband, Bytes(flip_vl), static_cast<std::uint32_t>(flip_vl.size()), {}, p);
  EXPECT_EQ(p.icrc, CrcStatus::ok);
  EXPECT_EQ(p.vcrc, CrcStatus::bad);
  auto flip_payload = pkt;
  flip_payload[22] ^= 0x01;
  decode_frame(linktype::kInfiniband, Bytes(flip_payload), static_cast<std::uint32_t>(flip_payload.size()), {}, p);
  EXPECT_EQ(p.icrc, CrcStatus::bad);
  EXPECT_EQ(p.vcrc, CrcStatus::bad);
  EXPECT_TRUE(p.diags.contains(DiagCode::icrc_bad));
}
