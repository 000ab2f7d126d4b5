// The per-flow sequence machines of the IB/RoCE transport analysis, one
// transition at a time, on hand-built packets (IBA Vol 1 §9.7, §9.8): the
// expected outcomes follow from the spec and from issue 15's four classes of
// false verdicts, not from running the analyzer. Also the bounded containers
// they use (psn_window.h, flow_slots.h).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <new>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "decode/flow_slots.h"
#include "decode/psn_window.h"
#include "decode/rc_requester.h"
#include "decode/rc_responder.h"
#include "decode/unreliable_sequence.h"

using namespace rdmadiag::decode;

namespace {

// One flow's sink: the capture's log (shared by all flows, as in the analyzer),
// the flow's counters and the verdict on the packet.
AnomalyLog g_log;
std::uint32_t g_flows = 0;

struct Probe {
  AnomalyLog& log = g_log;
  FlowSummary stats;
  PacketAnalysis out;
  Probe() { stats.index = g_flows++; }
  SeqSink sink() {
    out = PacketAnalysis{};
    return SeqSink(log, stats, &out);
  }
  // Anomalies of this flow.
  std::size_t count(AnomalyKind k) const {
    std::size_t n = 0;
    for (const Anomaly& a : log.items()) n += a.kind == k && a.flow == stats.index;
    return n;
  }
  std::vector<Anomaly> items() const {
    std::vector<Anomaly> v;
    for (const Anomaly& a : log.items())
      if (a.flow == stats.index) v.push_back(a);
    return v;
  }
};

std::uint64_t g_frame = 0;

SeqPacket packet(OpKind kind, std::uint32_t psn, std::int32_t ip_id = -1, std::uint32_t span = 1) {
  SeqPacket p;
  p.frame = ++g_frame;
  p.ts = static_cast<double>(g_frame) * 1e-4;
  p.psn = psn;
  p.kind = kind;
  p.span = span;
  p.ip_id = ip_id;
  p.ack_req = true;
  return p;
}

// One request through classify and apply; returns the event.
RequesterEvent send(RequesterState& q, Probe& pr, const SeqPacket& p) {
  const RequesterEvent e = classify(q, p);
  SeqSink s = pr.sink();
  apply(q, e, p, s);
  return e;
}

ResponseEvent answer(ResponseCursor& r, RequesterState& q, Probe& resp, Probe& req, const SeqPacket& p) {
  const ResponseEvent e = classify(r, &q, p);
  SeqSink rs = resp.sink();
  SeqSink qs = req.sink();
  apply(r, &q, e, p, rs, &qs);
  return e;
}

SeqPacket nak(std::uint32_t psn) {
  SeqPacket p = packet(OpKind::acknowledge, psn);
  p.aeth.syndrome = 0x60;  // NAK, PSN sequence error
  return p;
}

}  // namespace

// ---------------------------------------------------------------- containers

TEST(PsnWindow, HoldsWhatWasMarkedSinceItsLastUseAcrossTheWrap) {
  PsnWindow w;
  w.reset(0xFFFFF0);
  for (std::uint32_t p = 0xFFFFF0; p != 0x10; p = (p + 1) & kPsnMask)
    if (p != 0xFFFFFE) w.mark(p);
  EXPECT_TRUE(w.holds(0xFFFFF0));
  EXPECT_FALSE(w.holds(0xFFFFFE));  // never marked
  EXPECT_TRUE(w.holds(0x0F));
  EXPECT_FALSE(w.holds(0x10));      // at the front: new
  EXPECT_EQ(w.not_held(0xFFFFFC, 4), 1u);
  // Moving the front a whole window on forgets everything: those bits now
  // describe newer PSNs, and older ones are unknown (never "held").
  w.advance(0x10 + PsnWindow::kBits);
  EXPECT_FALSE(w.holds(0x0F));
  EXPECT_FALSE(w.covers(0x0F));
}

// In-order marking (the PSN at the front: mark()'s short path) reuses the bit a
// PSN one window earlier had: that is a new PSN, not a copy of the old one.
TEST(PsnWindow, InOrderMarkIsNewWhereItsBitHeldAnOlderPsn) {
  PsnWindow w;
  w.reset(0);
  for (std::uint32_t p = 0; p < PsnWindow::kBits; ++p) ASSERT_TRUE(w.mark(p)) << p;
  EXPECT_TRUE(w.holds(0));
  EXPECT_TRUE(w.mark(PsnWindow::kBits));         // shares PSN 0's bit
  EXPECT_TRUE(w.holds(PsnWindow::kBits));
  EXPECT_FALSE(w.holds(0));                      // out of the window now: unknown
  EXPECT_FALSE(w.mark(PsnWindow::kBits));        // the same PSN again: a copy
  EXPECT_EQ(w.front(), PsnWindow::kBits + 1);
  w.reset(kPsnMask);                             // the front at the last PSN: marking it wraps
  EXPECT_TRUE(w.mark(kPsnMask));
  EXPECT_EQ(w.front(), 0u);
  EXPECT_TRUE(w.holds(kPsnMask));
}

