// The iWARP pass's connection table (decode/iwarp_analysis.h on flow_slots.h):
// one entry per TCP connection (both directions), gone when the connection
// closes (FIN both ways, RST: RFC 9293 section 3.6), idle connections that
// carry no MPA retired after IwarpAnalyzer::kIdleRetireSeconds, and past
// kMaxConnections the least recently active eighth retired and counted.
#include <gtest/gtest.h>

#include "decode/iwarp_analysis.h"
#include "stream_fixture.h"

namespace {

using namespace rdmadiag::decode;
using iwarp_fixture::Buf;

constexpr std::uint16_t kSyn = 0x02, kAck = 0x10, kPsh = 0x08, kFin = 0x01, kRst = 0x04;

struct Table {
  AnomalyLog log;
  IwarpAnalyzer an{log};
  std::uint64_t frame = 0;
  // A segment from 10.0.0.2:`port` to 10.0.0.1:18515 (reverse: the other way) at `ts`.
  void send(std::uint16_t port, bool reverse, std::uint32_t seq, std::uint16_t flags, double ts, const Buf& data = {}) {
    DecodedPacket p;
    Ipv4Header ip{};
    ip.src = reverse ? std::array<std::uint8_t, 4>{10, 0, 0, 1} : std::array<std::uint8_t, 4>{10, 0, 0, 2};
    ip.dst = reverse ? std::array<std::uint8_t, 4>{10, 0, 0, 2} : std::array<std::uint8_t, 4>{10, 0, 0, 1};
    p.ipv4 = ip;
    TcpHeader t{};
    t.src_port = reverse ? 18515 : port;
    t.dst_port = reverse ? port : 18515;
    t.seq = seq;
    t.flags = flags;
    p.tcp = t;
    p.tcp_payload = Bytes(data);
    p.tcp_payload_len = static_cast<std::uint32_t>(data.size());
    IwarpFrame out;
    an.add(p, ++frame, ts, out);
  }
};

TEST(IwarpConnections, ClosedConnectionsLeaveTheTable) {
  Table t;
  t.send(40000, false, 100, kSyn, 1.0);
  t.send(40001, false, 100, kSyn, 1.0);
  EXPECT_EQ(t.an.live_connections(), 2u);
  t.send(40000, false, 101, kFin | kAck, 1.1);
  EXPECT_EQ(t.an.live_connections(), 2u);  // half-closed: the other side may still send
  t.send(40000, true, 7000, kFin | kAck, 1.2);
  EXPECT_EQ(t.an.live_connections(), 1u);
  t.send(40001, true, 9000, kRst, 1.3);  // a reset ends it at once, from either side
  EXPECT_EQ(t.an.live_connections(), 0u);
  EXPECT_EQ(t.an.bounds().peak_live, 2u);
  EXPECT_FALSE(t.an.bounds().cap_reached);
}

TEST(IwarpConnections, BothDirectionsAreOneConnection) {
  Table t;
  t.send(40000, false, 100, kSyn, 1.0);
  t.send(40000, true, 7000, kSyn | kAck, 1.0);
  t.send(40000, false, 101, kAck, 1.0);
  EXPECT_EQ(t.an.live_connections(), 1u);
  // A new SYN (another initial sequence number) on the tuple starts a new connection in its place.
  t.send(40000, false, 555, kSyn, 2.0);
  EXPECT_EQ(t.an.live_connections(), 1u);
}

TEST(IwarpConnections, IdleConnectionsWithoutMpaAreRetiredOthersKept) {
  Table t;
  t.send(40000, false, 100, kSyn, 0.0);  // nothing but a SYN
  t.send(40001, false, 100, kSyn, 0.0);  // an MPA connection: its framing must survive a pause
  t.send(40001, false, 101, kPsh | kAck, 0.0, iwarp_fixture::mpa_frame(true, false, true));
  t.send(40002, false, 100, kSyn, 50.0);  // not idle long enough
  const double now = IwarpAnalyzer::kIdleRetireSeconds + 1.0;
  t.an.sweep(now);
  EXPECT_EQ(t.an.live_connections(), 2u);
  t.an.sweep(50.0 + IwarpAnalyzer::kIdleRetireSeconds + 1.0);
  EXPECT_EQ(t.an.live_connections(), 1u);  // the MPA connection is never retired for idleness
  EXPECT_EQ(t.an.stats().retired_at_cap, 0u);
}

TEST(IwarpConnections, CapRetiresTheLeastRecentlyActiveEighth) {
  Table t;
  constexpr std::size_t kMax = IwarpAnalyzer::kMaxConnections;
  for (std::size_t i = 0; i < kMax; ++i) t.send(static_cast<std::uint16_t>(1024 + i), false, 100, kSyn, double(i));
  EXPECT_EQ(t.an.live_connections(), kMax);
  EXPECT_EQ(t.an.stats().retired_at_cap, 0u);
  t.send(1024, false, 101, kAck, double(kMax));  // the oldest becomes the most recent
  t.send(60000, false, 100, kSyn, double(kMax) + 1);
  EXPECT_EQ(t.an.stats().retired_at_cap, kMax / 8);
  EXPECT_TRUE(t.an.bounds().cap_reached);
  EXPECT_EQ(t.an.bounds().peak_live, kMax);
  EXPECT_EQ(t.an.live_connections(), kMax - kMax / 8 + 1);
  // Retired: 1025 .. 1024 + kMax/8 (the least recently active); 1024 is live, so a
  // segment of it adds nothing, while one of 1025 starts a new connection.
  t.send(1024, false, 101, kPsh | kAck, double(kMax) + 2, Buf(8, 0));
  EXPECT_EQ(t.an.live_connections(), kMax - kMax / 8 + 1);
  t.send(1025, false, 101, kPsh | kAck, double(kMax) + 3, Buf(8, 0));
  EXPECT_EQ(t.an.live_connections(), kMax - kMax / 8 + 2);
}

}  // namespace
