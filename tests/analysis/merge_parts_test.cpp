// Parts of analyze -j's exact merge: the order-independent sum and the shard
// key (both directions of a connection, the reader's parse against the full decode).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "decode/analyzer.h"
#include "decode/analyzer_merge.h"
#include "decode/exact_sum.h"
#include "decode/packet.h"
#include "decode/shard_key.h"

namespace {

using rdmadiag::decode::ExactSum;
namespace decode = rdmadiag::decode;

double exact(const std::vector<double>& v) {
  ExactSum s;
  for (double x : v) s.add(x);
  return s.value();
}

// Known exact results (a plain running sum gets each wrong).
TEST(ExactSum, KnownSums) {
  EXPECT_EQ(exact({1e16, 1.0, -1e16}), 1.0);  // naive: 0
  EXPECT_EQ(exact(std::vector<double>(10, 0.1)), 1.0);  // naive: 0.9999999999999999
  EXPECT_EQ(exact({}), 0.0);
}

// Any order, any split into parts merged afterwards: the same value.
TEST(ExactSum, OrderAndSplitDoNotMatter) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> lat(3.0, 2.0);
  std::vector<double> v(20000);
  for (double& x : v) x = lat(rng) * (rng() % 7 == 0 ? -1 : 1);
  const double ref = exact(v);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(v.begin(), v.end(), rng);
    EXPECT_EQ(exact(v), ref);
    ExactSum a, b, c;
    for (std::size_t i = 0; i < v.size(); ++i) (i % 3 == 0 ? a : i % 3 == 1 ? b : c).add(v[i]);
    b.add(c);
    a.add(b);
    EXPECT_EQ(a.value(), ref);
  }
  double naive = 0;
  for (double x : v) naive += x;
  EXPECT_NEAR(naive, ref, std::fabs(ref) * 1e-9);  // and it is the sum
}

// Ethernet (optionally VLAN-tagged) / IPv4 / UDP 4791 / BTH, as on the wire.
std::vector<std::uint8_t> roce_frame(std::array<std::uint8_t, 4> src, std::array<std::uint8_t, 4> dst, bool vlan) {
  std::vector<std::uint8_t> f;
  auto put = [&f](std::initializer_list<std::uint8_t> bytes) {
    for (std::uint8_t b : bytes) f.push_back(b);
  };
  put({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});  // MAC addresses
  if (vlan) put({0x81, 0x00, 0x00, 0x05});
  put({0x08, 0x00});
  put({0x45, 0, 0, 60, 0, 1, 0x40, 0, 64, 17, 0, 0});  // IPv4, 60 bytes, UDP
  for (std::uint8_t b : src) f.push_back(b);
  for (std::uint8_t b : dst) f.push_back(b);
  put({0xC0, 0x00, 0x12, 0xB7, 0, 40, 0, 0});  // UDP to 4791, length 40
  put({0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x11, 0, 0, 0, 1});  // BTH: SEND ONLY, QP 0x11, PSN 1
  f.resize(f.size() + 16 + 4);  // payload, ICRC
  return f;
}

TEST(ShardKey, BothDirectionsShareAKeyOtherPairsDoNot) {
  const auto ab = decode::shard_key(decode::linktype::kEthernet, roce_frame({10, 0, 0, 1}, {10, 0, 0, 2}, false));
  const auto ba = decode::shard_key(decode::linktype::kEthernet, roce_frame({10, 0, 0, 2}, {10, 0, 0, 1}, true));
  const auto ac = decode::shard_key(decode::linktype::kEthernet, roce_frame({10, 0, 0, 1}, {10, 0, 0, 3}, false));
  EXPECT_TRUE(ab.has_addresses);
  EXPECT_EQ(ab, ba);
  EXPECT_NE(ab.hash, ac.hash);
  EXPECT_FALSE(decode::shard_key(decode::linktype::kEthernet, std::vector<std::uint8_t>(10)).has_addresses);
}

// The reader's light parse and the full decode agree (here and on every frame of
// every test capture: analyze -j checks each keyed frame, CTest analyze_jobs_identical).
TEST(ShardKey, ReaderParseMatchesDecode) {
  for (bool vlan : {false, true}) {
    const auto f = roce_frame({192, 168, 1, 7}, {192, 168, 1, 9}, vlan);
    decode::DecodedPacket p;
    decode::decode_frame(decode::linktype::kEthernet, f, static_cast<std::uint32_t>(f.size()), decode::DecodeOptions{}, p);
    ASSERT_TRUE(p.ipv4.has_value());
    EXPECT_EQ(decode::shard_key(p), decode::shard_key(decode::linktype::kEthernet, f));
  }
  // Native IB: the LIDs, either way round.
  const std::vector<std::uint8_t> lrh_ab = {0xF2, 0x00, 0x00, 0x05, 0x00, 0x10, 0x00, 0x07};
  const std::vector<std::uint8_t> lrh_ba = {0xF2, 0x00, 0x00, 0x07, 0x00, 0x10, 0x00, 0x05};
  EXPECT_EQ(decode::shard_key(decode::linktype::kInfiniband, lrh_ab), decode::shard_key(decode::linktype::kInfiniband, lrh_ba));
}