// The window writes no bit at a reset (a short flow touches one line of it,
// not four): whatever its memory held before must not show. Checked against a
// plain model of the rule (a bit per PSN, all cleared at a reset; a PSN the
// front passes is cleared) over random operations around a front that wraps,
// with the window built on memory full of ones.
TEST(PsnWindow, UnwrittenBitsNeverShowAgainstAPlainModel) {
  struct Model {
    std::vector<bool> bits = std::vector<bool>(PsnWindow::kBits);
    std::uint32_t front = 0;
    bool covers(std::uint32_t p) const {
      const std::int32_t d = psn_diff(p, front);
      return d < 0 && d >= -static_cast<std::int32_t>(PsnWindow::kBits);
    }
    bool holds(std::uint32_t p) const { return covers(p) && bits[p % PsnWindow::kBits]; }
    void reset(std::uint32_t f) {
      bits.assign(PsnWindow::kBits, false);
      front = f & kPsnMask;
    }
    void advance(std::uint32_t to) {
      for (; psn_diff(to, front) > 0; front = (front + 1) & kPsnMask) bits[front % PsnWindow::kBits] = false;
    }
    bool mark(std::uint32_t p) {
      p &= kPsnMask;
      if (psn_diff(p, front) >= 0) advance((p + 1) & kPsnMask);
      if (!covers(p)) return false;
      const bool fresh = !bits[p % PsnWindow::kBits];
      bits[p % PsnWindow::kBits] = true;
      return fresh;
    }
    void forget(std::uint32_t p) {
      if (covers(p)) bits[p % PsnWindow::kBits] = false;
    }
  };
  // Half the resets start a new window instead, on memory full of ones: it
  // follows its first kSmallBits PSNs inline, then moves the bits (make_room).
  alignas(PsnWindow) unsigned char raw[sizeof(PsnWindow)];
  const auto fresh = [&raw]() -> PsnWindow& {
    std::memset(raw, 0xFF, sizeof raw);
    return *new (raw) PsnWindow;
  };
  PsnWindow* wp = &fresh();
  Model m;
  std::uint64_t rng = 12345;
  const auto next = [&](std::uint32_t n) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>((rng >> 33) % n);
  };
  const std::uint32_t start = kPsnMask - 3000;  // the front crosses 2^24 - 1 -> 0
  wp->reset(start);
  m.reset(start);
  for (int step = 0; step < 200000; ++step) {
    const std::uint32_t r = next(1000);
    const std::uint32_t around = (m.front + kPsnMask + 1 - 2200 + next(2300)) & kPsnMask;
    PsnWindow& w = *wp;
    if (r < 2) {
      const std::uint32_t f = (m.front + next(5000)) & kPsnMask;
      if (r == 1) {
        w.~PsnWindow();
        wp = &fresh();
      }
      wp->reset(f);
      m.reset(f);
    } else if (r < 20) {
      const std::uint32_t to = (m.front + next(r < 5 ? 3000 : 40)) & kPsnMask;
      w.advance(to);
      m.advance(to);
    } else if (r < 60) {
      w.forget(around);
      m.forget(around);
    } else {
      const std::uint32_t p = r < 700 ? m.front : around;
      ASSERT_EQ(w.mark(p), m.mark(p)) << "step " << step << " psn " << p;
    }
    ASSERT_EQ(wp->front(), m.front);
    const std::uint32_t q = (m.front + kPsnMask + 1 - 2100 + next(2120)) & kPsnMask;
    ASSERT_EQ(wp->covers(q), m.covers(q)) << "step " << step << " psn " << q;
    ASSERT_EQ(wp->holds(q), m.holds(q)) << "step " << step << " psn " << q;
  }
  for (std::uint32_t d = 1; d <= PsnWindow::kBits + 2; ++d) {
    const std::uint32_t q = (m.front + kPsnMask + 1 - d) & kPsnMask;
    ASSERT_EQ(wp->holds(q), m.holds(q)) << "behind the front by " << d;
  }
  wp->~PsnWindow();
}

