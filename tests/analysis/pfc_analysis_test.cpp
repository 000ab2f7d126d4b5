// The pause analysis (decode/pfc_analysis.h), step by step. Expected times come
// from the spec arithmetic, not from the program: a pause quantum is 512 bit
// times (IEEE 802.3 Annexes 31B, 31D), so q quanta last q x 512 / link speed:
// 5.12 ns a quantum at 100 Gb/s (0xFFFF: 335.5392 us), 51.2 ns at 10 Gb/s.
#include <gtest/gtest.h>

#include <vector>

#include "../decode/fixtures.h"
#include "../decode/real_frames.h"
#include "decode/analyzer.h"
#include "decode/pfc_analysis.h"

using namespace rdmadiag::decode;

namespace {

// Times in integer nanoseconds (as the analysis takes them), lengths in seconds (as it reports them).
constexpr std::int64_t kUs = 1000;
constexpr double kSecondsPerUs = 1e-6;
constexpr double kQuantum100G = 512.0 / 100e9;  // seconds
constexpr double kQuantum10G = 512.0 / 10e9;
constexpr std::int64_t kT0 = 1'700'000'000'000'000'000;  // an epoch time: a double of seconds could not resolve these

struct Recorder : PauseSink {
  struct Ended {
    PauseEnded p;
    bool storm;
  };
  std::vector<Ended> ended;
  void pause_ended(const PauseEnded& p, bool storm) override { ended.push_back({p, storm}); }
};

PfcOptions at_gbps(double gbps, double storm_ms = 100) {
  PfcOptions o;
  o.link_bps = static_cast<std::uint64_t>(gbps * 1e9);
  o.storm_seconds = storm_ms / 1e3;
  return o;
}

// One priority's state machine, fed frames (ts in seconds, quanta).
struct Priority {
  explicit Priority(const PfcOptions& o) : opts(o) {}
  PfcOptions opts;
  PauseState state;
  PriorityPauses stats;
  Recorder sink;
  std::uint64_t frame = 0;
  PauseDecision feed(std::int64_t ts_ns, std::uint16_t quanta) {
    const PauseFrame f{++frame, kT0 + ts_ns, quanta, opts.quanta_ns(quanta)};
    const PauseDecision d = classify(state, f);
    apply(state, stats, d, f, 3, opts, sink);
    return d;
  }
  void finish() { close_open(state, stats, 3, opts, sink); }
};

}  // namespace

TEST(PauseClassify, EachStep) {
  const PfcOptions o = at_gbps(100);
  PauseState idle;
  const PauseState paused{true, kT0, kT0, 100e3, 1, 1};  // from kT0, for 100 us
  auto frame = [&](std::int64_t ts, std::uint16_t q) { return PauseFrame{2, kT0 + ts, q, o.quanta_ns(q)}; };
  EXPECT_EQ(classify(idle, frame(0, 10)).step, PauseStep::start);
  EXPECT_EQ(classify(idle, frame(0, 0)).step, PauseStep::idle_xon);
  EXPECT_EQ(classify(paused, frame(50 * kUs, 10)).step, PauseStep::refresh);
  EXPECT_EQ(classify(paused, frame(50 * kUs, 0)).step, PauseStep::resume);
  EXPECT_FALSE(classify(paused, frame(100 * kUs, 10)).expired);  // a refresh at the expiry itself continues it
  const PauseDecision late = classify(paused, frame(101 * kUs, 10));
  EXPECT_TRUE(late.expired);
  EXPECT_EQ(late.step, PauseStep::start);
  const PauseDecision late_xon = classify(paused, frame(101 * kUs, 0));
  EXPECT_TRUE(late_xon.expired);
  EXPECT_EQ(late_xon.step, PauseStep::idle_xon);
  EXPECT_TRUE(classify(paused, frame(100 * kUs + 1, 10)).expired);  // 1 ns later it had expired
  EXPECT_EQ(classify(paused, PauseFrame{2, kT0 + 50 * kUs, 10, -1}).step, PauseStep::counted);  // no link speed
}

