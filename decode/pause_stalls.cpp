#include "decode/pause_stalls.h"

#include <algorithm>
#include <vector>

namespace rdmadiag::decode {

void PriorityStalls::merge(const PriorityStalls& o) {
  stalls += o.stalls;
  stalled_seconds += o.stalled_seconds;
  // The longest, the earlier frame on a tie: what one analyzer would keep whatever the shard order.
  if (o.longest_seconds > longest_seconds || (o.longest_seconds == longest_seconds && o.longest_frame &&
                                              (!longest_frame || o.longest_frame < longest_frame))) {
    longest_seconds = o.longest_seconds;
    longest_frame = o.longest_frame;
  }
}

std::int64_t covered_ns(const PausedSpan* spans, std::size_t n, std::int64_t t0, std::int64_t t1,
                        const std::array<std::uint8_t, 6>* except) {
  std::vector<std::pair<std::int64_t, std::int64_t>> parts;
  for (std::size_t i = 0; i < n; ++i) {
    if (except && spans[i].mac == *except) continue;  // a sender's own pause does not stop its packets
    const std::int64_t a = std::max(t0, spans[i].start_ns), b = std::min(t1, spans[i].end_ns);
    if (a < b) parts.emplace_back(a, b);
  }
  std::sort(parts.begin(), parts.end());
  std::int64_t covered = 0, reach = t0;
  for (const auto& [a, b] : parts) {
    if (b <= reach) continue;
    covered += b - std::max(a, reach);
    reach = b;
  }
  return covered;
}

void PauseStalls::pause_ended(std::size_t n, const PausedSpan& s) {
  recent_[n][recent_pos_[n]] = s;
  recent_pos_[n] = (recent_pos_[n] + 1) % kRecentPauses;
  recent_count_[n] = std::min(recent_count_[n] + 1, kRecentPauses);
}

void PauseStalls::stall(std::size_t n, std::int64_t t0, std::int64_t t1, std::uint64_t frame,
                        const std::array<std::uint8_t, 6>* src, std::vector<PausedSpan> spans) {
  spans.insert(spans.end(), recent_[n].begin(), recent_[n].begin() + static_cast<std::ptrdiff_t>(recent_count_[n]));
  const std::int64_t covered = covered_ns(spans.data(), spans.size(), t0, t1, src);
  if (static_cast<double>(covered) < kMinCover * static_cast<double>(t1 - t0)) return;
  PriorityStalls& s = stalls_[n];
  const double length = static_cast<double>(t1 - t0) * 1e-9;
  ++s.stalls;
  s.stalled_seconds += length;
  if (length > s.longest_seconds) {
    s.longest_seconds = length;
    s.longest_frame = frame;
  }
}

std::int64_t PauseStalls::long_gap_start(std::uint64_t qp, std::int64_t ts_ns) {
  const std::uint32_t slot = last_.find(qp);
  if (slot == decltype(last_)::kNone) {
    last_.emplace(
        qp, [](const LastPacket& l) { return static_cast<double>(l.ts_ns); }, [](std::uint32_t, LastPacket&) {},
        LastPacket{ts_ns});
    return -1;
  }
  LastPacket& last = *last_.at(slot);
  const std::int64_t prev = last.ts_ns;
  last.ts_ns = ts_ns;
  return ts_ns - prev >= kMinStallNs ? prev : -1;
}

void PauseStalls::merge(const PauseStalls& o) {
  for (std::size_t n = 0; n < kPriorities; ++n) stalls_[n].merge(o.stalls_[n]);
}

}  // namespace rdmadiag::decode