// The ring of recent copies grows as it fills (1, 8, then 64 entries) and only
// the copies added are ever looked at: before, the unwritten entries of the
// allocated ring were zero copies (PSN 0, IPv4 ID 0) that any() visited, so a
// packet with IPv4 ID 1 and PSN 1 found "its sender's previous packet" in one.
TEST(RecentCopies, HoldsTheLast64CopiesAndNothingElse) {
  RecentCopies r;
  const auto has_zero_copy = [&] {
    return r.any([](const RecentCopies::Copy& c) { return c.psn == 0 && c.ip_id == 0; });
  };
  EXPECT_EQ(r.last(), nullptr);
  EXPECT_FALSE(has_zero_copy());
  for (std::uint32_t n = 1; n <= 100; ++n) {
    r.add(n, static_cast<std::int32_t>(1000 + n), 0.001 * n);
    ASSERT_EQ(r.last()->psn, n);
    EXPECT_FALSE(has_zero_copy()) << "after " << n << " copies";
    // Every one of the last 64 is held, across the growth steps and the wrap; none before them.
    for (std::uint32_t k = 1; k <= n; ++k)
      ASSERT_EQ(r.has_copy(k, static_cast<std::int32_t>(1000 + k), 1.0, -1), n - k < RecentCopies::kSize)
          << "copy " << k << " after " << n;
  }
  r.mark_first_seen(100, 1100);
  EXPECT_TRUE(r.last()->first_seen);
  // Armed: the next copy is written marked, and only that one; a copy added
  // unarmed is not.
  r.arm_first_seen();
  r.add(101, 1101, 0.101);
  EXPECT_FALSE(r.first_seen_armed());
  EXPECT_TRUE(r.last()->first_seen);
  r.add(102, 1102, 0.102);
  EXPECT_FALSE(r.last()->first_seen);
  for (std::uint32_t n = 103; n <= 128; ++n) r.add(n, static_cast<std::int32_t>(1000 + n), 0.001 * n);
  r.arm_first_seen();
  r.add(129, 1129, 0.129);  // (ring position 0: the inline head)
  EXPECT_TRUE(r.last()->first_seen);
  r.add(130, 1130, 0.130);
  EXPECT_FALSE(r.last()->first_seen);
}

// has_copy() skips the scan for a PSN outside the held copies' range: checked
// against a plain list of the last 64 copies over in-order runs, resends, jumps
// across the whole PSN space and the 24-bit wrap.
TEST(RecentCopies, RangeFilterNeverHidesAHeldCopy) {
  RecentCopies r;
  std::deque<std::pair<std::uint32_t, std::int32_t>> model;  // (psn, ip_id), the last kSize
  std::mt19937 rng(7);
  std::uint32_t psn = kPsnMask - 300;  // wraps early
  for (int n = 0; n < 20000; ++n) {
    const unsigned what = rng() % 100;
    if (what < 70) psn = (psn + 1) & kPsnMask;                         // in order
    else if (what < 90) psn = (psn - rng() % 80) & kPsnMask;           // a resend of a recent one
    else if (what < 97) psn = (psn + rng() % 5000) & kPsnMask;         // a gap
    else psn = rng() & kPsnMask;                                       // anywhere (a restart)
    const std::int32_t id = static_cast<std::int32_t>(rng() % 4);
    r.add(psn, id, 1.0 + n);
    model.emplace_back(psn, id);
    if (model.size() > RecentCopies::kSize) model.pop_front();
    for (int probe = 0; probe < 8; ++probe) {
      const std::uint32_t q = probe < 4 ? model[rng() % model.size()].first : (psn + rng() % 200 - 100) & kPsnMask;
      const std::int32_t qid = static_cast<std::int32_t>(rng() % 4);
      bool held = false;
      for (const auto& [p, i] : model) held = held || (p == q && i == qid);
      ASSERT_EQ(r.has_copy(q, qid, 1e9, -1), held) << "PSN " << q << " after " << n << " copies";
    }
  }
}

TEST(FlowSlots, FindsReusesRetiresAndCountsItsPeak) {
  struct State {
    double last = 0;
  };
  struct Hash {
    std::size_t operator()(int k) const { return static_cast<std::size_t>(k) * 0x9E3779B97F4A7C15ULL; }
  };
  FlowSlots<int, Hash, State> t(8);
  std::vector<int> retired;
  auto last = [](const State& s) { return s.last; };
  auto gone = [&](std::uint32_t, State& s) { retired.push_back(static_cast<int>(s.last)); };
  for (int k = 0; k < 8; ++k) t.emplace(k, last, gone, State{static_cast<double>(k)});
  EXPECT_EQ(t.size(), 8u);
  EXPECT_FALSE(t.cap_reached());
  const std::uint32_t slot_of_0 = t.find(0), slot_of_1 = t.find(1);
  EXPECT_TRUE(t.holds(slot_of_0, 0));
  t.emplace(100, last, gone, State{100});  // over the cap: the least recent goes
  EXPECT_TRUE(t.cap_reached());
  EXPECT_EQ(retired, std::vector<int>{0});
  EXPECT_EQ(t.find(0), decltype(t)::kNone);
  ASSERT_NE(t.find(100), decltype(t)::kNone);
  EXPECT_EQ(t.at(t.find(100))->last, 100);
  // A remembered slot (the congestion analysis' hint) is checked, never trusted:
  // 0's slot went to 100.
  EXPECT_EQ(t.find(100), slot_of_0);
  EXPECT_FALSE(t.holds(slot_of_0, 0));
  EXPECT_TRUE(t.holds(slot_of_0, 100));
  EXPECT_FALSE(t.holds(1000, 100));
  EXPECT_FALSE(t.holds(decltype(t)::kNone, 100));
  t.retire_if([](const State& s) { return s.last < 5; }, gone);
  EXPECT_EQ(t.size(), 4u);  // 5, 6, 7, 100
  EXPECT_EQ(t.peak(), 8u);
  EXPECT_FALSE(t.holds(slot_of_1, 1));  // retired, its slot free
}

