// The congestion analysis' steps (decode/congestion_analysis.h), one packet at a
// time. Expected values are the definitions applied by hand to small schedules:
// a CNP's response time is from the first CE mark after the previous CNP; an
// episode compares the median of the kCcWindow gaps after a CNP with the median
// of the (up to kCcWindow) gaps before it.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "decode/analyzer.h"
#include "decode/anomaly.h"
#include "decode/congestion_analysis.h"
#include "decode/ib_opcodes.h"
#include "decode/packet.h"
#include "decode/transport_analysis.h"
#include "tests/analysis/two_hosts_packet.h"

using namespace rdmadiag::decode;

namespace {

constexpr std::int64_t kUs = 1000;

struct CcRun {
  CcFlowState s;
  CcOptions opts;
  std::uint64_t frame = 0;
  CcDecision last;
  CcDecision packet(std::int64_t ns, bool ce = false) { return step(CcPacket{++frame, ns, false, ce}); }
  CcDecision cnp(std::int64_t ns) { return step(CcPacket{++frame, ns, true, false}); }
  CcDecision step(const CcPacket& p) {
    last = classify(s, p, opts);
    apply(s, last, p);
    return last;
  }
};

// `n` packets `gap` apart from `t`; returns the time of the last.
std::int64_t steady(CcRun& r, std::int64_t t, int n, std::int64_t gap) {
  for (int i = 0; i < n; ++i) r.packet(t += gap);
  return t;
}

TEST(CongestionSteps, ResponseTimeFromTheFirstUnansweredMark) {
  CcRun r;
  std::int64_t t = steady(r, 0, 10, kUs);
  r.packet(t += kUs, true);           // first mark at 11 us
  r.packet(t += kUs, true);           // second, same episode of marks
  const CcDecision d = r.cnp(t + 3 * kUs / 2);  // 13.5 us
  EXPECT_EQ(d.response_ns, 13'500 - 11'000);
  EXPECT_EQ(r.s.marks().r.marks_answered, 2u);
  EXPECT_EQ(r.s.marks().r.cnps_without_mark, 0u);
  const CcDecision again = r.cnp(t + 2 * kUs);  // nothing marked since
  EXPECT_EQ(again.response_ns, -1);
  EXPECT_EQ(r.s.marks().r.cnps_without_mark, 1u);
  EXPECT_TRUE(again.joins_episode);   // inside the open episode
  EXPECT_EQ(r.s.marks().r.episodes, 1u);
}

// A CNP stamped before the mark it answers (the capture clock stepped back 1 ms
// between them): the mark waited, so the CNP answers it and is not one "without
// mark"; its response time is unknown, not negative.
TEST(CongestionSteps, CnpBeforeItsMarkByAClockStepAnswersIt) {
  CcRun r;
  std::int64_t t = steady(r, 1000 * kUs, 10, kUs);
  r.packet(t += kUs, true);           // the mark at 1011 us
  const CcDecision d = r.cnp(t - 1000 * kUs + 4 * kUs);  // the clock stepped back 1 ms
  EXPECT_EQ(d.response_ns, -1);
  EXPECT_EQ(r.s.marks().r.cnps_without_mark, 0u);
  EXPECT_EQ(r.s.marks().r.marks_answered, 1u);
  EXPECT_EQ(r.s.marks().r.responses, 0u);
}

TEST(CongestionSteps, HalvedRateIsSlowed) {
  CcRun r;
  std::int64_t t = steady(r, 0, 20, kUs);
  r.cnp(t + 100);
  EXPECT_EQ(r.s.marks().baseline_ns, kUs);
  t = steady(r, t, 2, kUs);           // two more at the old rate: reaction after them
  const std::int64_t slow_from = t;
  t = steady(r, t, kCcWindow - 3, 2 * kUs);
  EXPECT_EQ(r.last.verdict, CcVerdict::none);
  r.packet(t + 2 * kUs);              // the 16th gap after the CNP closes the episode
  EXPECT_EQ(r.last.verdict, CcVerdict::slowed);
  EXPECT_EQ(r.s.marks().r.slowed, 1u);
  EXPECT_EQ(r.s.marks().r.reaction_max_ns, slow_from + 2 * kUs - (20 * kUs + 100));  // the first 2 us gap
  EXPECT_FALSE(r.s.episode);
}

TEST(CongestionSteps, SameRateIsKeptRate) {
  CcRun r;
  std::int64_t t = steady(r, 0, 20, kUs);
  r.cnp(t + 100);
  t = steady(r, t, kCcWindow, kUs + 100);  // 10% slower: under the 1.25 cut
  EXPECT_EQ(r.last.verdict, CcVerdict::kept_rate);
  EXPECT_EQ(r.s.marks().r.kept_rate, 1u);
  EXPECT_EQ(r.s.marks().r.first_kept_rate_frame, 21u);
}

TEST(CongestionSteps, OneIdleGapDoesNotDecide) {
  CcRun r;
  std::int64_t t = steady(r, 0, 20, kUs);
  r.cnp(t + 100);
  t = steady(r, t, 1, 500 * kUs);     // the application paused once
  steady(r, t, kCcWindow - 1, kUs);
  EXPECT_EQ(r.last.verdict, CcVerdict::kept_rate);  // the median is still 1 us
}

// Of an even number of gaps the median is the mean of the two middle ones
// (Python's statistics.median, which cc_crosscheck.py applies to tshark's times):
// 8 gaps of 10 us and 8 of 12 us have median 11 us, and 14 us after the CNP is
// 14 / 11 = 1.27 times that, over the 1.25 cut: slowed. The upper middle gap
// alone (12 us: 14 / 12 = 1.17) called it kept_rate.
TEST(CongestionSteps, EvenWindowMedianIsTheMeanOfTheMiddleGaps) {
  CcRun r;
  std::int64_t t = 0;
  r.packet(t);
  for (int i = 0; i < 16; ++i) r.packet(t += (i % 2 ? 12 : 10) * kUs);
  r.cnp(t + kUs);
  EXPECT_EQ(r.s.marks().baseline_ns, 11 * kUs);
  steady(r, t, kCcWindow, 14 * kUs);
  EXPECT_EQ(r.last.verdict, CcVerdict::slowed);
  EXPECT_EQ(r.s.marks().r.slowed, 1u);
  EXPECT_EQ(r.s.marks().r.kept_rate, 0u);
}

TEST(CongestionSteps, TooFewGapsBeforeIsUnjudged) {
  CcRun r;
  std::int64_t t = steady(r, 0, kCcMinBaseline, kUs);  // kCcMinBaseline packets: one gap fewer
  const CcDecision d = r.cnp(t + 100);
  EXPECT_EQ(d.verdict, CcVerdict::unjudged);
  EXPECT_FALSE(r.s.episode);
  EXPECT_EQ(r.s.marks().r.unjudged, 1u);
}

}  // namespace

