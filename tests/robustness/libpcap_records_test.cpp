// Records libpcap changes as it reads them, which FileReader must hand out as
// libpcap does (so it does not read such files in place), and its refusals:
// - link layers whose headers hold fields in the capturing host's byte order
//   (Linux cooked capture of a CAN frame: the CAN ID; Linux USB; NFLOG;
//   PFLOG): libpcap byte-swaps them in a file written in the other byte order;
// - Linux USB (memory-mapped) isochronous completions: libpcap mends their
//   length on the wire, in any file;
// - classic pcap before version 2.4: libpcap swaps the captured and original
//   lengths (2.0-2.2 always, 2.3 where the captured one is the larger);
// - a classic pcap packet longer than libpcap takes: its refusal, not
//   PcapngReader's (which reads only pcapng).
// tshark does the same. The oracle is libpcap itself (pcap_next_ex), read next
// to FileReader; the files are built here from the formats' text (classic pcap
// header magic 0xa1b2c3d4; pcapng section 0x0A0D0D0A, interface 1, enhanced
// packet 6; the USB header of Linux's usbmon, 64 bytes, and its 16-byte
// isochronous descriptors). Regressions: the file reader fuzzer found a
// big-endian pcapng of Linux cooked CAN frames read in place with the CAN ID
// unswapped (session 38); the USB case was found reading libpcap after it; the
// classic cases when the fuzz target's oracle was extended to classic pcap.
#include <gtest/gtest.h>
#include <pcap/pcap.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capture/file_reader.h"
#include "tests/robustness/capture_bytes.h"

using namespace rdmadiag;

