// Which pcapng files FileReader reads in place (capture/file_reader.h): one
// interface whose time stamps are in micro- or nanoseconds with no if_tsoffset.
// Any other time base goes to libpcap, which applies it. The files are built
// here from the pcapng format's text (section header 0x0A0D0D0A with the
// byte-order magic 0x1A2B3C4D; interface description type 1 with options
// if_tsresol 9 and if_tsoffset 14; name resolution type 4; enhanced packet
// type 6), little- and big-endian; the expected time stamps follow from it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "capture/file_reader.h"
#include "tests/robustness/capture_bytes.h"

using namespace rdmadiag;

namespace {

using Writer = rdmadiag::testing::CaptureBytes;

struct TimeBase {
  std::optional<std::uint8_t> tsresol;
  std::optional<std::int64_t> tsoffset;
};

constexpr std::uint32_t kFrames = 3, kFrameLen = 60;

// Frame i's time stamp in the interface's units: 2023-11-14 22:13:20 and a fraction, + i units.
std::uint64_t frame_ts(std::uint64_t units_per_second, std::uint32_t i) {
  return 1'700'000'000 * units_per_second + units_per_second / 8 + 123 % units_per_second + i;
}

// SHB, IDB (Ethernet) with the time base, a name resolution block, then kFrames packets,
// time stamps frame_ts(i). Returns the file's bytes; `first_packet`: its first EPB's offset.
std::vector<std::uint8_t> pcapng_file(bool big, const TimeBase& tb, std::uint64_t units, std::size_t& first_packet) {
  Writer w{big, {}};
  w.block(0x0A0D0D0A, [&] { w.u32(0x1A2B3C4D), w.u16(1), w.u16(0), w.u64(~0ull); });
  w.block(1, [&] {
    w.u16(1), w.u16(0), w.u32(65535);
    if (tb.tsresol) w.u16(9), w.u16(1), w.u8(*tb.tsresol), w.u8(0), w.u8(0), w.u8(0);
    if (tb.tsoffset) w.u16(14), w.u16(8), w.u64(static_cast<std::uint64_t>(*tb.tsoffset));
    w.u16(0), w.u16(0);
  });
  w.block(4, [&] { w.u16(0), w.u16(0); });  // name resolution: only its end of records
  first_packet = w.out.size();
  for (std::uint32_t i = 0; i < kFrames; ++i)
    w.block(6, [&] {
      const std::uint64_t ts = frame_ts(units, i);
      w.u32(0), w.u32(static_cast<std::uint32_t>(ts >> 32)), w.u32(static_cast<std::uint32_t>(ts));
      w.u32(kFrameLen), w.u32(kFrameLen);
      for (std::uint32_t b = 0; b < kFrameLen; ++b) w.u8(static_cast<std::uint8_t>(i));
    });
  return w.out;
}

struct Read {
  std::optional<capture::PcapLayout> layout;
  std::vector<capture::Record> records;  // (data spans not kept valid: only times and lengths used)
};

Read read_file(const std::vector<std::uint8_t>& bytes) {
  const rdmadiag::testing::TempFile file(bytes);
  Read r;
  capture::FileReader reader;
  EXPECT_TRUE(reader.open(file.path)) << reader.error();
  r.layout = reader.mapped_layout();
  capture::Record rec;
  while (reader.next(rec)) r.records.push_back(rec);
  EXPECT_TRUE(reader.stop_reason().empty()) << reader.stop_reason();
  return r;
}

void expect_times(const Read& r, std::uint64_t units_per_second, std::int64_t offset) {
  ASSERT_EQ(r.records.size(), kFrames);
  for (std::uint32_t i = 0; i < kFrames; ++i) {
    const std::uint64_t ts = frame_ts(units_per_second, i);
    EXPECT_EQ(r.records[i].ts_sec, static_cast<std::int64_t>(ts / units_per_second) + offset) << i;
    EXPECT_EQ(r.records[i].ts_nsec, (ts % units_per_second) * (1'000'000'000 / units_per_second)) << i;
    EXPECT_EQ(r.records[i].caplen, kFrameLen);
  }
}

TEST(PcapngInPlace, MicroAndNanosecondsOfOneInterfaceAreReadInPlace) {
  for (bool big : {false, true})
    for (std::optional<std::uint8_t> resol : {std::optional<std::uint8_t>{}, std::optional<std::uint8_t>{6},
                                              std::optional<std::uint8_t>{9}}) {
      std::size_t first = 0;
      const std::uint64_t units = resol == std::uint8_t{9} ? 1'000'000'000 : 1'000'000;
      const Read r = read_file(pcapng_file(big, {resol, std::int64_t{0}}, units, first));
      ASSERT_TRUE(r.layout.has_value()) << big;
      EXPECT_TRUE(r.layout->pcapng);
      EXPECT_EQ(r.layout->swapped, big);  // (this machine is little-endian)
      EXPECT_EQ(r.layout->first_record, first);
      EXPECT_EQ(r.layout->usec, resol != std::uint8_t{9});
      expect_times(r, units, 0);
    }
}

TEST(PcapngInPlace, OtherTimeBasesAreLibpcaps) {
  for (bool big : {false, true}) {
    std::size_t first = 0;
    const Read offset = read_file(pcapng_file(big, {std::uint8_t{6}, std::int64_t{1000}}, 1'000'000, first));
    EXPECT_FALSE(offset.layout.has_value()) << "if_tsoffset read in place";
    expect_times(offset, 1'000'000, 1000);
    const Read millis = read_file(pcapng_file(big, {std::uint8_t{3}, {}}, 1'000, first));
    EXPECT_FALSE(millis.layout.has_value()) << "milliseconds read in place";
    expect_times(millis, 1'000, 0);
  }
}

}  // namespace