// The analyzer's CNP matching after many flows of one address pair retired: a
// CNP still finds the one live flow with an unanswered CE mark.
namespace {

DecodedPacket roce(bool a_to_b, std::uint8_t opcode, std::uint32_t dest_qp, std::uint8_t ecn) {
  DecodedPacket p = test::two_hosts_packet(a_to_b, opcode, 0, ecn);
  p.ib.bth.dest_qp = dest_qp;
  return p;
}

}  // namespace

TEST(CongestionAnalyzer, CnpFindsTheMarkedFlowAfterItsPairsFlowsRetired) {
  AnomalyLog log;
  CongestionAnalyzer cc(log);
  constexpr std::uint32_t kOld = 3000;
  std::uint64_t frame = 0;
  for (std::uint32_t qp = 1; qp <= kOld; ++qp) cc.add(roce(true, 0x04, qp, 2), ++frame, 1000, 0);
  const std::int64_t later = 200'000'000'000;  // past kIdleRetireNs: the first flows go idle
  for (std::uint32_t qp = kOld + 1; qp <= kOld + 3; ++qp) cc.add(roce(true, 0x04, qp, 2), ++frame, later, 0);
  cc.sweep(later + 1);
  cc.add(roce(true, 0x04, kOld + 2, 3), ++frame, later + 10 * kUs, 0);  // CE on the middle flow
  const auto found = cc.add(roce(false, kOpcodeCnp, 0x77, 0), ++frame, later + 30 * kUs, 0);
  EXPECT_EQ(found.cnp_response_ns, 20 * kUs);
  EXPECT_EQ(found.cnp_mark_frame, frame - 1);
  EXPECT_EQ(cc.totals().cnps_unmatched, 0u);
  cc.add(roce(true, 0x04, kOld + 1, 2), ++frame, later + 40 * kUs, 0);  // its neighbours still live and listed
  cc.add(roce(true, 0x04, kOld + 3, 2), ++frame, later + 50 * kUs, 0);
  cc.finish();
  EXPECT_EQ(cc.flows().size(), kOld + 3);
}

