#include "decode/copy_detector.h"

#include <algorithm>
#include <cstring>

namespace rdmadiag::decode {
namespace {

std::uint64_t load(const std::uint8_t* p, std::size_t n) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}

// The frame's length, its first 64 bytes and its last 8. Products by distinct
// odd constants, summed: independent multiplies, no chain through each word.
std::uint64_t frame_hash(Bytes f) {
  static constexpr std::uint64_t k[9] = {0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL, 0x165667b19e3779f9ULL,
                                         0xd6e8feb86659fd93ULL, 0xff51afd7ed558ccdULL, 0xc4ceb9fe1a85ec53ULL,
                                         0x94d049bb133111ebULL, 0xbf58476d1ce4e5b9ULL, 0x2545f4914f6cdd1dULL};
  const std::size_t n = f.size();
  std::uint64_t h = n * k[8];
  if (n >= 72) {
    for (std::size_t i = 0; i < 8; ++i) h += load(f.data() + 8 * i, 8) * k[i];
    h += load(f.data() + n - 8, 8) * k[0] >> 1;
  } else {
    for (std::size_t i = 0; 8 * i < n && i < 9; ++i) h += load(f.data() + 8 * i, std::min<std::size_t>(8, n - 8 * i)) * k[i];
  }
  h ^= h >> 29;
  return (h * k[4]) | 1;  // never 0: an empty slot
}

}  // namespace

void CopyDetector::examine(Bytes frame, std::int64_t ts_ns) {
  if (seen_ % kBlock == 1) recent_ = {};  // a new block: the frames before it are not recent
  ++frames_;
  const std::uint64_t h = frame_hash(frame);
  for (Seen& s : recent_) {
    if (s.hash == h && (ts_ns > s.ts_ns ? ts_ns - s.ts_ns : s.ts_ns - ts_ns) <= kWindowNs) {
      ++copies_;
      s.hash = 0;  // a third copy is a copy of this one, counted once more
      break;
    }
  }
  recent_[next_] = Seen{h, ts_ns};
  next_ = (next_ + 1) % kRecent;
}

}  // namespace rdmadiag::decode