// A state whose cell rounds up to whole cache lines for at most an eighth more
// memory starts every cell on a line: the key and the state's first fields, read
// by every packet, never straddle one line more than needed (docs/performance.md,
// session 29).
TEST(FlowSlots, CellsStartOnACacheLineWhenThatCostsLittle) {
  struct State {
    std::array<double, 45> fields{};  // 360 bytes: with the key and live flag a 368-byte cell, 384 on lines
  };
  struct Hash {
    std::size_t operator()(int k) const { return static_cast<std::size_t>(k) * 0x9E3779B97F4A7C15ULL; }
  };
  FlowSlots<int, Hash, State> t(1024);
  auto last = [](const State&) { return 0.0; };
  auto gone = [](std::uint32_t, State&) {};
  std::set<std::uintptr_t> offsets;
  for (int k = 0; k < 200; ++k)
    offsets.insert(reinterpret_cast<std::uintptr_t>(t.at(t.emplace(k, last, gone))) % 64);
  EXPECT_EQ(offsets.size(), 1u);  // the state at one offset in its cell's first line
}

// ---------------------------------------------------------------- requester

TEST(RcRequester, GapIsReportedOnceAndNeverForAPsnTheCaptureHolds) {
  RequesterState q;
  Probe pr;
  EXPECT_EQ(send(q, pr, packet(OpKind::write_only, 10)).step, ReqStep::restart);
  EXPECT_EQ(send(q, pr, packet(OpKind::write_only, 11)).step, ReqStep::in_order);
  const RequesterEvent g = send(q, pr, packet(OpKind::write_only, 13));
  EXPECT_EQ(g.step, ReqStep::gap);
  EXPECT_EQ(g.ahead, 1u);
  EXPECT_EQ(pr.stats.faults().missing, 1u);
  // Asking to report PSNs the capture holds reports nothing (the structural rule).
  SeqSink s = pr.sink();
  EXPECT_FALSE(report_loss(q, false, 10, 2, packet(OpKind::write_only, 14), s));
  EXPECT_EQ(pr.count(AnomalyKind::psn_gap), 1u);
}

// Issue 15 class 2: middle packets of a multi-packet WRITE lost, new data sent
// before the NAK arrives, then the resend of all: no PSN the capture holds is
// called lost, and the resend is one episode caused by the NAK.
TEST(RcRequester, GoBackNResendOfHeldPsnsIsNoLoss) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::write_first, 100, 1));
  send(q, pr, packet(OpKind::write_last, 103, 4));  // 101, 102 lost
  EXPECT_EQ(pr.stats.faults().missing, 2u);
  send(q, pr, packet(OpKind::write_only, 104, 5));  // new data before the NAK
  answer(r, q, resp, pr, nak(101));
  EXPECT_EQ(resp.out.nak_gap_frame, g_frame - 2);  // the frame that showed the gap
  for (std::uint32_t psn = 101; psn <= 104; ++psn) {
    const RequesterEvent e = send(q, pr, packet(psn == 104 ? OpKind::write_only : OpKind::write_middle, psn, 5 + psn));
    EXPECT_EQ(e.step, ReqStep::resend);
    EXPECT_EQ(e.new_episode, psn == 101);
  }
  EXPECT_EQ(send(q, pr, packet(OpKind::write_only, 105, 200)).step, ReqStep::in_order);
  EXPECT_EQ(pr.count(AnomalyKind::psn_gap), 1u);
  EXPECT_EQ(pr.stats.faults().missing, 2u);
  EXPECT_EQ(pr.stats.faults().gaps_recovered, 1u);
  EXPECT_EQ(pr.stats.faults().retransmission_episodes, 1u);
}