TEST(PauseApply, StartSetsTheExpiryFromTheQuanta) {
  Priority p(at_gbps(100));
  p.feed(0, 0xFFFF);
  EXPECT_TRUE(p.state.paused);
  EXPECT_EQ(p.state.timer_ns, kT0);
  EXPECT_NEAR(p.state.timer_length_ns, 335539.2, 1e-6);
  EXPECT_TRUE(p.state.runs_at(kT0 + 335539));
  EXPECT_FALSE(p.state.runs_at(kT0 + 335540));
  p.finish();
  EXPECT_EQ(p.stats.pauses, 1u);
  EXPECT_NEAR(p.stats.paused_seconds, 65535 * kQuantum100G, 1e-15);
}

TEST(PauseApply, NanosecondPausesAtAnEpochTime) {
  Priority p(at_gbps(100));
  p.feed(0, 0x0200);    // 512 quanta: 2621.44 ns
  p.feed(500, 0);       // XON 500 ns later
  p.feed(1000, 1);      // 5.12 ns
  p.finish();
  EXPECT_EQ(p.stats.pauses, 2u);
  EXPECT_NEAR(p.stats.paused_seconds, 505.12e-9, 1e-15);
  EXPECT_NEAR(p.stats.longest_seconds, 500e-9, 1e-15);
}

TEST(PauseApply, RefreshRestartsTheTimer) {
  Priority p(at_gbps(100));
  p.feed(0, 0xFFFF);
  p.feed(100 * kUs, 0xFFFF);  // overlaps the first: merged, the timer restarts at 100 us
  p.finish();
  EXPECT_EQ(p.stats.frames, 2u);
  EXPECT_EQ(p.stats.pauses, 1u);
  EXPECT_NEAR(p.stats.paused_seconds, (100 + 335.5392) * kSecondsPerUs, 1e-12);
  EXPECT_NEAR(p.stats.longest_seconds, 435.5392 * kSecondsPerUs, 1e-12);
  ASSERT_EQ(p.sink.ended.size(), 1u);
  EXPECT_EQ(p.sink.ended[0].p.frames, 2u);
  EXPECT_EQ(p.sink.ended[0].p.start_frame, 1u);
}

TEST(PauseApply, ShorterRefreshShortensThePause) {
  Priority p(at_gbps(10));
  p.feed(0, 1000);       // until 51.2 us
  p.feed(10 * kUs, 100);  // replaced: until 10 + 5.12 us
  p.finish();
  EXPECT_NEAR(p.stats.paused_seconds, 10 * kSecondsPerUs + 100 * kQuantum10G, 1e-12);
}

TEST(PauseApply, XonResumesAtOnce) {
  Priority p(at_gbps(100));
  p.feed(0, 0xFFFF);
  p.feed(50 * kUs, 0);
  EXPECT_FALSE(p.state.paused);
  p.feed(60 * kUs, 0);  // XON while not paused: counted, nothing ends
  p.finish();
  EXPECT_EQ(p.stats.xon, 2u);
  EXPECT_EQ(p.stats.pauses, 1u);
  EXPECT_NEAR(p.stats.paused_seconds, 50 * kSecondsPerUs, 1e-12);
  EXPECT_EQ(p.sink.ended.size(), 1u);
}

TEST(PauseApply, ExpiredPauseEndsAtItsExpiry) {
  Priority p(at_gbps(10));
  p.feed(0, 1000);          // 51.2 us
  p.feed(100 * kUs, 1000);  // after the expiry: a second pause
  p.finish();
  EXPECT_EQ(p.stats.pauses, 2u);
  EXPECT_NEAR(p.stats.paused_seconds, 2 * 1000 * kQuantum10G, 1e-12);
  EXPECT_NEAR(p.stats.longest_seconds, 51.2 * kSecondsPerUs, 1e-12);
  ASSERT_EQ(p.sink.ended.size(), 2u);
  EXPECT_NEAR(p.sink.ended[0].p.length_ns, 51200, 1e-6);
  EXPECT_EQ(p.sink.ended[1].p.start_ns, kT0 + 100 * kUs);
}

