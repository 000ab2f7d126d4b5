// FileReader::window(): records handed out from a mapped window stay readable
// while the window is held, after the reader has moved on to later windows
// (what lets `analyze -j` hand records to other threads without copying).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capture/file_reader.h"

namespace {

constexpr std::uint32_t kRecords = 30000;  // ~30 MB: several 8 MiB windows
constexpr std::uint32_t kLen = 1000;

std::uint8_t pattern(std::uint32_t record, std::uint32_t i) { return static_cast<std::uint8_t>(record * 7 + i); }

std::string write_capture() {
  char path[] = "/tmp/rdmadiag-window-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  FILE* f = ::fdopen(fd, "wb");
  const std::uint32_t head[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  std::fwrite(head, sizeof head, 1, f);
  std::vector<std::uint8_t> data(kLen);
  for (std::uint32_t r = 0; r < kRecords; ++r) {
    const std::uint32_t rec[4] = {r, 0, kLen, kLen};
    std::fwrite(rec, sizeof rec, 1, f);
    for (std::uint32_t i = 0; i < kLen; ++i) data[i] = pattern(r, i);
    std::fwrite(data.data(), kLen, 1, f);
  }
  std::fclose(f);
  return path;
}

bool intact(std::span<const std::uint8_t> d, std::uint32_t record) {
  if (d.size() != kLen) return false;
  for (std::uint32_t i = 0; i < kLen; ++i)
    if (d[i] != pattern(record, i)) return false;
  return true;
}

TEST(FileReaderWindow, HeldWindowsOutliveTheReader) {
  const std::string path = write_capture();
  rdmadiag::capture::FileReader reader;
  ASSERT_TRUE(reader.open(path)) << reader.error();
  std::vector<std::shared_ptr<const void>> held;
  std::vector<std::pair<std::span<const std::uint8_t>, std::uint32_t>> kept;  // every 97th record
  rdmadiag::capture::Record rec;
  std::uint32_t n = 0;
  while (reader.next(rec)) {
    ASSERT_TRUE(intact(rec.data, n)) << "record " << n;
    auto w = reader.window();
    ASSERT_TRUE(w) << "a classic pcap file is read from a mapping";
    if (held.empty() || held.back() != w) held.push_back(w);
    if (n % 97 == 0) kept.emplace_back(rec.data, n);
    ++n;
  }
  EXPECT_EQ(n, kRecords);
  EXPECT_TRUE(reader.stop_reason().empty()) << reader.stop_reason();
  EXPECT_GE(held.size(), 3u) << "the file spans several windows";
  for (const auto& [d, r] : kept) EXPECT_TRUE(intact(d, r)) << "record " << r << " after the reader moved on";
  ::unlink(path.c_str());
}

TEST(FileReaderWindow, StandardInputHasNoWindow) {
  rdmadiag::capture::FileReader reader;
  EXPECT_FALSE(reader.window());
}

}  // namespace