namespace {

using Bytes = rdmadiag::testing::CaptureBytes;
using rdmadiag::testing::TempFile;

// A Linux cooked capture (SLL) header of protocol 0x000C (CAN), then the CAN
// frame whose first 4 bytes, the CAN ID, are in the host's byte order.
std::vector<std::uint8_t> sll_can_frame() {
  Bytes f{true, {}};
  f.u16(0), f.u16(280), f.u16(0);          // packet type, ARPHRD_CAN, address length
  f.bytes(std::vector<std::uint8_t>(8));   // address
  f.u16(0x000C);                           // protocol: CAN
  f.bytes({0x01, 0x02, 0x03, 0x04, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});  // CAN ID, length, data
  return f.out;
}

// A Linux USB (memory-mapped) completion of an incoming isochronous transfer
// with one descriptor of 10 bytes, in this (little-endian) machine's order;
// its URB length is 100, so its length on the wire as written, header +
// descriptor + URB length, is 180, and libpcap mends it to 64 + 16 + 10.
constexpr std::uint32_t kUsbWritten = 64 + 16 + 100, kUsbMended = 64 + 16 + 10;
std::vector<std::uint8_t> usb_iso_completion() {
  Bytes f{false, {}};
  f.u32(0), f.u32(0);                           // URB id
  f.u8('C'), f.u8(0), f.u8(0x81), f.u8(1);      // complete, isochronous, endpoint 1 in, device 1
  f.u16(1), f.u8(0), f.u8(0);                   // bus, setup flag, data flag (0: data present)
  f.u32(0), f.u32(0), f.u32(0), f.u32(0);       // time stamp, status
  f.u32(100), f.u32(0);                         // URB length, data length
  f.u32(0), f.u32(1), f.u32(0), f.u32(0);       // error count, descriptors, interval, start frame
  f.u32(0), f.u32(1);                           // transfer flags, descriptors
  f.u32(0), f.u32(0), f.u32(10), f.u32(0);      // descriptor: status, offset, length, padding
  return f.out;
}

std::vector<std::uint8_t> classic_file(std::uint32_t linktype, const std::vector<std::uint8_t>& frame,
                                       std::uint32_t wirelen, bool big = true, std::uint16_t minor = 4,
                                       bool lengths_swapped = false) {
  Bytes f{big, {}};
  f.u32(0xa1b2c3d4), f.u16(2), f.u16(minor), f.u32(0), f.u32(0), f.u32(65535), f.u32(linktype);
  for (std::uint32_t i = 0; i < 3; ++i) {
    const std::uint32_t caplen = std::uint32_t(frame.size());
    f.u32(1'700'000'000 + i), f.u32(i);
    lengths_swapped ? (f.u32(wirelen), f.u32(caplen)) : (f.u32(caplen), f.u32(wirelen));
    f.bytes(frame);
  }
  return f.out;
}

std::vector<std::uint8_t> pcapng_file(std::uint16_t linktype, const std::vector<std::uint8_t>& frame,
                                      std::uint32_t wirelen, bool big = true) {
  Bytes f{big, {}};
  f.block(0x0A0D0D0A, [&] { f.u32(0x1A2B3C4D), f.u16(1), f.u16(0), f.u64(~0ull); });
  f.block(1, [&] { f.u16(linktype), f.u16(0), f.u32(0); });
  for (std::uint32_t i = 0; i < 3; ++i)
    f.block(6, [&] {
      f.u32(0), f.u32(0), f.u32(1'000'000 + i), f.u32(std::uint32_t(frame.size())), f.u32(wirelen);
      f.bytes(frame);
    });
  return f.out;
}

struct Packet {
  std::uint32_t caplen = 0, wirelen = 0;
  std::vector<std::uint8_t> data;
};

std::vector<Packet> libpcap_records(const std::string& path) {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  EXPECT_NE(p, nullptr) << err;
  std::vector<Packet> out;
  pcap_pkthdr* h = nullptr;
  const u_char* d = nullptr;
  while (p && pcap_next_ex(p, &h, &d) == 1) out.push_back({h->caplen, h->len, {d, d + h->caplen}});
  if (p) pcap_close(p);
  return out;
}

// FileReader's records are libpcap's; `in_place` whether it read them in place.
void expect_libpcaps_records(const std::vector<std::uint8_t>& file, bool in_place, std::size_t records = 3) {
  const TempFile tmp(file);
  capture::FileReader reader;
  ASSERT_TRUE(reader.open(tmp.path)) << reader.error();
  EXPECT_EQ(reader.mapped_layout().has_value(), in_place);
  const auto expected = libpcap_records(tmp.path);
  ASSERT_EQ(expected.size(), records);
  capture::Record rec;
  for (const auto& want : expected) {
    ASSERT_TRUE(reader.next(rec)) << reader.stop_reason();
    EXPECT_EQ(rec.caplen, want.caplen);
    EXPECT_EQ(rec.wirelen, want.wirelen);
    EXPECT_EQ(std::vector<std::uint8_t>(rec.data.begin(), rec.data.end()), want.data);
  }
  EXPECT_FALSE(reader.next(rec));
}

TEST(HostOrderHeaders, SwappedFilesOfSuchLinkTypesAreLibpcaps) {
  const auto frame = sll_can_frame();
  const auto len = std::uint32_t(frame.size());
  expect_libpcaps_records(classic_file(113, frame, len), false);
  expect_libpcaps_records(pcapng_file(113, frame, len), false);
  // libpcap put the CAN ID in this (little-endian) machine's order: the swap is real.
  const TempFile tmp(pcapng_file(113, frame, len));
  const auto records = libpcap_records(tmp.path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(std::vector<std::uint8_t>(records[0].data.begin() + 16, records[0].data.begin() + 20),
            (std::vector<std::uint8_t>{0x04, 0x03, 0x02, 0x01}));
}

TEST(HostOrderHeaders, SwappedEthernetFilesAreStillReadInPlace) {
  const auto frame = sll_can_frame();  // (bytes only: Ethernet has no host-order field)
  const auto len = std::uint32_t(frame.size());
  expect_libpcaps_records(classic_file(1, frame, len), true);
  expect_libpcaps_records(pcapng_file(1, frame, len), true);
}

TEST(HostOrderHeaders, UsbIsochronousLengthsAreLibpcapsInAnyByteOrder) {
  const auto frame = usb_iso_completion();
  expect_libpcaps_records(classic_file(220, frame, kUsbWritten, false), false);
  expect_libpcaps_records(pcapng_file(220, frame, kUsbWritten, false), false);
  // The mend is real (tshark reads 90 too).
  const TempFile tmp(classic_file(220, frame, kUsbWritten, false));
  const auto records = libpcap_records(tmp.path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0].wirelen, kUsbMended);
}

TEST(OldClassicVersions, LengthsAreLibpcaps) {
  // 60 bytes captured of 100 sent; before 2.4 the record header may hold the
  // two lengths the other way round (as old libpcap wrote them).
  const std::vector<std::uint8_t> frame(60, 0xab);
  for (bool big : {false, true}) {
    expect_libpcaps_records(classic_file(1, frame, 100, big, 4), true);
    expect_libpcaps_records(classic_file(1, frame, 100, big, 2, true), false);  // 2.2: always swapped
    expect_libpcaps_records(classic_file(1, frame, 100, big, 3, true), false);  // 2.3: captured the larger
    expect_libpcaps_records(classic_file(1, frame, 100, big, 3), false);        // 2.3: as written
  }
  // The swap is real: libpcap reads 60 captured of 100 from the 2.2 file.
  const TempFile tmp(classic_file(1, frame, 100, false, 2, true));
  const auto records = libpcap_records(tmp.path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].caplen, 60u);
  EXPECT_EQ(records[0].wirelen, 100u);
}

TEST(ClassicOversize, TheStopReasonIsLibpcaps) {
  // A first record of 300,000 captured bytes, above what libpcap takes for Ethernet.
  Bytes f{false, {}};
  f.u32(0xa1b2c3d4), f.u16(2), f.u16(4), f.u32(0), f.u32(0), f.u32(65535), f.u32(1);
  f.u32(1), f.u32(0), f.u32(300'000), f.u32(300'000), f.bytes(std::vector<std::uint8_t>(300'000));
  const TempFile tmp(f.out);
  capture::FileReader reader;
  ASSERT_TRUE(reader.open(tmp.path)) << reader.error();
  capture::Record rec;
  EXPECT_FALSE(reader.next(rec));
  EXPECT_EQ(reader.stop_reason(), "stopped after record 0: invalid packet capture length 300000, bigger than snaplen of 65535");
}

}  // namespace