// After a NAK the responder discards what follows; a resend that skips a PSN
// the capture held is a hole in the resend (lost_resends), not a lost PSN.
TEST(RcRequester, HoleInAResendAfterANakIsNotALostPsn) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  for (std::uint32_t psn = 1; psn <= 5; ++psn)
    if (psn != 2) send(q, pr, packet(OpKind::write_only, psn, static_cast<std::int32_t>(psn)));
  answer(r, q, resp, pr, nak(2));
  send(q, pr, packet(OpKind::write_only, 2, 10));
  send(q, pr, packet(OpKind::write_only, 3, 11));
  send(q, pr, packet(OpKind::write_only, 5, 12));  // the resent 4 was lost
  EXPECT_EQ(pr.count(AnomalyKind::psn_gap), 1u);   // only the first loss of 2
  EXPECT_EQ(pr.stats.faults().lost_resends, 1u);
  answer(r, q, resp, pr, nak(4));                   // the responder asks for 4 again
  EXPECT_NE(resp.out.nak_gap_frame, 0u);            // linked to where the resend skipped it
}

// Issue 15 class 3: a corrupt packet is held, not lost: no gap at the next PSN;
// its resend is a retransmission caused by corruption.
TEST(RcRequester, CorruptPacketIsHeldAndItsResendIsCausedByCorruption) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::write_only, 50, 1));
  SeqPacket bad = packet(OpKind::write_only, 51, 2);
  bad.corrupt = true;
  EXPECT_EQ(send(q, pr, bad).step, ReqStep::corrupt);
  EXPECT_EQ(send(q, pr, packet(OpKind::write_only, 52, 3)).step, ReqStep::in_order);
  answer(r, q, resp, pr, nak(51));
  EXPECT_EQ(resp.out.nak_gap_frame, bad.frame);
  send(q, pr, packet(OpKind::write_only, 51, 4));
  EXPECT_EQ(pr.count(AnomalyKind::psn_gap), 0u);
  ASSERT_EQ(pr.count(AnomalyKind::retransmission), 1u);
  for (const Anomaly& a : pr.items())
    if (a.kind == AnomalyKind::retransmission) {
      EXPECT_EQ(a.cause, ResendCause::corrupt);
    }
  // A corrupt packet whose PSN fits nowhere is only counted.
  SeqPacket wild = packet(OpKind::write_only, 9000, 5);
  wild.corrupt = true;
  EXPECT_EQ(classify(q, wild).step, ReqStep::corrupt_other);
}

TEST(RcRequester, LateOriginalIsReorderingEvenAfterANak) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::send_only, 1, 100));
  send(q, pr, packet(OpKind::send_only, 3, 102));  // 2 (IP ID 101) delayed
  answer(r, q, resp, pr, nak(2));
  // Its IPv4 ID comes before that of the packet that showed the gap: the original.
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 2, 101)).step, ReqStep::late);
  // The requester's resend of 2 (a new ID) is then a retransmission of a held PSN.
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 2, 103)).step, ReqStep::resend);
  EXPECT_EQ(pr.count(AnomalyKind::psn_out_of_order), 1u);
}

// Reordering (netem reorder, as seen in the fault matrix): the PSNs of a gap
// arrive later in packets the sender sent before the gap frame (older IPv4 IDs).
TEST(RcRequester, GapWhosePsnsAllCameLateIsWithdrawn) {
  RequesterState q;
  Probe pr;
  send(q, pr, packet(OpKind::send_only, 1, 100));
  send(q, pr, packet(OpKind::send_only, 4, 103));  // 2 and 3 overtaken
  EXPECT_EQ(pr.stats.faults().missing, 2u);
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 2, 101)).step, ReqStep::late);
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 3, 102)).step, ReqStep::late);
  EXPECT_EQ(pr.stats.faults().missing, 0u);
  EXPECT_EQ(pr.stats.faults().gaps, 0u);
  EXPECT_EQ(pr.stats.faults().gaps_recovered, 0u);  // nothing was lost, so nothing recovered
  for (const Anomaly& a : pr.items()) {
    if (a.kind == AnomalyKind::psn_gap) {
      EXPECT_TRUE(a.retracted);
    }
  }
  EXPECT_EQ(pr.count(AnomalyKind::psn_out_of_order), 2u);
  std::int32_t missing = 0, gaps = 0;
  for (const GapRevision& r : pr.log.revisions())
    if (r.flow == pr.stats.index) {
      missing += r.missing;
      gaps += r.gaps;
    }
  EXPECT_EQ(missing, -2);
  EXPECT_EQ(gaps, -1);
}

TEST(RcRequester, LatePsnInsideAGapSplitsIt) {
  RequesterState q;
  Probe pr;
  send(q, pr, packet(OpKind::send_only, 1, 100));
  send(q, pr, packet(OpKind::send_only, 5, 104));  // 2, 3, 4 missing
  send(q, pr, packet(OpKind::send_only, 3, 102));  // 3 was late
  std::vector<std::pair<std::int64_t, std::uint32_t>> ranges;
  for (const Anomaly& a : pr.items())
    if (a.kind == AnomalyKind::psn_gap && !a.retracted) ranges.emplace_back(a.expected_psn, a.count);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], (std::pair<std::int64_t, std::uint32_t>{2, 1}));
  EXPECT_EQ(ranges[1], (std::pair<std::int64_t, std::uint32_t>{4, 1}));
  EXPECT_EQ(pr.stats.faults().missing, 2u);
  EXPECT_EQ(pr.stats.faults().gaps, 1u);  // still one gap event
}

