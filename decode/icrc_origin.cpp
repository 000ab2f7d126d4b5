#include "decode/icrc_origin.h"

#include <algorithm>

#include "decode/psn_window.h"

namespace rdmadiag::decode {

bool psn_taken_by_answer(OpKind kind, std::uint32_t psn, const Aeth& aeth, std::uint32_t& taken) {
  switch (kind) {
    case OpKind::acknowledge:
      // A PSN sequence error names the PSN it expects: the one before it was taken.
      taken = aeth.psn_sequence_nak() ? (psn - 1) & kPsnMask : psn;
      return aeth.kind() != AethKind::reserved;
    case OpKind::atomic_acknowledge:
    case OpKind::read_response_first:
    case OpKind::read_response_only:
      taken = psn;
      return true;
    default:
      return false;
  }
}

IcrcOriginTracker::Direction* IcrcOriginTracker::bad_packet(const FlowKey& hosts, std::uint64_t frame) {
  if (auto it = dirs_.find(hosts); it != dirs_.end()) return &it->second;
  if (dirs_.size() >= kMaxDirections) return nullptr;
  Direction& d = dirs_[hosts];
  d.first_bad_frame = frame;
  ++undecided_;
  return &d;
}

void IcrcOriginTracker::hold(Direction& d, const Held& h) {
  if (d.origin != IcrcOrigin::undecided) return;
  if (d.held.size() >= kMaxHeld || held_total_ >= kMaxHeldTotal) {
    ++d.not_held;
    return;
  }
  d.held.push_back(h);
  ++held_total_;
}

void IcrcOriginTracker::hold_cm(Direction& d, const HeldCm& m) {
  if (d.origin == IcrcOrigin::undecided && d.cms.size() < kMaxHeldCm) d.cms.push_back(m);
}

bool IcrcOriginTracker::cm_answer(const FlowKey& requests, std::uint32_t remote_comm_id, std::uint64_t frame) {
  Direction* d = find(requests);
  if (!d || d->origin != IcrcOrigin::undecided || remote_comm_id == 0) return false;
  const bool held_corrupt = std::any_of(d->cms.begin(), d->cms.end(), [&](const HeldCm& m) {
    // Only a REQ or REP introduces its sender's ID to the peer: naming it shows one was taken.
    return (m.cm.type == CmMessageType::req || m.cm.type == CmMessageType::rep) && m.cm.local_comm_id == remote_comm_id;
  });
  if (!held_corrupt) return false;
  d->evidence = frame;
  decide(*d, IcrcOrigin::not_wire);
  return true;
}

void IcrcOriginTracker::decide(Direction& d, IcrcOrigin o) {
  undecided_ -= d.origin == IcrcOrigin::undecided;
  not_wire_ -= d.origin == IcrcOrigin::not_wire;
  d.origin = o;
  not_wire_ += o == IcrcOrigin::not_wire;
}

bool IcrcOriginTracker::intact_packet(const FlowKey& hosts) {
  Direction* d = find(hosts);
  if (!d || d->origin == IcrcOrigin::wire) return false;
  const bool contradicts = d->origin == IcrcOrigin::not_wire;
  decide(*d, IcrcOrigin::wire);
  settle(*d);
  return contradicts;
}

bool IcrcOriginTracker::answer(const FlowKey& requests, std::uint32_t taken, std::uint64_t frame) {
  Direction* d = find(requests);
  if (!d || d->origin != IcrcOrigin::undecided) return false;
  const bool held_corrupt =
      std::any_of(d->held.begin(), d->held.end(), [&](const Held& h) { return h.sp.psn == taken; });
  if (!held_corrupt) return false;
  d->evidence = frame;
  decide(*d, IcrcOrigin::not_wire);
  return true;
}

IcrcOriginTracker::Direction* IcrcOriginTracker::find(const FlowKey& hosts) {
  const auto it = dirs_.find(hosts);
  return it == dirs_.end() ? nullptr : &it->second;
}

}  // namespace rdmadiag::decode
