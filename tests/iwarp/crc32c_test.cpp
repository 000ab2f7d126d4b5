// CRC32c known answers from RFC 3720 appendix B.4 (iSCSI), the CRC MPA uses
// (RFC 5044 section 6.2), and the table code against a bit-at-a-time version.
#include <gtest/gtest.h>

#include <vector>

#include "decode/crc32c.h"

using namespace rdmadiag::decode;

namespace {
std::uint32_t crc32c_bitwise(const std::vector<std::uint8_t>& b) {
  std::uint32_t c = 0xFFFFFFFF;
  for (auto byte : b) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
  }
  return ~c;
}
}  // namespace

TEST(Crc32c, Rfc3720KnownAnswers) {
  std::vector<std::uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<std::uint8_t>(i);
    dec[i] = static_cast<std::uint8_t>(31 - i);
  }
  // RFC 3720 B.4 lists the CRC bytes as they go on the wire (little-endian).
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec), 0x113FDB5Cu);
  // The iSCSI SCSI Read (10) command PDU of B.4.
  const std::vector<std::uint8_t> pdu = {
      0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(crc32c(pdu), 0xD9963A56u);
}

// ISA-L's vector code takes other paths by length (under 16, 64, 256 bytes and
// past them, with tails): every length up to 1,100 (a 1,024-byte MTU's FPDU).
TEST(Crc32c, MatchesBitwiseAtEveryLengthAndSplit) {
  std::vector<std::uint8_t> b(1100);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 131 + 7);
  for (std::size_t n = 0; n <= b.size(); ++n) {
    std::vector<std::uint8_t> v(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    ASSERT_EQ(crc32c(v), crc32c_bitwise(v)) << n;
    const std::size_t half = n / 3;
    const std::uint32_t split = crc32c_final(crc32c_update(crc32c_update(kCrc32cInit, Bytes(v).first(half)), Bytes(v).subspan(half)));
    ASSERT_EQ(split, crc32c_bitwise(v)) << n;
  }
}

// A real FPDU from siw_mpacrc_write_lat.pcap frame 14 (MPA CRC negotiated): the
// first Send after the negotiation; tshark shows its CRC field as 0x47a228f1.
TEST(Crc32c, RealSiwFpdu) {
  const std::vector<std::uint8_t> fpdu = {0x00, 0x22, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x01,
                                          0, 0, 0, 0, 0x36, 0x2e, 0x30, 0x36, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(fpdu.size(), 36u);
  EXPECT_EQ(crc32c(fpdu), 0xF128A247u);  // wire bytes 47 a2 28 f1: little-endian
}