TEST(RcRequester, OriginalOvertakenByItsOwnResendIsLateNotLost) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::send_only, 1, 100));
  send(q, pr, packet(OpKind::send_only, 3, 102));  // 2 (ID 101) delayed
  answer(r, q, resp, pr, nak(2));
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 2, 103)).step, ReqStep::resend);  // the NAK's resend first
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 2, 101)).step, ReqStep::late_after_resend);
  EXPECT_EQ(pr.stats.faults().missing, 0u);
  EXPECT_EQ(pr.stats.faults().gaps, 0u);
  EXPECT_EQ(pr.count(AnomalyKind::psn_out_of_order), 1u);
  EXPECT_EQ(pr.stats.faults().retransmissions, 1u);  // the resend is still one (the NAK asked for it)
}

TEST(RcRequester, NakResendWhoseFirstPacketsWereOvertakenIsNeeded) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  for (std::uint32_t psn = 1; psn <= 6; ++psn) send(q, pr, packet(OpKind::send_only, psn, 99 + static_cast<std::int32_t>(psn)));
  answer(r, q, resp, pr, nak(2));
  for (std::uint32_t psn = 2; psn <= 4; ++psn) send(q, pr, packet(OpKind::send_only, psn, 104 + static_cast<std::int32_t>(psn)));
  answer(r, q, resp, pr, nak(3));
  // The resend from 3 (IDs 111, 112): 4 overtakes 3.
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 4, 112)).step, ReqStep::resend);
  EXPECT_EQ(send(q, pr, packet(OpKind::send_only, 3, 111)).step, ReqStep::resend_early);
  EXPECT_EQ(pr.stats.faults().spurious_retransmissions, 0u);
  EXPECT_EQ(pr.stats.faults().retransmissions, 5u);
}

TEST(RcRequester, NetworkCopyNeedsItsIpIdDuringAResend) {
  RequesterState q;
  Probe pr;
  send(q, pr, packet(OpKind::write_only, 7, 1));
  EXPECT_EQ(classify(q, packet(OpKind::write_only, 7, 1)).step, ReqStep::duplicate);
  q.resending = true;  // without an IPv4 ID, a quick copy during a resend is the resend
  q.resend_next = 7;
  EXPECT_EQ(classify(q, packet(OpKind::write_only, 7)).step, ReqStep::resend);
}

// ---------------------------------------------------------------- responses

// Issue 15 class 1: a READ response packet lost, the READ re-issued from the
// first missing PSN, the responses re-sent with PSNs already seen.
TEST(RcResponder, ReadRecoveryReissueAndResentResponses) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::read_request, 200, 1, 4));  // PSNs 200..203
  answer(r, q, resp, pr, packet(OpKind::read_response_first, 200, 10));
  const ResponseEvent gap = answer(r, q, resp, pr, packet(OpKind::read_response_middle, 202, 11));
  EXPECT_EQ(gap.step, RespStep::read_gap);
  EXPECT_EQ(resp.stats.faults().missing, 1u);
  answer(r, q, resp, pr, packet(OpKind::read_response_last, 203, 12));
  // The requester re-issues the READ from 201: a retransmission caused by the lost response.
  const SeqPacket reissue = packet(OpKind::read_request, 201, 2, 3);
  const RequesterEvent e = classify(q, reissue);
  EXPECT_EQ(e.step, ReqStep::resend);
  EXPECT_EQ(e.cause, ResendCause::response_loss);
  send(q, pr, reissue);
  EXPECT_FALSE(pr.out.spurious_retransmission);
  // The re-sent responses: 201 fills the gap, 202 and 203 were seen before.
  EXPECT_EQ(answer(r, q, resp, pr, packet(OpKind::read_response_first, 201, 13)).step, RespStep::read_data);
  EXPECT_EQ(resp.stats.faults().gaps_recovered, 1u);
  const ResponseEvent again = answer(r, q, resp, pr, packet(OpKind::read_response_middle, 202, 14));
  EXPECT_TRUE(again.resent);
  EXPECT_TRUE(resp.out.retransmission);
  answer(r, q, resp, pr, packet(OpKind::read_response_last, 203, 15));
  EXPECT_EQ(resp.stats.faults().resent_responses, 2u);
  EXPECT_EQ(resp.count(AnomalyKind::psn_gap), 1u);
  for (const Anomaly& a : resp.items())
    if (a.kind == AnomalyKind::psn_gap) {
      EXPECT_EQ(a.related_count, 2);  // the re-issue and the fill
    }
}