TEST(PauseApply, ContinuousRefreshesBeyondTheThresholdAreAStorm) {
  Priority p(at_gbps(100, 1.0));  // storm: more than 1 ms
  for (int i = 0; i <= 10; ++i) p.feed(i * 200 * kUs, 0xFFFF);  // 0 .. 2 ms, each refresh before the expiry
  p.finish();
  EXPECT_EQ(p.stats.pauses, 1u);
  EXPECT_EQ(p.stats.storms, 1u);
  EXPECT_NEAR(p.stats.paused_seconds, (2000 + 335.5392) * kSecondsPerUs, 1e-12);
  ASSERT_EQ(p.sink.ended.size(), 1u);
  EXPECT_TRUE(p.sink.ended[0].storm);
  EXPECT_EQ(p.sink.ended[0].p.frames, 11u);
}

TEST(PauseApply, ShortPausesAreNoStorm) {
  Priority p(at_gbps(100, 1.0));
  p.feed(0, 0xFFFF);
  p.finish();
  EXPECT_EQ(p.stats.storms, 0u);
  ASSERT_EQ(p.sink.ended.size(), 1u);
  EXPECT_FALSE(p.sink.ended[0].storm);
}

TEST(PauseApply, WithoutLinkSpeedOnlyFramesAndQuanta) {
  Priority p(PfcOptions{});
  p.feed(0, 0xFFFF);
  p.feed(1, 0);
  p.feed(2, 7);
  p.finish();
  EXPECT_EQ(p.stats.frames, 3u);
  EXPECT_EQ(p.stats.xon, 1u);
  EXPECT_EQ(p.stats.quanta_sum, 65535u + 7u);
  EXPECT_EQ(p.stats.quanta_max, 0xFFFF);
  EXPECT_EQ(p.stats.pauses, 0u);
  EXPECT_EQ(p.stats.paused_seconds, 0.0);
  EXPECT_TRUE(p.sink.ended.empty());
}

// ---- the whole pass over decoded frames

namespace {

fixtures::Frame pfc_bytes(std::uint8_t src_last, std::uint8_t vector, std::uint16_t quanta) {
  fixtures::Frame f = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, src_last, 0x88, 0x08, 0x01, 0x01,
                       0x00, vector};
  for (int n = 0; n < 8; ++n) {
    f.push_back(static_cast<std::uint8_t>(quanta >> 8));
    f.push_back(static_cast<std::uint8_t>(quanta));
  }
  f.resize(60, 0);
  return f;
}

fixtures::Frame pause_bytes(std::uint8_t src_last, std::uint16_t quanta) {
  fixtures::Frame f = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, src_last, 0x88, 0x08, 0x00, 0x01,
                       static_cast<std::uint8_t>(quanta >> 8), static_cast<std::uint8_t>(quanta)};
  f.resize(60, 0);
  return f;
}

// The real RoCEv2 RDMA WRITE of rxe_write_lat.pcap, tagged with PCP `pcp`.
DecodedPacket roce_with_pcp(std::uint8_t pcp) {
  return fixtures::decode(linktype::kEthernet,
                          fixtures::with_vlan_tags(real_frames::kWriteOnly, {{0x8100, static_cast<std::uint16_t>(pcp << 13 | 7)}}));
}

struct Pass {
  AnomalyLog log;
  PfcAnalyzer pfc{log};
  std::uint64_t frame = 0;
  explicit Pass(const PfcOptions& o) { pfc.set_options(o); }
  // `ts`: nanoseconds after kT0.
  void mac_control(const fixtures::Frame& f, std::int64_t ts) {
    const DecodedPacket p = fixtures::decode(linktype::kEthernet, f);
    ASSERT_TRUE(p.mac_control);
    pfc.add_mac_control(p, ++frame, kT0 + ts);
  }
  void roce(const DecodedPacket& p, std::int64_t ts) {
    ++frame;
    pfc.add_roce(p, kT0 + ts);
  }
};

}  // namespace

