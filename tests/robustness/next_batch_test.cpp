// FileReader::next_batch (capture/file_reader.h): every record of a batch must
// still hold its own bytes when the batch is complete, although the reader
// reads the file a window at a time into one buffer (analyze decodes a whole
// batch before it analyses any of it). Files of several windows, with records
// of many sizes (some near the window's size), so that batches end at window
// edges; the records and the verdict must be next()'s, and a file cut inside
// a record must stop after the same record with the same reason. All of it
// again with the windows mapped (set_map_windows, as analyze -j 1 reads), and
// a mapped file cut while it is read must stop with a reason, not SIGBUS.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "capture/file_reader.h"

using namespace rdmadiag;

namespace {

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// Record i's length: mostly small, every 97th about 60 KB, every 389th about 200 KB.
std::uint32_t record_len(std::uint32_t i) {
  if (i % 389 == 0) return 200'000 + i % 7;
  if (i % 97 == 0) return 60'000 + i % 13;
  return 60 + (i * 37) % 1400;
}

// A little-endian microsecond pcap (snap length 262144); record i's bytes are
// (i + j) & 0xff for byte j, so a byte out of place shows.
std::vector<std::uint8_t> capture_bytes(std::uint32_t records) {
  std::vector<std::uint8_t> out;
  put32(out, 0xA1B2C3D4);
  out.push_back(2), out.push_back(0), out.push_back(4), out.push_back(0);
  put32(out, 0), put32(out, 0), put32(out, 262144), put32(out, 1);
  for (std::uint32_t i = 0; i < records; ++i) {
    const std::uint32_t len = record_len(i);
    put32(out, 1700000000 + i / 1000), put32(out, i % 1000), put32(out, len), put32(out, len);
    for (std::uint32_t j = 0; j < len; ++j) out.push_back(static_cast<std::uint8_t>(i + j));
  }
  return out;
}

std::string write_file(const std::vector<std::uint8_t>& bytes, const char* name) {
  const std::string path = ::testing::TempDir() + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  return path;
}

bool holds_record(const capture::Record& rec, std::uint32_t i) {
  if (rec.caplen != record_len(i) || rec.data.size() != rec.caplen || rec.ts_nsec != (i % 1000) * 1000u) return false;
  for (std::uint32_t j = 0; j < rec.caplen; ++j)
    if (rec.data[j] != static_cast<std::uint8_t>(i + j)) return false;
  return true;
}

struct Outcome {
  std::uint32_t records = 0;
  std::uint32_t batches = 0;
  std::uint32_t longest = 0;
  std::string stop_reason;
};

// Reads `path` in batches of `n`, checking every record of each batch once the batch is complete.
Outcome read_batches(const std::string& path, std::size_t n, bool map) {
  capture::FileReader reader;
  reader.set_map_windows(map);
  EXPECT_TRUE(reader.open(path)) << reader.error();
  std::array<capture::Record, 16> batch;
  Outcome o;
  while (const std::size_t got = reader.next_batch(std::span(batch.data(), n))) {
    EXPECT_LE(got, n);
    for (std::size_t k = 0; k < got; ++k)
      EXPECT_TRUE(holds_record(batch[k], o.records + static_cast<std::uint32_t>(k)))
          << "record " << o.records + k << " of a batch of " << got;
    o.records += static_cast<std::uint32_t>(got);
    o.longest = std::max(o.longest, static_cast<std::uint32_t>(got));
    ++o.batches;
  }
  EXPECT_EQ(reader.next_batch(std::span(batch.data(), n)), 0u);  // the end stays the end
  EXPECT_EQ(reader.records_read(), o.records);
  o.stop_reason = reader.stop_reason();
  return o;
}

constexpr std::uint32_t kRecords = 6000;  // ~10 MB: about 40 windows of 256 KiB
constexpr std::uint32_t kMappedRecords = 18000;  // ~30 MB: 4 mapped windows of 8 MiB

class NextBatch : public ::testing::TestWithParam<bool> {};  // the windows mapped, or read into a buffer

TEST_P(NextBatch, EveryRecordOfABatchKeepsItsBytes) {
  const bool map = GetParam();
  const std::uint32_t records = map ? kMappedRecords : kRecords;
  const std::string path = write_file(capture_bytes(records), "next_batch_whole.pcap");
  for (std::size_t n : {16u, 5u, 1u}) {
    const Outcome o = read_batches(path, n, map);
    EXPECT_EQ(o.records, records) << "batches of " << n;
    EXPECT_EQ(o.stop_reason, "");
    EXPECT_EQ(o.longest, n);  // full batches inside a window...
    if (n > 1) {
      EXPECT_GT(o.batches, records / n);  // ... and shorter ones at its edges
    }
  }
  std::remove(path.c_str());
}

TEST_P(NextBatch, ACutRecordStopsWhereNextStops) {
  const bool map = GetParam();
  std::vector<std::uint8_t> bytes = capture_bytes(map ? kMappedRecords : kRecords);
  bytes.resize(bytes.size() * 3 / 5 + 7);
  const std::string path = write_file(bytes, "next_batch_cut.pcap");
  capture::FileReader one;
  ASSERT_TRUE(one.open(path));
  capture::Record rec;
  std::uint32_t records = 0;
  while (one.next(rec)) ++records;
  ASSERT_FALSE(one.stop_reason().empty());
  ASSERT_GT(records, 100u);
  for (std::size_t n : {16u, 3u}) {
    const Outcome o = read_batches(path, n, map);
    EXPECT_EQ(o.records, records) << "batches of " << n;
    EXPECT_EQ(o.stop_reason, one.stop_reason());
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Windows, NextBatch, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Mapped" : "Copied"; });

// The file is cut (by another program) inside the mapped window being read:
// the pages past its new end are gone, and a read of them raises SIGBUS. The
// reader must stop with a reason; every record before the one the cut went
// through keeps its bytes.
TEST(NextBatchMapped, AFileCutWhileReadStopsWithAReason) {
  const std::string path = write_file(capture_bytes(kRecords), "next_batch_cut_while_read.pcap");
  capture::FileReader reader;
  reader.set_map_windows(true);
  ASSERT_TRUE(reader.open(path));
  capture::Record rec;
  std::uint32_t records = 0;
  for (; records < 200; ++records) {
    ASSERT_TRUE(reader.next(rec));
    ASSERT_TRUE(holds_record(rec, records));
  }
  // A page boundary well inside the window, past the records read so far.
  const auto cut = static_cast<off_t>((reader.file_offset() + 300'000) / 4096 * 4096);
  ASSERT_EQ(::truncate(path.c_str(), cut), 0);
  std::uint32_t bad = 0;
  while (reader.next(rec)) {
    if (!holds_record(rec, records)) ++bad;  // the record the cut went through (read as zeros past it)
    ++records;
  }
  EXPECT_LE(bad, 1u);
  EXPECT_LT(records, kRecords);
  EXPECT_GT(records, 200u);
  EXPECT_NE(reader.stop_reason().find("the file shrank while it was read"), std::string::npos) << reader.stop_reason();
  std::remove(path.c_str());
}

}  // namespace
