// Queue pairs stalled by pauses (IEEE 802.1Qbb clause 36: a paused priority's
// frames wait in the sender's queue): part of the pause analysis
// (pfc_analysis.h). A RoCE queue pair stalls when the time between two of its
// packets on one priority at the capture point is long; the stall coincides with pauses when
// pauses of the packets' priority, by senders other than the packets' own
// source, cover at least half of that time (kMinCover): the pause explains most
// of the wait. Shorter gaps than kMinStallNs are not looked at (a few packet
// times at any speed).
//
// Memory: the last packet time of at most kMaxQueuePairs queue pairs (a
// bounded table, decode/flow_slots.h: the least recently active are dropped
// past it), and per priority the last kRecentPauses pauses that ended; nothing
// per packet.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "decode/flow_slots.h"
#include "decode/mac_control.h"

namespace rdmadiag::decode {

struct PausedSpan {
  std::array<std::uint8_t, 6> mac{};  // the pause's sender
  std::int64_t start_ns = 0, end_ns = 0;
};

// What the report shows per priority (summed over the shards of analyze -j).
struct PriorityStalls {
  std::uint64_t stalls = 0;          // gaps of a queue pair that pauses cover at least half of
  double stalled_seconds = 0;        // their total length
  double longest_seconds = 0;
  std::uint64_t longest_frame = 0;   // the packet that ended the longest stall
  void merge(const PriorityStalls& o);
};

// The part of [t0, t1] that `spans` cover, counting overlapping spans once
// (spans by `except` are skipped). Spans are few (kRecentPauses + senders).
std::int64_t covered_ns(const PausedSpan* spans, std::size_t n, std::int64_t t0, std::int64_t t1,
                        const std::array<std::uint8_t, 6>* except);

class PauseStalls {
 public:
  static constexpr std::size_t kMaxQueuePairs = 1 << 16;
  static constexpr std::size_t kRecentPauses = 64;
  static constexpr std::int64_t kMinStallNs = 10'000;
  static constexpr double kMinCover = 0.5;

  PauseStalls() = default;
  // A pause of `priority` that ended.
  void pause_ended(std::size_t priority, const PausedSpan& s);
  // A RoCE packet of queue pair `qp`: the time of its previous packet when the
  // gap since is at least kMinStallNs (then call stall()), else -1.
  std::int64_t long_gap_start(std::uint64_t qp, std::int64_t ts_ns);
  // Judges the gap [t0, t1] of a queue pair on `priority` ended by `frame`;
  // `open` are the pauses of that priority not ended yet (end_ns: t1 or their expiry).
  void stall(std::size_t priority, std::int64_t t0, std::int64_t t1, std::uint64_t frame,
             const std::array<std::uint8_t, 6>* src, std::vector<PausedSpan> open);

  const std::array<PriorityStalls, kPriorities>& by_priority() const { return stalls_; }
  bool cap_reached() const { return last_.cap_reached(); }
  std::size_t peak() const { return last_.peak(); }
  void merge(const PauseStalls& o);

 private:
  struct QpHash {
    std::size_t operator()(std::uint64_t k) const { return static_cast<std::size_t>(k * 0x9E3779B97F4A7C15ULL >> 7); }
  };
  struct LastPacket {
    std::int64_t ts_ns = 0;
  };
  FlowSlots<std::uint64_t, QpHash, LastPacket> last_{kMaxQueuePairs};
  std::array<std::array<PausedSpan, kRecentPauses>, kPriorities> recent_{};
  std::array<std::size_t, kPriorities> recent_count_{}, recent_pos_{};
  std::array<PriorityStalls, kPriorities> stalls_{};
};

}  // namespace rdmadiag::decode