// A CM MAD (UD SEND to QP 1) between two IPv4 hosts.
decode::DecodedPacket cm_mad(std::uint8_t from, std::uint8_t to, decode::CmMessageType type, std::uint32_t local_id,
                             std::uint32_t remote_id) {
  decode::DecodedPacket p;
  p.linktype = decode::linktype::kEthernet;
  p.transport = decode::Transport::roce_v2;
  p.wirelen = p.caplen = 300;
  decode::Ipv4Header ip{};
  ip.src = {10, 0, 0, from};
  ip.dst = {10, 0, 0, to};
  p.ipv4 = ip;
  p.has_bth = true;
  p.ib.bth.opcode = 0x64;  // UD SEND ONLY
  p.ib.bth.dest_qp = 1;
  p.ib.bth.pkey = 0xFFFF;
  p.ib.present = decode::opcode_info(0x64).ext_headers;
  p.icrc = decode::CrcStatus::ok;
  decode::CmMessage cm;
  cm.type = type;
  cm.local_comm_id = local_id;
  cm.remote_comm_id = remote_id;
  cm.local_qpn = 0x100 + from;
  p.cm = cm;
  return p;
}

// A REP from other addresses than its REQ went to lands in another shard: the
// merge must notice (one analyzer pairs them; the run is repeated on one thread).
TEST(AnalyzerMerge, CmExchangeAcrossShardsIsNoticed) {
  for (bool across : {false, true}) {
    decode::Analyzer a, b;
    a.keep_merge_order();
    b.keep_merge_order();
    decode::PacketAnalysis out;
    a.add(cm_mad(1, 2, decode::CmMessageType::req, 0xABCD, 0), 1, 0.1, out);  // REQ 10.0.0.1 -> .2
    // REP to .1 from .2 (same pair: same shard) or from .3 (another pair: another shard).
    (across ? b : a).add(cm_mad(across ? 3 : 2, 1, decode::CmMessageType::rep, 0x1234, 0xABCD), 2, 0.2, out);
    decode::Analyzer* shards[] = {&a, &b};
    decode::AnalyzerMerge::finish_shards(shards);
    EXPECT_EQ(decode::AnalyzerMerge::cm_split(shards), across);
  }
}

// PFC frames have no addresses: every shard keeps their state (ShardPass), and
// the reader's light parse says which frames those are. A shard that missed one
// is noticed.
TEST(AnalyzerMerge, PauseFramesInEveryShard) {
  // 802.3 Annex 31D PFC: priority 3, time 0xFFFF, behind an 802.1Q tag.
  std::vector<std::uint8_t> f = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01, 0x02, 0, 0, 0, 0, 0xaa, 0x81, 0x00, 0x60, 0x00,
                                 0x88, 0x08, 0x01, 0x01, 0x00, 0x08};
  f.resize(64, 0);
  f[28] = f[29] = 0xFF;  // time[3]
  EXPECT_TRUE(decode::is_pause_state_frame(decode::linktype::kEthernet, f));
  EXPECT_FALSE(decode::shard_key(decode::linktype::kEthernet, f).has_addresses);
  EXPECT_FALSE(decode::is_pause_state_frame(decode::linktype::kEthernet, roce_frame({1, 2, 3, 4}, {5, 6, 7, 8}, true)));
  decode::DecodedPacket p;
  decode::decode_frame(decode::linktype::kEthernet, f, static_cast<std::uint32_t>(f.size()), decode::DecodeOptions{}, p);
  ASSERT_TRUE(p.mac_control);
  EXPECT_EQ(p.mac_control->quanta[3], 0xFFFF);
  for (bool missed : {false, true}) {
    decode::Analyzer a, b;
    decode::PacketAnalysis out;
    a.add(p, 1, 0.1, out);
    if (!missed) b.add_pause_state(p, 1, 100'000'000);
    decode::Analyzer* shards[] = {&a, &b};
    decode::AnalyzerMerge::finish_shards(shards);
    EXPECT_EQ(decode::AnalyzerMerge::pause_split(shards), missed);
  }
}

}  // namespace
