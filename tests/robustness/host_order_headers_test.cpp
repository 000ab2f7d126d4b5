// Link layers whose headers hold fields in the capturing host's byte order
// (Linux cooked capture of a CAN frame: the CAN ID; Linux USB; NFLOG; PFLOG):
// libpcap byte-swaps those fields in each record of a file written in the
// other byte order, and tshark does the same. FileReader must hand out
// libpcap's records, so such a file is not read in place. The oracle is
// libpcap itself (pcap_next_ex), read next to FileReader; the files are built
// here from the formats' text (classic pcap header magic 0xa1b2c3d4; pcapng
// section 0x0A0D0D0A, interface 1, enhanced packet 6), big-endian.
// Regression: the file reader fuzzer found a big-endian pcapng of Linux cooked
// CAN frames read in place with the CAN ID unswapped (session 38).
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capture/file_reader.h"

using namespace rdmadiag;

namespace {

struct BigEndian {
  std::vector<std::uint8_t> out;
  void u16(std::uint16_t v) { out.insert(out.end(), {std::uint8_t(v >> 8), std::uint8_t(v)}); }
  void u32(std::uint32_t v) { u16(std::uint16_t(v >> 16)), u16(std::uint16_t(v)); }
  void bytes(const std::vector<std::uint8_t>& b) { out.insert(out.end(), b.begin(), b.end()); }
};

// A Linux cooked capture (SLL) header of protocol 0x000C (CAN), then the CAN
// frame whose first 4 bytes, the CAN ID, are in the host's byte order.
std::vector<std::uint8_t> sll_can_frame() {
  BigEndian f;
  f.u16(0), f.u16(280), f.u16(0);          // packet type, ARPHRD_CAN, address length
  f.bytes(std::vector<std::uint8_t>(8));   // address
  f.u16(0x000C);                           // protocol: CAN
  f.bytes({0x01, 0x02, 0x03, 0x04, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});  // CAN ID, length, data
  return f.out;
}

std::vector<std::uint8_t> classic_file(std::uint32_t linktype, const std::vector<std::uint8_t>& frame) {
  BigEndian f;
  f.u32(0xa1b2c3d4), f.u16(2), f.u16(4), f.u32(0), f.u32(0), f.u32(65535), f.u32(linktype);
  for (std::uint32_t i = 0; i < 3; ++i) {
    f.u32(1'700'000'000 + i), f.u32(i), f.u32(std::uint32_t(frame.size())), f.u32(std::uint32_t(frame.size()));
    f.bytes(frame);
  }
  return f.out;
}

void block(BigEndian& f, std::uint32_t type, const std::vector<std::uint8_t>& body) {
  const std::uint32_t len = std::uint32_t(12 + (body.size() + 3) / 4 * 4);
  f.u32(type), f.u32(len), f.bytes(body);
  f.bytes(std::vector<std::uint8_t>((4 - body.size() % 4) % 4));
  f.u32(len);
}

std::vector<std::uint8_t> pcapng_file(std::uint16_t linktype, const std::vector<std::uint8_t>& frame) {
  BigEndian f, shb, idb;
  shb.u32(0x1A2B3C4D), shb.u16(1), shb.u16(0), shb.u32(0xffffffff), shb.u32(0xffffffff);
  idb.u16(linktype), idb.u16(0), idb.u32(0);
  block(f, 0x0A0D0D0A, shb.out);
  block(f, 1, idb.out);
  for (std::uint32_t i = 0; i < 3; ++i) {
    BigEndian epb;
    epb.u32(0), epb.u32(0), epb.u32(1'000'000 + i), epb.u32(std::uint32_t(frame.size())),
        epb.u32(std::uint32_t(frame.size())), epb.bytes(frame);
    block(f, 6, epb.out);
  }
  return f.out;
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::vector<std::uint8_t>& bytes) {
    char name[] = "/tmp/rdmadiag_host_order_XXXXXX";
    const int fd = ::mkstemp(name);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    path = name;
  }
  ~TempFile() { ::unlink(path.c_str()); }
};

std::vector<std::vector<std::uint8_t>> libpcap_records(const std::string& path) {
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  EXPECT_NE(p, nullptr) << err;
  std::vector<std::vector<std::uint8_t>> out;
  pcap_pkthdr* h = nullptr;
  const u_char* d = nullptr;
  while (p && pcap_next_ex(p, &h, &d) == 1) out.emplace_back(d, d + h->caplen);
  if (p) pcap_close(p);
  return out;
}

// FileReader's records are libpcap's; `in_place` whether it read them in place.
void expect_libpcaps_records(const std::vector<std::uint8_t>& file, bool in_place) {
  const TempFile tmp(file);
  capture::FileReader reader;
  ASSERT_TRUE(reader.open(tmp.path)) << reader.error();
  EXPECT_EQ(reader.mapped_layout().has_value(), in_place);
  const auto expected = libpcap_records(tmp.path);
  ASSERT_EQ(expected.size(), 3u);
  capture::Record rec;
  for (const auto& want : expected) {
    ASSERT_TRUE(reader.next(rec)) << reader.stop_reason();
    EXPECT_EQ(std::vector<std::uint8_t>(rec.data.begin(), rec.data.end()), want);
  }
  EXPECT_FALSE(reader.next(rec));
}

TEST(HostOrderHeaders, SwappedFilesOfSuchLinkTypesAreLibpcaps) {
  const auto frame = sll_can_frame();
  expect_libpcaps_records(classic_file(113, frame), false);
  expect_libpcaps_records(pcapng_file(113, frame), false);
  // libpcap put the CAN ID in this (little-endian) machine's order: the swap is real.
  const TempFile tmp(pcapng_file(113, frame));
  const auto records = libpcap_records(tmp.path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(std::vector<std::uint8_t>(records[0].begin() + 16, records[0].begin() + 20),
            (std::vector<std::uint8_t>{0x04, 0x03, 0x02, 0x01}));
}

TEST(HostOrderHeaders, SwappedEthernetFilesAreStillReadInPlace) {
  const auto frame = sll_can_frame();  // (bytes only: Ethernet has no host-order field)
  expect_libpcaps_records(classic_file(1, frame), true);
  expect_libpcaps_records(pcapng_file(1, frame), true);
}

}  // namespace
