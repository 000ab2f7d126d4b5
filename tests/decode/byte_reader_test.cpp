#include "decode/byte_reader.h"

#include <gtest/gtest.h>

#include <array>

using rdmadiag::decode::ByteReader;
using rdmadiag::decode::Bytes;

TEST(ByteReader, ReadsBigEndianFields) {
  const std::array<std::uint8_t, 8> b = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0};
  ByteReader r{Bytes(b)};
  EXPECT_EQ(r.u8(0), 0x12);
  EXPECT_EQ(r.be16(1), 0x3456);
  EXPECT_EQ(r.be24(1), 0x345678u);
  EXPECT_EQ(r.be32(4), 0x9abcdef0u);
  EXPECT_EQ(r.be64(0), 0x123456789abcdef0ull);
  EXPECT_EQ(r.le32(0), 0x78563412u);
  EXPECT_FALSE(r.overrun());
}

TEST(ByteReader, OutOfRangeReadsReturnZeroAndLatch) {
  const std::array<std::uint8_t, 3> b = {1, 2, 3};
  ByteReader r{Bytes(b)};
  EXPECT_TRUE(r.has(0, 3));
  EXPECT_FALSE(r.has(1, 3));
  EXPECT_FALSE(r.has(4, 0));
  EXPECT_FALSE(r.has(SIZE_MAX, 2));  // no wrap-around in the check
  EXPECT_EQ(r.be32(0), 0u);
  EXPECT_TRUE(r.overrun());
  ByteReader r2{Bytes(b)};
  EXPECT_TRUE(r2.sub(2, 5).empty());
  EXPECT_TRUE(r2.overrun());
  ByteReader r3{Bytes(b)};
  EXPECT_EQ(r3.from(3).size(), 0u);
  EXPECT_FALSE(r3.overrun());
}