// A READ's `n` response packets from `first`, in order, with IPv4 IDs from `ip_id`.
void answer_read(ResponseCursor& r, RequesterState& q, Probe& resp, Probe& req, std::uint32_t first, std::uint32_t n,
                 std::int32_t ip_id) {
  for (std::uint32_t i = 0; i < n; ++i) {
    const OpKind k = i == 0 ? OpKind::read_response_first : i + 1 == n ? OpKind::read_response_last
                                                                       : OpKind::read_response_middle;
    answer(r, q, resp, req, packet(k, first + i, ip_id + static_cast<std::int32_t>(i)));
  }
}

// A READ re-issued from a response PSN whose response the capture holds intact
// and in order (rxe_corrupt_read_reissue, frame 601): the requester re-issues from
// the first response it lacks (IBA 9.7.6.1), so that response was lost after the
// capture point; not an ACK lost before it, not a needless resend.
TEST(RcResponder, ReissueFromAResponseCapturedInOrderIsALossAfterTheCapturePoint) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::read_request, 300, 1, 4));  // PSNs 300..303
  send(q, pr, packet(OpKind::read_request, 304, 2, 4));  // PSNs 304..307
  answer_read(r, q, resp, pr, 300, 4, 20);  // the requester never got 302
  answer(r, q, resp, pr, packet(OpKind::read_response_first, 304, 24));
  const SeqPacket reissue = packet(OpKind::read_request, 302, 3, 2);
  EXPECT_EQ(classify(q, reissue).cause, ResendCause::response_lost_after);
  send(q, pr, reissue);
  send(q, pr, packet(OpKind::read_request, 304, 4, 4));  // go-back-N: the next READ too
  send(q, pr, packet(OpKind::read_request, 308, 5, 1));  // a new one
  EXPECT_EQ(pr.count(AnomalyKind::retransmission), 1u);
  EXPECT_EQ(pr.stats.faults().spurious_retransmissions, 0u);
  EXPECT_EQ(pr.stats.faults().retransmissions, 2u);
  // Its answer, captured intact, and the requester re-issues from it again: lost again.
  answer(r, q, resp, pr, packet(OpKind::read_response_middle, 302, 25));
  EXPECT_EQ(classify(q, packet(OpKind::read_request, 302, 6, 2)).cause, ResendCause::response_lost_after);
}

// Not when the answer to the last request for that PSN is not captured (the
// re-issue answers a loss before the capture point), nor when a lower response
// came after it (the requester may have dropped it as early), nor on a flow whose
// responses were reordered before the capture point (the responder's IPv4 IDs).
TEST(RcResponder, ReissueAfterReorderingOrANewerLossIsNoLossAfterTheCapturePoint) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::read_request, 400, 1, 4));
  answer_read(r, q, resp, pr, 400, 4, 20);
  send(q, pr, packet(OpKind::read_request, 402, 2, 2));  // re-issued: its answers are due again
  answer(r, q, resp, pr, packet(OpKind::read_response_last, 403, 25));  // 402's answer never captured
  EXPECT_NE(classify(q, packet(OpKind::read_request, 402, 3, 2)).cause, ResendCause::response_lost_after);
  // A lower PSN after a higher one, sent later (a new round): 403 may have been dropped as early.
  answer(r, q, resp, pr, packet(OpKind::read_response_middle, 402, 26));
  EXPECT_NE(classify(q, packet(OpKind::read_request, 403, 3, 1)).cause, ResendCause::response_lost_after);
  // A response sent before the one captured just before it: reordered before the capture point.
  RequesterState q2;
  ResponseCursor r2;
  send(q2, pr, packet(OpKind::read_request, 500, 1, 4));
  answer(r2, q2, resp, pr, packet(OpKind::read_response_first, 500, 40));
  answer(r2, q2, resp, pr, packet(OpKind::read_response_last, 503, 43));
  answer(r2, q2, resp, pr, packet(OpKind::read_response_middle, 501, 41));
  answer(r2, q2, resp, pr, packet(OpKind::read_response_middle, 502, 42));
  EXPECT_NE(classify(q2, packet(OpKind::read_request, 502, 2, 2)).cause, ResendCause::response_lost_after);
}

