// Counts over a whole capture: packets and bytes per transport and per opcode,
// CRC verdicts, diagnostics by kind with the first frames of each, the queue
// pairs seen. A pass over decode results; memory is bounded by the number of
// distinct queue pairs (capped), never by the number of packets.
#pragma once
#include <array>
#include <bitset>
#include <cstdint>
#include <vector>

#include "decode/key_set.h"

#include "decode/packet.h"

namespace rdmadiag::decode {

struct Counter {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;  // wire bytes
  void add(std::uint64_t b) { ++packets; bytes += b; }
};

struct CrcCounts {
  std::uint64_t ok = 0, bad = 0, unverifiable = 0;
  void add(CrcStatus s) {
    if (s == CrcStatus::ok) ++ok;
    else if (s == CrcStatus::bad) ++bad;
    else if (s == CrcStatus::unverifiable) ++unverifiable;
  }
  void merge(const CrcCounts& o) {
    ok += o.ok;
    bad += o.bad;
    unverifiable += o.unverifiable;
  }
};

struct DiagSummary {
  static constexpr std::size_t kFirstFrames = 5;
  std::uint64_t count = 0;
  Severity severity = Severity::note;
  std::array<std::uint64_t, kFirstFrames> first_frames{};
  std::size_t first_count = 0;
  // Adds another part's count; keeps the earliest kFirstFrames frames of both.
  void merge(const DiagSummary& o);
};

class CaptureSummary {
 public:
  static constexpr std::size_t kMaxTrackedQps = 1 << 20;

  // `frame` is 1-based across all input files; `ts` in seconds. `qp_counted`:
  // the caller knows an earlier packet had the same queue_pair_key(), so the
  // set of QPs is not probed (with many QPs, a cache miss per packet).
  void add(const DecodedPacket& p, std::uint64_t frame, double ts, bool qp_counted = false);
  // Adds the summary of another part of the same input (a shard of `analyze -j`,
  // which saw other frames): the result is what one summary fed both would hold.
  void merge(const CaptureSummary& o);

  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  std::uint64_t truncated_packets = 0;
  double first_ts = 0, last_ts = 0;          // of the first and the last packet read
  double earliest_ts = 0, latest_ts = 0;     // the extremes: a merged or stepped clock can go back
  std::array<Counter, 5> by_transport{};  // indexed by Transport
  std::array<Counter, 256> by_opcode{};   // RDMA packets with a BTH
  CrcCounts icrc, vcrc;
  std::array<DiagSummary, static_cast<std::size_t>(DiagCode::count_)> diags{};
  std::uint64_t cm_messages = 0;
  std::uint64_t mads = 0;
  std::uint64_t first_frame = 0, last_frame = 0;  // the frames first_ts and last_ts come from

  // From the earliest to the latest time stamp, as capinfos: never negative,
  // however the clock stepped or interfaces interleaved.
  double duration_s() const { return packets ? latest_ts - earliest_ts : 0.0; }
  // A frame read ahead whose flow is not made yet: its queue pair is likely new,
  // and the line of the distinct-QP set add() will write is loaded now.
  void prefetch_queue_pair(const DecodedPacket& p) const;
  std::size_t queue_pairs() const { return qps_.size(); }
  bool queue_pairs_capped() const { return qps_capped_; }
  // The interfaces (ifindex) LINUX_SLL2 records named as their capture points
  // (DecodedPacket::capture_point), ascending.
  std::vector<std::uint32_t> sll2_interfaces() const;

 private:
  KeySet qps_;
  std::bitset<kMaxSll2Point> sll2_points_;  // ifindex i: bit i
  bool qps_capped_ = false;
};

// A stable key for (destination address, destination QP): the QP identity on the wire.
std::uint64_t queue_pair_key(const DecodedPacket& p);
// Whether queue_pair_key(p) follows from the ends endpoints_of(p) names (it
// takes a GRH's DGID before the LRH's DLID, endpoints_of the other way round).
inline bool queue_pair_follows_ends(const DecodedPacket& p) { return p.ipv4 || p.ipv6 || !(p.lrh && p.grh); }

}  // namespace rdmadiag::decode
