// The merged-points hint's copy count (decode/copy_detector.h) on frames whose
// copies are planted by construction: the expected counts follow from where the
// copies are, the sample (the first 8,192 of every 65,536 frames, each block
// afresh), the 1 ms window and the 16 recent frames.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "decode/copy_detector.h"

namespace {

using rdmadiag::decode::CopyDetector;

// A 100-byte frame that differs from every other `id`'s in its first bytes.
std::array<std::uint8_t, 100> frame(std::uint64_t id) {
  std::array<std::uint8_t, 100> f{};
  std::memcpy(f.data() + 20, &id, sizeof id);
  return f;
}

TEST(CopyDetector, CountsCopiesInTheSampledPartOfEachBlock) {
  CopyDetector d;
  constexpr std::uint64_t kPairs = CopyDetector::kBlock + 50;  // 2 blocks + 100 frames
  for (std::uint64_t i = 0; i < kPairs; ++i) {
    const auto f = frame(i);
    d.add(f, 1000 * i);
    d.add(f, 1000 * i + 4);  // its copy 4 ns later
  }
  // Examined: frames 0-8191 (4096 pairs), 65536-73727 (4096), 131072-131171 (50).
  EXPECT_EQ(d.frames(), 2 * CopyDetector::kExamined + 100);
  EXPECT_EQ(d.copies(), CopyDetector::kExamined + 50);
  EXPECT_TRUE(d.looks_merged());
}

// add_lazy (analyze -j's assign step) counts as add does, and reads only the sampled frames.
TEST(CopyDetector, LazyAddReadsOnlyTheSample) {
  CopyDetector eager, lazy;
  std::uint64_t reads = 0;
  constexpr std::uint64_t kPairs = CopyDetector::kBlock + 50;
  for (std::uint64_t i = 0; i < kPairs; ++i) {
    const auto f = frame(i);
    for (std::int64_t ts : {static_cast<std::int64_t>(1000 * i), static_cast<std::int64_t>(1000 * i + 4)}) {
      eager.add(f, ts);
      lazy.add_lazy([&] {
        ++reads;
        return std::pair{rdmadiag::decode::Bytes(f), ts};
      });
    }
  }
  EXPECT_EQ(lazy.frames(), eager.frames());
  EXPECT_EQ(lazy.copies(), eager.copies());
  EXPECT_EQ(reads, 2 * CopyDetector::kExamined + 100);
}

TEST(CopyDetector, ABlockStartsAfresh) {
  CopyDetector d;
  // Every frame unique, at one time stamp; frame 65536 (the next block's first)
  // repeats frame 8191 (the last one examined before it).
  for (std::uint64_t i = 0; i <= CopyDetector::kBlock; ++i) {
    const auto f = frame(i == CopyDetector::kBlock ? CopyDetector::kExamined - 1 : i);
    d.add(f, 0);
  }
  EXPECT_EQ(d.frames(), CopyDetector::kExamined + 1);
  EXPECT_EQ(d.copies(), 0u);
}

TEST(CopyDetector, OnlyRecentFramesWithinTheWindow) {
  CopyDetector d;
  const auto a = frame(1), b = frame(2);
  d.add(a, 0);
  d.add(a, CopyDetector::kWindowNs + 1);  // too late: not a copy (a new original)
  EXPECT_EQ(d.copies(), 0u);
  d.add(b, 10'000'000);
  for (std::uint64_t i = 0; i < CopyDetector::kRecent; ++i) d.add(frame(100 + i), 10'000'000);
  d.add(b, 10'000'000);  // 17 frames back: out of the recent ones
  EXPECT_EQ(d.copies(), 0u);
  d.add(b, 10'000'001);  // the previous one is recent
  EXPECT_EQ(d.copies(), 1u);
  EXPECT_FALSE(d.looks_merged());  // fewer than 8 copies
}

}  // namespace