TEST(PfcAnalyzer, PfcSpeaksOnlyForEnabledPriorities) {
  Pass a(at_gbps(100));
  a.mac_control(pfc_bytes(0x0a, 0x09, 1000), 0);  // priorities 0 and 3
  a.pfc.finish();
  ASSERT_EQ(a.pfc.senders().size(), 1u);
  const PfcSender& s = a.pfc.senders()[0];
  EXPECT_EQ(s.pfc_frames, 1u);
  for (std::size_t n = 0; n < 8; ++n) EXPECT_EQ(s.priorities[n].frames, n == 0 || n == 3 ? 1u : 0u) << n;
  EXPECT_NEAR(s.priorities[3].paused_seconds, 1000 * kQuantum100G, 1e-15);
}

TEST(PfcAnalyzer, PauseSpeaksForEveryPriority) {
  Pass a(at_gbps(10));
  a.mac_control(pause_bytes(0x0b, 100), 0);
  a.pfc.finish();
  const PfcSender& s = a.pfc.senders()[0];
  EXPECT_EQ(s.pause_frames, 1u);
  for (std::size_t n = 0; n < 8; ++n) EXPECT_NEAR(s.priorities[n].paused_seconds, 5.12 * kSecondsPerUs, 1e-15) << n;
}

TEST(PfcAnalyzer, SendersAreKeyedBySourceMacAndCapped) {
  Pass a(at_gbps(100));
  a.mac_control(pfc_bytes(1, 0x08, 10), 0);
  a.mac_control(pfc_bytes(2, 0x08, 10), 0);
  a.mac_control(pfc_bytes(1, 0x08, 10), 0);
  EXPECT_EQ(a.pfc.senders().size(), 2u);
  EXPECT_EQ(a.pfc.senders()[0].pfc_frames, 2u);
  Pass b(at_gbps(100));
  for (std::size_t i = 0; i < PfcAnalyzer::kMaxSenders + 3; ++i) {
    fixtures::Frame f = pfc_bytes(static_cast<std::uint8_t>(i), 0x08, 10);
    f[10] = static_cast<std::uint8_t>(i >> 8);
    b.mac_control(f, 0);
  }
  EXPECT_EQ(b.pfc.senders().size(), PfcAnalyzer::kMaxSenders);
  EXPECT_EQ(b.pfc.untracked_frames(), 3u);
  EXPECT_EQ(b.pfc.mac_control_frames(), PfcAnalyzer::kMaxSenders + 3);
}

TEST(PfcAnalyzer, RocePacketsOnAPausedPriority) {
  Pass a(at_gbps(100));
  a.roce(roce_with_pcp(3), 0);                     // before any pause
  a.mac_control(pfc_bytes(0x0a, 0x08, 0xFFFF), 1000);  // priority 3 paused 1 us .. 1 us + 335.5392 us
  a.roce(roce_with_pcp(3), 1000 + 300 * kUs);         // inside
  a.roce(roce_with_pcp(2), 1000 + 300 * kUs);         // another priority
  a.roce(roce_with_pcp(3), 1000 + 336 * kUs);         // after the expiry
  const RocePriorityCounts& r = a.pfc.roce();
  EXPECT_EQ(r.packets[3], 3u);
  EXPECT_EQ(r.while_paused[3], 1u);
  EXPECT_EQ(r.packets[2], 1u);
  EXPECT_EQ(r.while_paused[2], 0u);
}

TEST(PfcAnalyzer, TheSendersOwnPacketsAreNotPausedByItsPause) {
  Pass a(at_gbps(100));
  const DecodedPacket roce = roce_with_pcp(3);
  fixtures::Frame f = pfc_bytes(0, 0x08, 0xFFFF);
  std::copy(roce.eth->src.begin(), roce.eth->src.end(), f.begin() + 6);  // the RoCE sender sends the pause
  a.mac_control(f, 0);
  a.roce(roce, 100 * kUs);
  EXPECT_EQ(a.pfc.roce().while_paused[3], 0u);
}

