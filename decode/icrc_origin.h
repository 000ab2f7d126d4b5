// Whether the ICRCs captured from one host to another are the ones on the wire.
// IBA Vol 1 §9.6 (packet checks: a packet whose ICRC fails is dropped
// silently), §9.7.5.1 (a responder answers, with an ACK, NAK, READ response or
// atomic ACK, only requests that passed those checks), Annex A17.4 (the RoCEv2
// ICRC).
//
// A capture point inside the sending host can see its RoCE packets before the
// adapter computes their ICRC (as with TCP checksum offload): every one of them
// then looks corrupt, and calling each "corrupted in flight, dropped by the
// receiver" hides the real sequence. The receiver's own answers tell the two
// apart: an intact answer that says the responder took a PSN the capture holds
// only with a bad ICRC shows the captured ICRC was not the one it checked.
//
// Per direction (sender -> receiver address), learned while undecided:
//   - an intact packet of the direction: its ICRCs are computed before the
//     capture point (`wire`; its bad ones are corruption);
//   - an intact answer naming a PSN held only corrupt, while no packet of the
//     direction was intact: `not_wire` (its bad ICRCs are not checked). A
//     responder takes a PSN only from an intact copy, which would have passed
//     the capture point; one exact PSN is the evidence.
//   - an intact CM message naming as its Remote Communication ID the Local one
//     of a REQ or REP held only corrupt (a REP or REJ answering the REQ, an RTU
//     the REP; IBA 12.6): `not_wire` likewise. Only those two introduce the ID,
//     so the peer's CM took one;
//   - an intact packet of a `not_wire` direction contradicts it (a sender whose
//     ICRCs the capture cannot see sends no intact one): `wire` again from there.
// Before the first answer every bad packet got the verdict "corrupt"; a
// direction found not_wire has them replayed as intact, in capture order.
// Memory: at most kMaxDirections directions; an undecided one remembers its
// first kMaxHeld bad packets (at most kMaxHeldTotal over all), freed once decided.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "decode/flow_summary.h"
#include "decode/ib_mad.h"
#include "decode/ib_opcodes.h"
#include "decode/ib_transport.h"
#include "decode/rc_requester.h"

namespace rdmadiag::decode {

enum class IcrcOrigin : std::uint8_t { undecided, wire, not_wire };

// The requester PSN an intact answer shows its responder took (IBA 9.7.5.1):
// an ACK's or RNR NAK's own PSN, a NAK PSN sequence error's one before the PSN
// it expects, another NAK's or an atomic ACK's or a READ response's first
// packet's PSN. False for what names no single taken PSN (READ response
// middle/last packets, requests).
bool psn_taken_by_answer(OpKind kind, std::uint32_t psn, const Aeth& aeth, std::uint32_t& taken);

class IcrcOriginTracker {
 public:
  static constexpr std::size_t kMaxDirections = 4096;
  static constexpr std::size_t kMaxHeld = 8192;  // a direction's many QPs can each send before the first answer

  static constexpr std::size_t kMaxHeldTotal = 32768;  // over all directions (128 bytes each: 4 MB)
  // A packet captured with a bad ICRC, its verdict given while undecided: what
  // replaying it as intact needs.
  struct Held {
    SeqPacket sp;
    SeqFacts facts;
    FlowKey flow;  // the flow that counted it
  };
  // A CM message captured with a bad ICRC while undecided: replayed into the
  // CM pairing if the direction is found not_wire.
  struct HeldCm {
    CmMessage cm;
    FlowKey ends;  // its addresses, as the CM pairing keys them
    std::uint64_t frame = 0;
    double ts = 0;
  };
  static constexpr std::size_t kMaxHeldCm = 64;  // per direction: a few per connection set up before the first answer
  struct Direction {
    IcrcOrigin origin = IcrcOrigin::undecided;
    std::vector<Held> held;
    std::vector<HeldCm> cms;
    std::uint64_t first_bad_frame = 0;
    std::uint64_t evidence = 0;  // the answer's frame
    std::size_t anomaly = SIZE_MAX;  // its icrc_not_wire entry, once decided
    std::uint32_t not_held = 0;      // bad packets past the bounds while undecided: their verdicts stand
  };

  // Nothing to learn or check while no direction is undecided or not_wire (the
  // per-packet check).
  bool learning() const { return undecided_ + not_wire_ != 0; }
  // A packet of direction `hosts` (addresses only) with a bad ICRC: the
  // direction, made undecided at its first bad packet; nullptr past the bound.
  Direction* bad_packet(const FlowKey& hosts, std::uint64_t frame);
  // Remembers the verdict given to a bad packet of an undecided direction.
  void hold(Direction& d, const Held& h);
  // Remembers a CM message of an undecided direction captured with a bad ICRC.
  void hold_cm(Direction& d, const HeldCm& m);
  // An intact packet of direction `hosts` (call while learning()): true if it
  // contradicts a not_wire verdict (the direction is `wire` from here).
  bool intact_packet(const FlowKey& hosts);
  // An intact answer to direction `requests` (call while learning()) that shows
  // PSN `taken` was taken: true when it decides the direction not_wire now
  // (the caller withdraws the held verdicts, then calls settle()).
  bool answer(const FlowKey& requests, std::uint32_t taken, std::uint64_t frame);
  // An intact CM message to direction `requests` naming `remote_comm_id`: true
  // when it answers a CM message held only corrupt and so decides not_wire now.
  bool cm_answer(const FlowKey& requests, std::uint32_t remote_comm_id, std::uint64_t frame);
  Direction* find(const FlowKey& hosts);
  // The held verdicts are handled: frees them.
  void settle(Direction& d) {
    held_total_ -= d.held.size();
    std::vector<Held>().swap(d.held);
    std::vector<HeldCm>().swap(d.cms);
  }

 private:
  void decide(Direction& d, IcrcOrigin o);
  std::unordered_map<FlowKey, Direction, FlowKeyHash> dirs_;
  std::size_t undecided_ = 0, not_wire_ = 0;
  std::size_t held_total_ = 0;
};

}  // namespace rdmadiag::decode
