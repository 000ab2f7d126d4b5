// A capture file cut short while it is being read (a capture still being
// rotated, a copy in progress). Read into a buffer (pread), the reader must
// come up short and hand over to libpcap's verdict, never crash and never
// hand out a record past the cut. Mapped (set_map_windows, analyze -j 1), a
// read of the lost pages raises SIGBUS: the reader must stop with a reason
// instead, and every record before the cut must be its own.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capture/file_reader.h"

using namespace rdmadiag;

namespace {

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// A little-endian microsecond pcap of `records` Ethernet frames of `len` bytes, frame i's bytes all (i & 0xff).
std::vector<std::uint8_t> capture_bytes(std::uint32_t records, std::uint32_t len) {
  std::vector<std::uint8_t> out;
  put32(out, 0xA1B2C3D4);
  out.push_back(2), out.push_back(0), out.push_back(4), out.push_back(0);
  put32(out, 0), put32(out, 0), put32(out, 65535), put32(out, 1);
  for (std::uint32_t i = 0; i < records; ++i) {
    put32(out, 1700000000 + i / 1000), put32(out, i % 1000), put32(out, len), put32(out, len);
    out.insert(out.end(), len, static_cast<std::uint8_t>(i & 0xff));
  }
  return out;
}

class ShrinkingFile : public ::testing::TestWithParam<bool> {};  // the windows mapped, or read into a buffer

TEST_P(ShrinkingFile, ReadsUpToTheCutAndStops) {
  const bool map = GetParam();
  constexpr std::uint32_t kRecords = 8000, kLen = 1000;  // ~8 MB: many read windows
  const std::vector<std::uint8_t> bytes = capture_bytes(kRecords, kLen);
  char path[] = "/tmp/rdmadiag_shrinking_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  capture::FileReader reader;
  reader.set_map_windows(map);
  ASSERT_TRUE(reader.open(path)) << reader.error();
  ASSERT_TRUE(reader.mapped_layout().has_value());  // the fast path is the one under test
  capture::Record rec;
  ASSERT_TRUE(reader.next(rec));
  // Cut the file inside record 3000 while the reader is in its first window.
  const std::size_t cut = 24 + 3000 * std::size_t{16 + kLen} + 500;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(cut)), 0);
  std::uint64_t n = 1;
  std::uint64_t first_bad = 0;  // 1 + the first record handed out with bytes that are not its own
  if (!(rec.caplen == kLen && rec.data[0] == 0)) first_bad = 1;
  while (reader.next(rec)) {
    const bool intact = rec.caplen == kLen && rec.data[0] == static_cast<std::uint8_t>(n & 0xff) &&
                        rec.data[kLen - 1] == static_cast<std::uint8_t>(n & 0xff);
    if (!intact && !first_bad) first_bad = n + 1;
    ++n;
  }
  if (map) {
    // The window was mapped before the cut: past it, the kernel may keep some
    // of the pages (their old bytes read, as from a window copied before the
    // cut), zero the rest of the page the cut is in, and drop the others
    // (SIGBUS: read as zeros). Every record before the cut must be its own,
    // and the reader must stop with a reason that says the file changed.
    EXPECT_TRUE(first_bad == 0 || first_bad > 3000) << "record " << first_bad - 1 << " of " << n << " is not its own";
    EXPECT_LT(n, kRecords);
    EXPECT_NE(reader.stop_reason().find("shrank while it was read"), std::string::npos) << reader.stop_reason();
  } else {
    EXPECT_EQ(first_bad, 0u) << "record " << first_bad - 1 << " is not its own";
    EXPECT_LE(n, 3000u);  // nothing from past the cut
    EXPECT_FALSE(reader.stop_reason().empty()) << "a cut record must be reported, as libpcap does";
  }
  EXPECT_GE(n, 200u);  // the first window (256 KiB) was read whole
  ::close(fd);
  ::unlink(path);
}

// What analyze -j N's whole-file mapping relies on (cli/split_read.cpp): a
// guarded mapping of a file cut while mapped reads zeros past the cut instead
// of raising SIGBUS, and says so; one mapping is guarded at a time.
TEST(GuardedMapping, ReadsOfACutFileGiveZerosAndSaySo) {
  constexpr std::size_t kBytes = 64 * 4096;
  const std::vector<std::uint8_t> bytes(kBytes, 0xAB);
  char path[] = "/tmp/rdmadiag_guarded_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  void* m = ::mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  const auto* p = static_cast<const volatile std::uint8_t*>(m);
  ASSERT_TRUE(capture::guard_mapping(m, kBytes));
  EXPECT_FALSE(capture::guard_mapping(static_cast<const std::uint8_t*>(m) + 4096, 4096));  // one at a time
  EXPECT_EQ(p[10 * 4096], 0xAB);
  EXPECT_FALSE(capture::mapping_cut());
  ASSERT_EQ(::ftruncate(fd, 8 * 4096), 0);
  EXPECT_EQ(p[4096], 0xAB);             // before the cut: the file's bytes
  EXPECT_EQ(p[40 * 4096 + 5], 0);       // past it: zeros, not SIGBUS
  EXPECT_EQ(p[kBytes - 1], 0);
  EXPECT_TRUE(capture::mapping_cut());
  capture::clear_mapping_cut();
  capture::unguard_mapping(m);
  EXPECT_TRUE(capture::guard_mapping(m, kBytes));  // free again
  capture::unguard_mapping(m);
  ::munmap(m, kBytes);
  ::close(fd);
  ::unlink(path);
}

INSTANTIATE_TEST_SUITE_P(Windows, ShrinkingFile, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Mapped" : "Copied"; });

}  // namespace
