// One direction's MPA framing mode (decode/mpa_direction.h), one transition at
// a time, from RFC 5044: section 7.1 (the Request/Reply exchange: the initiator
// sends FPDUs only after an accepting Reply, the responder right after it, none
// after a Reject), section 4 (FPDUs back to back; a wrong marker, 4.3, does not
// lose the framing), and what a capture adds: bytes lost to it, a start
// mid-connection. DDP restarts with MSN 1 on every queue after the negotiation
// (RFC 5041 section 5.3), with nothing known after a resync.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decode/mpa_direction.h"

using namespace rdmadiag::decode;
using Kind = MpaUnit::Kind;

namespace {

struct Recorder final : MpaDirSink {
  std::vector<std::string> calls;
  void identified() override { calls.push_back("identified"); }
  void framing_started() override { calls.push_back("framing"); }
  void bad_framing(std::uint32_t n) override { calls.push_back("bad_framing " + std::to_string(n)); }
  void resync(std::uint32_t n) override { calls.push_back("resync " + std::to_string(n)); }
  void reset_ddp(bool msns_known) override { calls.push_back(msns_known ? "ddp msn 1" : "ddp unknown"); }
};

MpaDirState in(MpaMode m, bool identified = true, bool reliable = false) {
  MpaDirState s;
  s.mode = m;
  s.identified = identified;
  s.reliable = reliable;
  return s;
}

// Applies one unit; returns what the sink heard.
std::vector<std::string> run(MpaDirState& s, Kind k, std::uint32_t count = 0) {
  Recorder r;
  mpa_dir_apply(s, mpa_dir_classify(s, MpaUnit{k, count}), r);
  return r.calls;
}

using Calls = std::vector<std::string>;

}  // namespace

TEST(MpaDirection, ClassifyIsPure) {
  const MpaDirState s = in(MpaMode::await_reply, true, false);
  const MpaStep a = mpa_dir_classify(s, MpaUnit{Kind::peer_accepted, 0});
  const MpaStep b = mpa_dir_classify(s, MpaUnit{Kind::peer_accepted, 0});
  EXPECT_EQ(a.next, b.next);
  EXPECT_EQ(s.mode, MpaMode::await_reply);  // unchanged until apply
}

TEST(MpaDirection, StreamStart) {
  MpaDirState s;
  EXPECT_EQ(run(s, Kind::start_negotiation), Calls{});
  EXPECT_EQ(s.mode, MpaMode::negotiation);
  s = MpaDirState{};
  run(s, Kind::start_mid_stream);
  EXPECT_EQ(s.mode, MpaMode::hunting);
  s = MpaDirState{};
  run(s, Kind::start_not_mpa);
  EXPECT_EQ(s.mode, MpaMode::not_iwarp);
}

TEST(MpaDirection, RequestWaitsForTheReply) {
  MpaDirState s = in(MpaMode::negotiation, false);
  EXPECT_EQ(run(s, Kind::request), Calls{"identified"});
  EXPECT_EQ(s.mode, MpaMode::await_reply);  // section 7.1: no FPDU before the Reply
  EXPECT_FALSE(s.reliable);
}

TEST(MpaDirection, AcceptingReplyFramesBothDirections) {
  MpaDirState responder = in(MpaMode::negotiation, true);
  EXPECT_EQ(run(responder, Kind::reply_accepted), (Calls{"ddp msn 1", "framing"}));
  EXPECT_EQ(responder.mode, MpaMode::fpdu);
  EXPECT_TRUE(responder.reliable);
  MpaDirState initiator = in(MpaMode::await_reply, true);
  EXPECT_EQ(run(initiator, Kind::peer_accepted), (Calls{"ddp msn 1", "framing"}));
  EXPECT_EQ(initiator.mode, MpaMode::fpdu);
  EXPECT_TRUE(initiator.reliable);
  // An initiator no longer waiting (it lost bytes and is hunting) is not reframed by the Reply.
  MpaDirState hunting = in(MpaMode::hunting, true);
  EXPECT_EQ(run(hunting, Kind::peer_accepted), Calls{});
  EXPECT_EQ(hunting.mode, MpaMode::hunting);
  EXPECT_FALSE(hunting.reliable);
}