// The word a transport flow keeps for this analysis (TransportAnalyzer::KeyedFlow::
// cc_slot) is checked against the packet's key before it is used: a stale one,
// here flow A's slot offered with flow B's packets, sends them to B's own flow.
// The keys and hashes are the transport analysis' own, as in Analyzer::add.
TEST(CongestionAnalyzer, StaleSlotHintIsCheckedNotTrusted) {
  AnomalyLog log;
  TransportAnalyzer transport(log);  // keys each packet as the Analyzer's pass does
  CongestionAnalyzer cc(log);
  std::uint64_t frame = 0;
  std::int64_t t = 0;
  std::uint32_t hint = UINT32_MAX;  // one word for both flows, not each flow's own
  const auto send = [&](std::uint32_t qp) {
    const DecodedPacket p = roce(true, 0x04, qp, 2);
    PacketAnalysis out;
    transport.add(p, ++frame, static_cast<double>(t += kUs) * 1e-9, out);
    const TransportAnalyzer::KeyedFlow& k = transport.last_key();
    cc.add(p, frame, t, out.flow, &k.key, k.hash, &hint);
  };
  for (int i = 0; i < 3; ++i) send(1);
  ASSERT_NE(hint, UINT32_MAX);  // A's slot, remembered
  for (int i = 0; i < 2; ++i) send(2);  // B's packets offered A's slot
  send(1);                               // and A's offered B's
  cc.finish();
  ASSERT_EQ(cc.flows().size(), 2u);
  EXPECT_EQ(cc.flows()[0].key.dest_qp, 1u);
  EXPECT_EQ(cc.flows()[0].packets, 4u);
  EXPECT_EQ(cc.flows()[1].key.dest_qp, 2u);
  EXPECT_EQ(cc.flows()[1].packets, 2u);
}

// Past the live-flow cap the least recently active eighth is retired while
// active, and counted; a later packet of one starts a new result. Under the
// cap (16K QPs between two hosts: 32K flows, each ECN-capable) nothing is.
TEST(CongestionAnalyzer, FlowsRetiredAtTheLiveCapAreCounted) {
  AnomalyLog log;
  CongestionAnalyzer cc(log);
  const std::uint32_t n = CongestionAnalyzer::kMaxLiveFlows + 5000;  // one retirement round: 5000 < cap / 8
  std::uint64_t frame = 0;
  const auto send = [&frame](CongestionAnalyzer& a, bool a_to_b, std::uint32_t qp) {
    ++frame;
    a.add(roce(a_to_b, 0x04, qp, 2), frame, static_cast<std::int64_t>(1000 + frame), 0);
  };
  for (std::uint32_t qp = 1; qp <= n; ++qp) send(cc, true, qp);
  send(cc, true, 1);  // QP 1: the oldest, retired at the cap
  cc.finish();
  EXPECT_EQ(cc.totals().retired_at_cap, CongestionAnalyzer::kMaxLiveFlows / 8);
  EXPECT_EQ(cc.totals().ect_packets, n + 1u);
  EXPECT_EQ(cc.flows().size() + cc.totals().flows_untracked, n + 1u);  // QP 1 twice

  AnomalyLog log2;
  CongestionAnalyzer below(log2);
  frame = 0;
  for (int round = 0; round < 2; ++round)
    for (std::uint32_t qp = 1; qp <= 32768; ++qp) send(below, (qp & 1) != 0, qp);
  below.finish();
  EXPECT_EQ(below.totals().retired_at_cap, 0u);
  EXPECT_EQ(below.flows().size() + below.totals().flows_untracked, 32768u);
}

// The matching rule (docs/congestion.md), step by step: a CNP goes to the flow
// already matched to its sender QP, else to the unmatched flow whose mark came
// first, else to the pair's only unmatched flow. A marked flow that retired
// before its CNP, and a new flow in its reused slot, are not taken for it.
TEST(CongestionAnalyzer, CnpGoesToTheMatchedSenderElseTheFirstMarkElseTheOnlyFlow) {
  AnomalyLog log;
  CongestionAnalyzer cc(log);
  std::uint64_t frame = 0;
  std::int64_t t = 1000;
  const auto data = [&](std::uint32_t qp, bool ce) { return cc.add(roce(true, 0x04, qp, ce ? 3 : 2), ++frame, t += kUs, 0); };
  const auto cnp = [&](std::uint32_t sender_qp) { return cc.add(roce(false, kOpcodeCnp, sender_qp, 0), ++frame, t += kUs, 0); };
  for (std::uint32_t qp : {0xA1u, 0xB1u, 0xC1u}) data(qp, false);
  data(0xB1, true);  // B marked first
  const std::uint64_t mark_b = frame;
  data(0xA1, true);
  const std::uint64_t mark_a = frame;
  EXPECT_EQ(cnp(0xB0).cnp_mark_frame, mark_b);  // the first mark: B, now matched to QP 0xB0
  EXPECT_EQ(cnp(0xA0).cnp_mark_frame, mark_a);
  data(0xA1, true);
  data(0xB1, true);
  const std::uint64_t mark_b2 = frame;
  EXPECT_EQ(cnp(0xB0).cnp_mark_frame, mark_b2);  // matched QP first, though A's mark is older

  // C marked, then idle past kIdleRetireNs and retired; D takes its slot, unmarked.
  data(0xC1, true);
  t += 200'000'000'000;
  for (std::uint32_t qp : {0xA1u, 0xB1u}) data(qp, false);
  cc.sweep(t + 1);
  data(0xD1, false);
  const auto to_d = cnp(0xD0);  // no mark waiting; D is the only unmatched flow
  EXPECT_LT(to_d.cnp_response_ns, 0);
  EXPECT_EQ(cc.totals().cnps_unmatched, 0u);
  data(0xE1, false);
  data(0xF1, false);
  cnp(0xE0);  // two unmatched flows, no mark: cannot be told
  EXPECT_EQ(cc.totals().cnps_unmatched, 1u);
  cc.finish();
  for (const CcFlowResult& f : cc.flows()) {
    if (f.sender_qp_known) {
      EXPECT_EQ(f.sender_qp, f.key.dest_qp ^ 1u) << f.key.dest_qp;
    }
  }
}

