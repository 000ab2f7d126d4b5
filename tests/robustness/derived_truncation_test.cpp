// Truncation at every length for the link types and encapsulations of the
// derived captures (tests/pcaps/derived/: native IB with and without GRH, in
// pcap and ERF records, RoCEv1, RoCEv2 over IPv6, Q-in-Q, a non-standard UDP
// port, SLL/SLL2): the first RDMA frames of each capture (the CM exchange and
// the first data packets) are cut at every byte, as a snap length would and as a
// lying wire length would. Each cut lives in its own heap block, so ASan sees
// any over-read. tests/decode/truncation_test.cpp does the same for Ethernet
// fixtures.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "capture/file_reader.h"
#include "decode/packet.h"

using namespace rdmadiag;
using namespace rdmadiag::decode;

namespace {

struct Sample {
  std::uint32_t linktype;
  std::vector<std::uint8_t> frame;
};

std::vector<Sample> first_rdma_frames(const std::string& file, std::size_t count) {
  capture::FileReader reader;
  EXPECT_TRUE(reader.open(std::string(RDMADIAG_PCAP_DIR) + "/derived/" + file)) << reader.error();
  std::vector<Sample> out;
  capture::Record rec;
  DecodeOptions opts;
  opts.add_roce_port(4792);
  while (out.size() < count && reader.next(rec)) {
    DecodedPacket p;
    decode_frame(reader.linktype(), rec.data, rec.wirelen, opts, p);
    if (p.has_bth && rec.caplen == rec.wirelen) out.push_back({reader.linktype(), {rec.data.begin(), rec.data.end()}});
  }
  return out;
}

// `short_packet`: the packet itself is n bytes long. An ERF record carries its
// packet's wire length (wlen) in its own header, so that says so too (else the
// record is a cut capture of a longer packet: truncated, the other test's case).
DecodedPacket decode_cut(const Sample& s, std::size_t n, std::uint32_t wirelen, bool short_packet = false) {
  std::unique_ptr<std::uint8_t[]> block(new std::uint8_t[n ? n : 1]);
  std::copy_n(s.frame.begin(), n, block.get());
  if (short_packet && s.linktype == linktype::kErf && n >= 16) {
    const auto put16 = [&](std::size_t at, std::size_t v) {
      block[at] = static_cast<std::uint8_t>(v >> 8);
      block[at + 1] = static_cast<std::uint8_t>(v);
    };
    put16(10, n);       // rlen: the record, header included
    put16(14, n - 16);  // wlen: the packet on the wire
  }
  DecodedPacket p;
  DecodeOptions opts;
  opts.add_roce_port(4792);
  decode_frame(s.linktype, Bytes(block.get(), n), wirelen, opts, p);
  return p;
}

class DerivedTruncation : public testing::TestWithParam<const char*> {};

}  // namespace

TEST_P(DerivedTruncation, EveryCutBySnapLengthKeepsThePrefixAndNeverJudgesACrc) {
  const auto samples = first_rdma_frames(GetParam(), 12);
  ASSERT_GE(samples.size(), 4u);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    SCOPED_TRACE(testing::Message() << "frame " << i);
    const auto full_len = static_cast<std::uint32_t>(s.frame.size());
    const DecodedPacket full = decode_cut(s, s.frame.size(), full_len);
    ASSERT_TRUE(full.has_bth);
    const bool has_icrc = full.icrc == CrcStatus::ok;
    ASSERT_TRUE(has_icrc || full.icrc == CrcStatus::not_present);
    for (std::size_t n = 0; n < s.frame.size(); ++n) {
      SCOPED_TRACE(n);
      const DecodedPacket p = decode_cut(s, n, full_len);
      // Native IB: a cut inside the trailing 2-byte VCRC leaves the ICRC whole, so it is
      // rightly verified. (That cut is not flagged as truncated yet: docs/robustness.md.)
      const bool only_vcrc_cut = full.vcrc != CrcStatus::not_present && n + 2 >= s.frame.size();
      EXPECT_NE(p.icrc, CrcStatus::bad);
      if (only_vcrc_cut) {
        EXPECT_EQ(p.icrc, CrcStatus::ok);
      } else {
        EXPECT_NE(p.icrc, CrcStatus::ok);
        EXPECT_TRUE(p.truncated || p.diags.contains(DiagCode::truncated)) << "cut not reported";
      }
      EXPECT_NE(p.vcrc, CrcStatus::bad);
      EXPECT_NE(p.vcrc, CrcStatus::ok);
      for (const auto& d : p.diags) EXPECT_NE(d.severity, Severity::error) << to_string(d.code);
      EXPECT_EQ(p.transport == full.transport || p.transport == Transport::other, true);
      if (n >= full.bth_offset + kBthLength) {
        ASSERT_TRUE(p.has_bth);
        EXPECT_EQ(p.transport, full.transport);
        EXPECT_EQ(p.ib.bth.opcode, full.ib.bth.opcode);
        EXPECT_EQ(p.ib.bth.dest_qp, full.ib.bth.dest_qp);
        EXPECT_EQ(p.ib.bth.psn, full.ib.bth.psn);
        if (n >= full.bth_offset + full.ib.header_len) {
          EXPECT_EQ(p.ib.present, full.ib.present);
        }
      } else {
        EXPECT_FALSE(p.has_bth);
      }
      EXPECT_LE(p.payload.size(), n);
    }
  }
}

TEST_P(DerivedTruncation, EveryCutAsAShortPacketNeverPassesAsWhole) {
  for (const Sample& s : first_rdma_frames(GetParam(), 6)) {
    const bool native_ib = s.linktype == linktype::kInfiniband || s.linktype == linktype::kErf;
    for (std::size_t n = 0; n < s.frame.size(); ++n) {
      SCOPED_TRACE(n);
      const DecodedPacket p = decode_cut(s, n, static_cast<std::uint32_t>(n), true);
      if (!(native_ib && n + 2 >= s.frame.size())) {  // else only the VCRC is cut: the ICRC is whole
        EXPECT_NE(p.icrc, CrcStatus::ok);
      }
      EXPECT_NE(p.vcrc, CrcStatus::ok);
      EXPECT_FALSE(p.diags.contains(DiagCode::truncated));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Captures, DerivedTruncation,
                         testing::Values("rxe_ib_lnh2.pcap", "rxe_ib_lnh2_erf.pcap", "rxe_ib_lnh3.pcap",
                                         "rxe_ib_lnh3_erf.pcap", "rxe_roce_v1.pcap", "rxe_roce_v2_ipv6.pcap",
                                         "rxe_roce_v2_qinq.pcap", "rxe_roce_v2_sll.pcap", "rxe_roce_v2_sll2.pcap",
                                         "rxe_roce_v2_udp4792.pcap", "rxe_roce_v2_vlan.pcap"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });
