// Whether a direction's captured ICRCs are the wire's (decode/icrc_origin.h),
// one rule at a time: which PSN an answer shows its responder took (IBA Vol 1
// §9.7.5.1: an ACK and an RNR NAK name the request's PSN, a NAK PSN sequence
// error the PSN it expects), and the tracker's decisions.
#include <gtest/gtest.h>

#include "decode/icrc_origin.h"

using namespace rdmadiag::decode;

namespace {

Aeth aeth(AethKind k, std::uint8_t value = 0) { return Aeth{static_cast<std::uint8_t>((static_cast<unsigned>(k) << 5) | value), 0}; }

FlowKey hosts(std::uint8_t from, std::uint8_t to) {
  FlowKey k;
  k.set_kind(Transport::roce_v2, 4);
  k.src[3] = from;
  k.dst[3] = to;
  return k;
}

IcrcOriginTracker::Held held(std::uint32_t psn, std::uint64_t frame) {
  IcrcOriginTracker::Held h;
  h.sp.psn = psn;
  h.sp.frame = frame;
  return h;
}

TEST(IcrcOrigin, PsnTakenByEachAnswer) {
  std::uint32_t taken = 99;
  EXPECT_TRUE(psn_taken_by_answer(OpKind::acknowledge, 100, aeth(AethKind::ack, 31), taken));
  EXPECT_EQ(taken, 100u);
  EXPECT_TRUE(psn_taken_by_answer(OpKind::acknowledge, 100, aeth(AethKind::rnr_nak, 14), taken));
  EXPECT_EQ(taken, 100u);
  // A PSN sequence error names the PSN it expects: the one before it was taken (24-bit wrap).
  EXPECT_TRUE(psn_taken_by_answer(OpKind::acknowledge, 0, aeth(AethKind::nak, 0), taken));
  EXPECT_EQ(taken, 0xFFFFFFu);
  EXPECT_TRUE(psn_taken_by_answer(OpKind::acknowledge, 100, aeth(AethKind::nak, 2), taken));  // remote access error
  EXPECT_EQ(taken, 100u);
  EXPECT_FALSE(psn_taken_by_answer(OpKind::acknowledge, 100, aeth(AethKind::reserved), taken));
  EXPECT_TRUE(psn_taken_by_answer(OpKind::atomic_acknowledge, 7, aeth(AethKind::ack), taken));
  EXPECT_EQ(taken, 7u);
  EXPECT_TRUE(psn_taken_by_answer(OpKind::read_response_first, 8, aeth(AethKind::ack), taken));
  EXPECT_TRUE(psn_taken_by_answer(OpKind::read_response_only, 9, aeth(AethKind::ack), taken));
  EXPECT_EQ(taken, 9u);
  EXPECT_FALSE(psn_taken_by_answer(OpKind::read_response_middle, 10, aeth(AethKind::ack), taken));
  EXPECT_FALSE(psn_taken_by_answer(OpKind::read_response_last, 10, aeth(AethKind::ack), taken));
  EXPECT_FALSE(psn_taken_by_answer(OpKind::write_only, 10, aeth(AethKind::ack), taken));
}

TEST(IcrcOrigin, AnIntactPacketOfTheDirectionMeansItsIcrcsAreTheWires) {
  IcrcOriginTracker t;
  EXPECT_FALSE(t.learning());
  IcrcOriginTracker::Direction* d = t.bad_packet(hosts(2, 1), 10);
  ASSERT_NE(d, nullptr);
  t.hold(*d, held(500, 10));
  EXPECT_TRUE(t.learning());
  EXPECT_FALSE(t.intact_packet(hosts(1, 2)));  // the other direction: nothing
  EXPECT_EQ(d->origin, IcrcOrigin::undecided);
  EXPECT_FALSE(t.intact_packet(hosts(2, 1)));
  EXPECT_EQ(d->origin, IcrcOrigin::wire);
  EXPECT_TRUE(d->held.empty());
  EXPECT_FALSE(t.learning());
  EXPECT_FALSE(t.answer(hosts(2, 1), 500, 12));  // decided: an answer changes nothing
  EXPECT_EQ(d->origin, IcrcOrigin::wire);
}

TEST(IcrcOrigin, AnAnswerNamingAPsnHeldOnlyCorruptMeansTheyAreNot) {
  IcrcOriginTracker t;
  IcrcOriginTracker::Direction* d = t.bad_packet(hosts(2, 1), 10);
  t.hold(*d, held(500, 10));
  t.hold(*d, held(501, 11));
  EXPECT_FALSE(t.answer(hosts(2, 1), 499, 12));  // a PSN the capture does not hold corrupt: not evidence
  EXPECT_EQ(d->origin, IcrcOrigin::undecided);
  EXPECT_TRUE(t.answer(hosts(2, 1), 501, 13));
  EXPECT_EQ(d->origin, IcrcOrigin::not_wire);
  EXPECT_EQ(d->evidence, 13u);
  EXPECT_EQ(d->first_bad_frame, 10u);
  EXPECT_EQ(d->held.size(), 2u);  // kept for the caller to replay
  t.settle(*d);
  EXPECT_TRUE(d->held.empty());
  EXPECT_TRUE(t.learning());  // a not_wire direction is watched for a contradiction
  EXPECT_TRUE(t.intact_packet(hosts(2, 1)));
  EXPECT_EQ(d->origin, IcrcOrigin::wire);
  EXPECT_FALSE(t.learning());
}

TEST(IcrcOrigin, MemoryIsBounded) {
  IcrcOriginTracker t;
  IcrcOriginTracker::Direction* d = t.bad_packet(hosts(2, 1), 1);
  for (std::uint32_t i = 0; i < 2 * IcrcOriginTracker::kMaxHeld; ++i) t.hold(*d, held(i, i + 1));
  EXPECT_EQ(d->held.size(), IcrcOriginTracker::kMaxHeld);
  EXPECT_EQ(d->not_held, IcrcOriginTracker::kMaxHeld);
  std::size_t made = 1;
  for (unsigned a = 0; a < 256 && made < IcrcOriginTracker::kMaxDirections + 10; ++a)
    for (unsigned b = 0; b < 256 && made < IcrcOriginTracker::kMaxDirections + 10; ++b, ++made) {
      FlowKey k = hosts(3, 1);
      k.src[1] = static_cast<std::uint8_t>(a);
      k.src[2] = static_cast<std::uint8_t>(b);
      IcrcOriginTracker::Direction* e = t.bad_packet(k, made);
      if (made >= IcrcOriginTracker::kMaxDirections) {
        EXPECT_EQ(e, nullptr);
      }
    }
}

}  // namespace