TEST(MpaDirection, RejectEndsBothDirections) {
  MpaDirState responder = in(MpaMode::negotiation, false);
  EXPECT_EQ(run(responder, Kind::reply_rejected), Calls{"identified"});
  EXPECT_EQ(responder.mode, MpaMode::not_iwarp);
  MpaDirState initiator = in(MpaMode::await_reply, true);
  EXPECT_EQ(run(initiator, Kind::peer_rejected), Calls{});
  EXPECT_EQ(initiator.mode, MpaMode::not_iwarp);
}

TEST(MpaDirection, MalformedNegotiation) {
  MpaDirState unknown = in(MpaMode::negotiation, false);
  EXPECT_EQ(run(unknown, Kind::negotiation_malformed), Calls{});  // it only looked like MPA
  EXPECT_EQ(unknown.mode, MpaMode::not_iwarp);
  MpaDirState known = in(MpaMode::negotiation, true);  // the peer negotiated: this side's framing is broken
  EXPECT_EQ(run(known, Kind::negotiation_malformed), Calls{"bad_framing 0"});
  EXPECT_EQ(known.mode, MpaMode::hunting);
}

TEST(MpaDirection, OverdueReplyStartsAHunt) {
  MpaDirState s = in(MpaMode::await_reply, true);
  EXPECT_EQ(run(s, Kind::reply_overdue), Calls{});
  EXPECT_EQ(s.mode, MpaMode::hunting);
}

// A Request/Reply whose header the snap length cut is no bad framing: both the
// cut side and an initiator waiting for that Reply look for FPDU headers.
TEST(MpaDirection, UncapturedNegotiationStartsAHuntSilently) {
  for (MpaMode m : {MpaMode::negotiation, MpaMode::await_reply}) {
    MpaDirState s = in(m, true);
    EXPECT_EQ(run(s, Kind::negotiation_not_captured), Calls{});
    EXPECT_EQ(s.mode, MpaMode::hunting);
  }
}

TEST(MpaDirection, FpdusKeepTheFramingAWrongMarkerIsSaid) {
  MpaDirState s = in(MpaMode::fpdu, true, true);
  EXPECT_EQ(run(s, Kind::fpdu), Calls{});
  EXPECT_EQ(run(s, Kind::fpdu, 2), Calls{"bad_framing 2"});  // section 4.3: markers are checked, not framing
  EXPECT_EQ(s.mode, MpaMode::fpdu);
  EXPECT_TRUE(s.reliable);
}

TEST(MpaDirection, BytesThatCannotBeAnFpduLoseTheFraming) {
  MpaDirState s = in(MpaMode::fpdu, true, true);
  EXPECT_EQ(run(s, Kind::not_an_fpdu, 1), Calls{"bad_framing 1"});
  EXPECT_EQ(s.mode, MpaMode::hunting);
  EXPECT_FALSE(s.reliable);
  MpaDirState quiet = in(MpaMode::fpdu, true, true);
  quiet.quiet_framing = true;  // no stride fits the markers (said once): not said again per FPDU
  EXPECT_EQ(run(quiet, Kind::not_an_fpdu, 1), Calls{});
  EXPECT_EQ(quiet.mode, MpaMode::hunting);
}

TEST(MpaDirection, BoundaryFoundResumesFramingWithNothingKnown) {
  MpaDirState s = in(MpaMode::hunting, false);
  EXPECT_EQ(run(s, Kind::boundary_found, 300), (Calls{"identified", "resync 300", "ddp unknown", "framing"}));
  EXPECT_EQ(s.mode, MpaMode::fpdu);
  EXPECT_FALSE(s.reliable);  // a response may answer a request this capture never held
}

TEST(MpaDirection, HuntWithoutABoundaryIsNotMpa) {
  MpaDirState s = in(MpaMode::hunting, false);
  EXPECT_EQ(run(s, Kind::hunt_exhausted), Calls{});
  EXPECT_EQ(s.mode, MpaMode::not_iwarp);
}

TEST(MpaDirection, LostBytesEndTheFramingInEveryFollowedMode) {
  for (MpaMode m : {MpaMode::start, MpaMode::negotiation, MpaMode::await_reply, MpaMode::fpdu, MpaMode::hunting}) {
    MpaDirState s = in(m, true, true);
    EXPECT_EQ(run(s, Kind::bytes_lost), Calls{"ddp unknown"});
    EXPECT_EQ(s.mode, MpaMode::hunting);
    EXPECT_FALSE(s.reliable);
  }
  MpaDirState ignored = in(MpaMode::not_iwarp, false);
  EXPECT_EQ(run(ignored, Kind::bytes_lost), Calls{});
  EXPECT_EQ(ignored.mode, MpaMode::not_iwarp);
}