// Marks and CNPs in turn on many flows of one pair, some flows retiring with a
// mark waiting: the queue of first marks is looked at a bounded number of
// times per CNP.
TEST(CongestionAnalyzer, CnpMatchingLooksAtFewEntries) {
  AnomalyLog log;
  CongestionAnalyzer cc(log);
  std::uint64_t frame = 0;
  std::int64_t t = 1000;
  constexpr std::uint32_t kFlows = 4096;
  for (std::uint32_t qp = 1; qp <= kFlows; ++qp) cc.add(roce(true, 0x04, 2 * qp + 1, 3), ++frame, t += kUs, 0);
  for (std::uint32_t qp = 1; qp <= kFlows; ++qp) cc.add(roce(false, kOpcodeCnp, 2 * qp, 0), ++frame, t += kUs, 0);
  for (std::uint32_t qp = 1; qp <= kFlows; ++qp) {  // matched now: marks wait in no queue
    cc.add(roce(true, 0x04, 2 * qp + 1, 3), ++frame, t += kUs, 0);
    cc.add(roce(false, kOpcodeCnp, 2 * qp, 0), ++frame, t += kUs, 0);
  }
  EXPECT_EQ(cc.totals().cnps, 2u * kFlows);
  EXPECT_EQ(cc.totals().cnps_unmatched, 0u);
  EXPECT_LE(cc.cnp_match_probes(), 3u * 2 * kFlows);
  cc.finish();
  for (const CcFlowResult& f : cc.flows()) EXPECT_EQ(f.sender_qp, f.key.dest_qp ^ 1u);
}

// A stray CNP with no mark waiting (here to QP 0x999, which no packet names:
// e.g. a QP whose data took another path) goes to the pair's only flow but does
// not bind it: the CNPs to its real sender QP 0x21 that follow its CE marks by
// 4 us each (IBA A17.9: the CNP goes to the marked packets' sender QP) still
// answer them. It took the flow, and those three were counted unmatched.
TEST(CongestionAnalyzer, StrayCnpWithoutMarkDoesNotTakeTheFlowFromItsSenderQp) {
  AnomalyLog log;
  CongestionAnalyzer cc(log);
  std::uint64_t frame = 0;
  std::int64_t t = 1000 * kUs;
  const auto data = [&](bool ce) { cc.add(roce(true, 0x04, 0x11, ce ? 3 : 2), ++frame, t += 10 * kUs, 0); };
  const auto cnp = [&](std::uint32_t sender_qp, std::int64_t after) {
    return cc.add(roce(false, kOpcodeCnp, sender_qp, 0), ++frame, t + after, 0);
  };
  for (int i = 0; i < 6; ++i) data(false);
  cnp(0x999, 3 * kUs);
  for (int mark = 0; mark < 3; ++mark) {
    for (int i = 0; i < 10; ++i) data(false);
    data(true);
    const auto answer = cnp(0x21, 4 * kUs);
    EXPECT_EQ(answer.cnp_response_ns, 4 * kUs) << mark;
    EXPECT_EQ(answer.cnp_mark_frame, frame - 1) << mark;
  }
  cc.finish();
  EXPECT_EQ(cc.totals().cnps, 4u);
  EXPECT_EQ(cc.totals().cnps_unmatched, 0u);
  ASSERT_EQ(cc.flows().size(), 1u);
  const CcFlowResult& f = cc.flows()[0];
  EXPECT_TRUE(f.sender_qp_known);
  EXPECT_EQ(f.sender_qp, 0x21u);
  EXPECT_EQ(f.marks_answered, 3u);
  EXPECT_EQ(f.responses, 3u);
  EXPECT_EQ(f.cnps_without_mark, 1u);
}
