// Unreliable services as seen at a capture point: IBA Vol 1 §9.8. No ACKs and
// no retransmission.
//
// UC (§9.8.3): one PSN sequence per connection; the responder drops packets out
// of sequence, so a skipped PSN was lost before the capture point (a gap), an
// older PSN is a copy if the capture holds it, else a late packet.
//
// UD (§9.8.2, §9.8.4): a UD QP numbers its packets with one counter for every
// destination (QP0 subnet management and QP1 general services included, IBA
// 13.5), and nothing on the wire says which PSN comes next for a given
// destination: a UD flow is keyed by its source (source QP from the DETH) and a
// PSN jump is never a loss. Only a copy made by the network (the same PSN with
// the same IPv4 ID) is reported.
//
// A UC packet captured with a bad ICRC was on the wire (its receiver drops it):
// when its PSN is the next one (or a little ahead) it holds that PSN, so the
// packet after it shows no gap for it. Corruption is not loss.
#pragma once
#include <cstdint>
#include <vector>

#include "decode/rc_requester.h"

namespace rdmadiag::decode {

inline constexpr std::int32_t kUcCorruptAhead = 64;  // how far ahead a corrupt UC packet's PSN is believed

struct UnreliableState {
  UnreliableState() {}  // user-provided: `seen`'s bits stay unwritten (psn_window.h), not zeroed
  bool started = false;
  std::uint32_t expected = 0;      // UC: the next PSN
  std::vector<OpenLoss> gaps;      // UC: open gaps (at most kMaxOpenLosses)
  PsnWindow seen;                  // UC: PSNs seen, to tell late packets from copies (psn_window.h)
  RecentCopies recent;             // UD: the last datagrams' PSNs and IPv4 IDs
};

enum class UnreliableStep : std::uint8_t { start, in_order, gap, late, duplicate, ud_datagram, corrupt_ignored };

struct UnreliableEvent {
  UnreliableStep step = UnreliableStep::in_order;
  std::uint32_t ahead = 0;  // gap: PSNs skipped
};

UnreliableEvent classify(const UnreliableState& u, bool ud, const SeqPacket& p);
void apply(UnreliableState& u, const UnreliableEvent& e, const SeqPacket& p, SeqSink& sink);

}  // namespace rdmadiag::decode