TEST(RcResponder, CoalescedAckAfterAResendAnswersTheCopy) {
  RequesterState q;
  Probe pr, resp;
  ResponseCursor r;
  send(q, pr, packet(OpKind::send_first, 280, 1));
  send(q, pr, packet(OpKind::send_last, 281, 2));
  answer(r, q, resp, pr, packet(OpKind::acknowledge, 281, 3));  // syndrome 0: ACK
  send(q, pr, packet(OpKind::send_first, 280, 4));                // the timer fired: a spurious resend
  answer(r, q, resp, pr, packet(OpKind::acknowledge, 281, 5));   // answers part of the copy
  send(q, pr, packet(OpKind::send_last, 281, 6));
  answer(r, q, resp, pr, packet(OpKind::acknowledge, 281, 7));   // answers the whole copy
  send(q, pr, packet(OpKind::send_only, 282, 8));
  answer(r, q, resp, pr, packet(OpKind::acknowledge, 282, 9));   // closes the count
  EXPECT_EQ(pr.count(AnomalyKind::retransmission), 0u);          // nothing was lost
  EXPECT_EQ(pr.stats.faults().spurious_retransmissions, 2u);
}

// ---------------------------------------------------------------- unreliable

// Issue 15 class 4: a UD source numbers datagrams to all its peers with one
// counter: a jump is never a loss; only a copy with the same IPv4 ID is a duplicate.
TEST(Unreliable, UdJumpIsNoLossAndOnlyANetworkCopyIsADuplicate) {
  UnreliableState u;
  Probe pr;
  auto feed = [&](std::uint32_t psn, std::int32_t ip_id) {
    const SeqPacket p = packet(OpKind::send_only, psn, ip_id);
    const UnreliableEvent e = classify(u, true, p);
    SeqSink s = pr.sink();
    apply(u, e, p, s);
    return e.step;
  };
  EXPECT_EQ(feed(10, 1), UnreliableStep::ud_datagram);
  EXPECT_EQ(feed(490, 2), UnreliableStep::ud_datagram);
  EXPECT_EQ(feed(93238, 3), UnreliableStep::ud_datagram);
  EXPECT_EQ(feed(11, 4), UnreliableStep::ud_datagram);
  EXPECT_EQ(feed(490, 2), UnreliableStep::duplicate);
  EXPECT_EQ(pr.count(AnomalyKind::psn_gap), 0u);
  EXPECT_EQ(pr.count(AnomalyKind::psn_duplicate), 1u);
}

TEST(Unreliable, UcTellsLatePacketsFromCopiesByWhatWasSeen) {
  UnreliableState u;
  Probe pr;
  auto feed = [&](std::uint32_t psn) {
    const SeqPacket p = packet(OpKind::send_only, psn);
    const UnreliableEvent e = classify(u, false, p);
    SeqSink s = pr.sink();
    apply(u, e, p, s);
    return e.step;
  };
  EXPECT_EQ(feed(5), UnreliableStep::start);
  EXPECT_EQ(feed(4), UnreliableStep::late);  // older than the first seen, never seen: reordered
  EXPECT_EQ(feed(7), UnreliableStep::gap);
  EXPECT_EQ(feed(6), UnreliableStep::late);
  EXPECT_EQ(feed(6), UnreliableStep::duplicate);
  // UC never resends: the gap was reordering, so it is withdrawn, not recovered.
  EXPECT_EQ(pr.stats.faults().gaps, 0u);
  EXPECT_EQ(pr.stats.faults().missing, 0u);
  EXPECT_EQ(pr.stats.faults().gaps_recovered, 0u);
  EXPECT_EQ(pr.count(AnomalyKind::psn_gap), 1u);
  for (const Anomaly& a : pr.items()) {
    if (a.kind == AnomalyKind::psn_gap) {
      EXPECT_TRUE(a.retracted);
    }
  }
}

// Corruption is not loss (issue 15 class 3, on UC): a corrupt packet at the next
// PSN holds it; one far off or behind says nothing. Regression: the fault
// matrix's rxe-corrupt-* boots, write_lat UC (a gap at the corrupt packet's PSN).
TEST(Unreliable, UcCorruptPacketHoldsItsPsn) {
  UnreliableState u;
  Probe pr;
  auto feed = [&](std::uint32_t psn, bool corrupt) {
    SeqPacket p = packet(OpKind::send_only, psn);
    p.corrupt = corrupt;
    const UnreliableEvent e = classify(u, false, p);
    SeqSink s = pr.sink();
    apply(u, e, p, s);
    return e.step;
  };
  EXPECT_EQ(feed(10, false), UnreliableStep::start);
  EXPECT_EQ(feed(11, true), UnreliableStep::in_order);
  EXPECT_EQ(feed(12, false), UnreliableStep::in_order);
  EXPECT_EQ(feed(12 + 5000, true), UnreliableStep::corrupt_ignored);
  EXPECT_EQ(feed(3, true), UnreliableStep::corrupt_ignored);
  EXPECT_EQ(feed(13, false), UnreliableStep::in_order);
  EXPECT_EQ(pr.stats.faults().gaps, 0u);
  EXPECT_EQ(pr.stats.faults().duplicates + pr.stats.faults().out_of_order, 0u);
}