TEST(PfcAnalyzer, UntaggedRoceMapsDscpThroughTheTable) {
  PfcOptions o = at_gbps(100);
  const DecodedPacket untagged = fixtures::decode(linktype::kEthernet, real_frames::kWriteOnly);
  ASSERT_TRUE(untagged.ipv4);
  Pass a(o);
  EXPECT_EQ(a.pfc.priority_of(untagged), untagged.ipv4->dscp >> 3);
  o.dscp_priority[untagged.ipv4->dscp] = 5;
  Pass b(o);
  EXPECT_EQ(b.pfc.priority_of(untagged), 5);
  EXPECT_EQ(a.pfc.priority_of(roce_with_pcp(6)), 6);  // a tag wins
}

TEST(PfcAnalyzer, StormsGoToTheLogOnlyWhenReporting) {
  for (bool reports : {true, false}) {
    Pass a(at_gbps(100, 1.0));
    a.pfc.set_reports_anomalies(reports);
    for (int i = 0; i <= 10; ++i) a.mac_control(pfc_bytes(0x0a, 0x08, 0xFFFF), i * 200 * kUs);
    a.pfc.finish();
    EXPECT_EQ(a.pfc.senders()[0].priorities[3].storms, 1u);
    ASSERT_EQ(a.log.count(AnomalyKind::pause_storm), reports ? 1u : 0u);
    if (!reports) continue;
    const Anomaly& an = a.log.items()[0];
    EXPECT_EQ(an.priority, 3);
    EXPECT_EQ(an.mac, 0x02000000000aULL);
    EXPECT_EQ(an.frame, 1u);
    EXPECT_EQ(an.count, 11u);
    EXPECT_NEAR(an.duration_us, 2000 + 335.5392, 1e-6);
  }
}

TEST(PfcAnalyzer, MergeTakesOneShardsPausesAndSumsRoce) {
  Pass a(at_gbps(100)), b(at_gbps(100));
  for (Pass* p : {&a, &b}) p->mac_control(pfc_bytes(0x0a, 0x08, 0xFFFF), 0);
  a.roce(roce_with_pcp(3), 10 * kUs);
  b.roce(roce_with_pcp(3), 20 * kUs);
  b.roce(roce_with_pcp(1), 20 * kUs);
  a.pfc.finish();
  b.pfc.finish();
  AnomalyLog log;
  PfcAnalyzer merged(log);
  const PfcAnalyzer* parts[] = {&a.pfc, &b.pfc};
  merged.merge(parts);
  ASSERT_EQ(merged.senders().size(), 1u);
  EXPECT_EQ(merged.senders()[0].priorities[3].frames, 1u);  // not 2: both shards saw the same frame
  EXPECT_EQ(merged.roce().packets[3], 2u);
  EXPECT_EQ(merged.roce().while_paused[3], 2u);
  EXPECT_EQ(merged.roce().packets[1], 1u);
  EXPECT_EQ(merged.mac_control_frames(), 1u);
}

// The distinct queue pairs sent to while paused: exact below the cap, "at least
// the cap" above it, and the same whichever way the keys are split over shards.
TEST(PausedQueuePairs, CapAndMergeDoNotDependOnTheSplit) {
  constexpr std::size_t kCap = PausedQueuePairs::kMaxPausedQps;
  for (std::size_t distinct : {kCap - 1, kCap, kCap + 1, 2 * kCap}) {
    PausedQueuePairs one;
    for (std::uint64_t k = 0; k < distinct; ++k) one.add(3, k * 7919);
    EXPECT_EQ(one.keys[3].size(), std::min(distinct, kCap)) << distinct;
    EXPECT_EQ(one.capped[3], distinct > kCap) << distinct;
    // Split over three shards, with overlap: shard s gets the keys k with k % 3 != s.
    PausedQueuePairs merged;
    for (std::uint64_t s = 0; s < 3; ++s) {
      PausedQueuePairs part;
      for (std::uint64_t k = 0; k < distinct; ++k)
        if (k % 3 != s) part.add(3, k * 7919);
      merged.merge(part);
    }
    EXPECT_EQ(merged.keys[3].size(), one.keys[3].size()) << distinct;
    EXPECT_EQ(merged.capped[3], one.capped[3]) << distinct;
    EXPECT_TRUE(merged.keys[0].empty());
  }
}