// IBA 12.6: a REQ and a REP introduce their sender's Local Communication ID; the
// peer's later messages name it as their Remote one. Naming a REQ's or REP's
// held only corrupt shows the peer's CM took it; an RTU introduces nothing.
TEST(IcrcOrigin, ACmAnswerNamingAHeldReqOrRepMeansTheyAreNot) {
  IcrcOriginTracker t;
  const FlowKey ab = hosts(1, 2);
  IcrcOriginTracker::Direction* d = t.bad_packet(ab, 7);
  ASSERT_NE(d, nullptr);
  IcrcOriginTracker::HeldCm rtu;
  rtu.cm.type = CmMessageType::rtu;
  rtu.cm.local_comm_id = 0x1111;
  t.hold_cm(*d, rtu);
  EXPECT_FALSE(t.cm_answer(ab, 0x1111, 8));  // an RTU's ID was introduced by an earlier REQ/REP
  EXPECT_FALSE(t.cm_answer(ab, 0, 8));
  IcrcOriginTracker::HeldCm req;
  req.cm.type = CmMessageType::req;
  req.cm.local_comm_id = 0x98498c7f;
  req.frame = 7;
  t.hold_cm(*d, req);
  EXPECT_FALSE(t.cm_answer(hosts(2, 1), 0x98498c7f, 8));  // not the direction that sent it
  EXPECT_TRUE(t.cm_answer(ab, 0x98498c7f, 8));
  EXPECT_EQ(d->origin, IcrcOrigin::not_wire);
  EXPECT_EQ(d->evidence, 8u);
  EXPECT_EQ(d->cms.size(), 2u);  // kept for the replay until settled
  t.settle(*d);
  EXPECT_TRUE(d->cms.empty());
  EXPECT_FALSE(t.cm_answer(ab, 0x98498c7f, 9));  // decided already
}