TEST(PfcAnalyzer, QueuePairsSentToWhilePaused) {
  Pass a(at_gbps(100));
  a.mac_control(pfc_bytes(0x0a, 0x08, 0xFFFF), 0);
  const DecodedPacket write = roce_with_pcp(3);
  a.roce(write, 10 * kUs);
  a.roce(write, 20 * kUs);  // the same QP again
  a.roce(write, 400 * kUs); // after the pause: not counted
  EXPECT_EQ(a.pfc.roce().while_paused[3], 2u);
  EXPECT_EQ(a.pfc.paused_qps().keys[3].size(), 1u);
}

// Stalls of queue pairs in pauses (decode/pause_stalls.h): the covered part of a
// gap counts overlapping pauses once and skips the packets' own sender.
namespace {

TEST(PauseStalls, CoveredCountsOverlapsOnceAndSkipsTheSource) {
  const std::array<std::uint8_t, 6> a{2, 0, 0, 0, 0, 0xaa}, b{2, 0, 0, 0, 0, 0xbb}, own{0x52, 0x54, 0, 0x77, 0, 1};
  const PausedSpan spans[] = {{a, 100, 300}, {b, 200, 400}, {own, 0, 1000}, {a, 900, 2000}};
  EXPECT_EQ(covered_ns(spans, 4, 0, 1000, &own), (400 - 100) + (1000 - 900));
  EXPECT_EQ(covered_ns(spans, 4, 0, 1000, nullptr), 1000);
  EXPECT_EQ(covered_ns(spans, 4, 250, 260, &own), 10);
}

TEST(PauseStalls, AGapMostlyInAPauseIsAStall) {
  const std::array<std::uint8_t, 6> sw{2, 0, 0, 0, 0, 0xaa}, src{0x52, 0x54, 0, 0x77, 0, 1};
  PauseStalls s;
  s.pause_ended(3, {sw, 20 * kUs, 60 * kUs});  // 40 us paused
  EXPECT_EQ(s.long_gap_start(7, 0), -1);       // first packet of QP 7
  EXPECT_EQ(s.long_gap_start(7, 5 * kUs), -1); // a short gap
  const std::int64_t t0 = s.long_gap_start(7, 70 * kUs);
  ASSERT_EQ(t0, 5 * kUs);                      // 65 us gap, 40 us of it paused: more than half
  s.stall(3, t0, 70 * kUs, 9, &src, {});
  EXPECT_EQ(s.by_priority()[3].stalls, 1u);
  EXPECT_DOUBLE_EQ(s.by_priority()[3].longest_seconds, 65 * kUs * 1e-9);
  EXPECT_EQ(s.by_priority()[3].longest_frame, 9u);
  const std::int64_t t1 = s.long_gap_start(7, 170 * kUs);  // 100 us gap, nothing paused in it
  s.stall(3, t1, 170 * kUs, 10, &src, {{sw, 160 * kUs, 170 * kUs}});  // an open pause covers 10 us only
  EXPECT_EQ(s.by_priority()[3].stalls, 1u);
  s.stall(3, t1, 170 * kUs, 10, &sw, {{sw, 70 * kUs, 170 * kUs}});    // the packets' own sender's pause: not counted
  EXPECT_EQ(s.by_priority()[3].stalls, 1u);
}

}  // namespace
