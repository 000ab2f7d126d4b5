// Which of the most recent PSNs of one PSN space the capture holds (IBA Vol 1
// §9.7.1: 24-bit PSNs, compared modulo 2^24). The window is the kBits PSNs
// before `front` (one past the highest PSN used); PSNs at or beyond `front`
// are new, older ones than the window are unknown. Moving the front forward
// forgets what the new PSNs' bits held before (their last use, 2^24 PSNs
// ago): a bit always describes the PSN's current use.
//
// It is what makes "a PSN is never reported lost if the capture holds it"
// hold by construction: every loss report asks it first.
// Memory: 48 bytes per PSN space tracked, the bits of the last kSmallBits PSNs
// inline; the first time more than kSmallBits PSNs before the front are
// meaningful, the bits move to kBits / 8 = 256 bytes allocated then (kept
// from then on). A many-QP capture holds many flows of a few dozen PSNs each:
// the inline bits were 2 x 256 bytes of every requester's state, most of it
// never read, but written into fresh pages all the same.
// Only the bits of the `valid_` PSNs before the front are meaningful (the
// others read as not seen): a reset writes no bit, and a bit's line is first
// written when the front passes its PSN.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>

#include "decode/ib_transport.h"

namespace rdmadiag::decode {

class PsnWindow {
 public:
  static constexpr std::uint32_t kBits = 2048;
  static constexpr std::uint32_t kSmallBits = 256;  // followed inline, before the bits are allocated

  // Empty, its front at 0. The bits are left unwritten: none is valid yet.
  PsnWindow() {}

  // Starts empty with `front` as the next new PSN.
  void reset(std::uint32_t front) {
    valid_ = 0;
    front_ = front & kPsnMask;
  }
  std::uint32_t front() const { return front_; }

  // Whether `psn` is inside the window (before the front, not older than kBits).
  bool covers(std::uint32_t psn) const {
    const std::int32_t d = psn_diff(psn, front_);
    return d < 0 && d >= -static_cast<std::int32_t>(kBits);
  }
  // The capture holds `psn` (in the window and seen); false when unknown.
  bool holds(std::uint32_t psn) const {
    const std::int32_t d = psn_diff(psn, front_);
    return d < 0 && d >= -static_cast<std::int32_t>(valid_) && (words()[word(psn)] >> bit(psn) & 1u);
  }

  // Moves the front to `to` (if ahead), clearing the bits of the PSNs it passes.
  void advance(std::uint32_t to) {
    std::int32_t n = psn_diff(to, front_);
    if (n <= 0) return;
    if (n >= static_cast<std::int32_t>(kBits)) {
      valid_ = 0;  // every bit describes an older use: none holds
    } else {
      make_room(valid_ + static_cast<std::uint32_t>(n));
      for (std::uint32_t p = front_; p != (to & kPsnMask); p = (p + 1) & kPsnMask) clear(p);
      valid_ = std::min<std::uint32_t>(kBits, valid_ + static_cast<std::uint32_t>(n));
    }
    front_ = to & kPsnMask;
  }
  // Marks `psn` seen (advancing the front past it if needed). Returns whether it was new.
  bool mark(std::uint32_t psn) {
    psn &= kPsnMask;
    if (psn == front_) {  // the next new PSN, as in-order traffic has it: what advance() would do, in short
      make_room(valid_ + 1);
      words()[word(psn)] |= std::uint64_t{1} << bit(psn);
      front_ = (psn + 1) & kPsnMask;
      if (valid_ < kBits) ++valid_;
      return true;
    }
    if (psn_diff(psn, front_) >= 0) advance((psn + 1) & kPsnMask);
    if (!covers(psn)) return false;
    extend_to(psn);
    std::uint64_t& w = words()[word(psn)];
    const std::uint64_t m = std::uint64_t{1} << bit(psn);
    const bool fresh = !(w & m);
    w |= m;
    return fresh;
  }
  // Unmarks `psn` (if inside the window).
  void forget(std::uint32_t psn) {
    if (holds(psn)) clear(psn & kPsnMask);
  }
  // How many of the `count` PSNs from `first` the capture does not hold.
  std::uint32_t not_held(std::uint32_t first, std::uint32_t count) const {
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < count; ++i)
      if (!holds((first + i) & kPsnMask)) ++n;
    return n;
  }

 private:
  std::uint64_t* words() { return big_ ? big_.get() : small_.data(); }
  const std::uint64_t* words() const { return big_ ? big_.get() : small_.data(); }
  std::uint32_t word(std::uint32_t psn) const { return (psn / 64) % ((big_ ? kBits : kSmallBits) / 64); }
  static std::uint32_t bit(std::uint32_t psn) { return psn % 64; }
  void clear(std::uint32_t psn) { words()[word(psn)] &= ~(std::uint64_t{1} << bit(psn)); }
  // Before `valid` PSNs become meaningful: past kSmallBits, the bits move to
  // their places in the full window (a PSN keeps its bit within its 64-PSN
  // word; the at most five words the valid PSNs touch are copied whole, their
  // other bits being unwritten ones either way).
  void make_room(std::uint32_t valid) {
    if (valid <= kSmallBits || big_) return;
    big_ = std::make_unique_for_overwrite<std::uint64_t[]>(kBits / 64);
    const std::uint32_t lo = (front_ - valid_) & kPsnMask;
    const std::uint32_t blocks = valid_ ? ((lo % 64) + valid_ + 63) / 64 : 0;
    for (std::uint32_t k = 0, b = lo / 64; k < blocks; ++k, b = (b + 1) & (kPsnMask / 64))
      big_[b % (kBits / 64)] = small_[b % (kSmallBits / 64)];
  }
  // Makes the bits from covered `psn` up to the valid ones valid (not seen):
  // a late PSN older than any the window followed since its reset.
  void extend_to(std::uint32_t psn) {
    const std::uint32_t back = static_cast<std::uint32_t>(-psn_diff(psn, front_));
    if (back <= valid_) return;
    make_room(back);
    for (std::uint32_t p = psn; p != ((front_ - valid_) & kPsnMask); p = (p + 1) & kPsnMask) clear(p);
    valid_ = back;
  }

  std::array<std::uint64_t, kSmallBits / 64> small_;  // unwritten until valid (see above)
  std::unique_ptr<std::uint64_t[]> big_;                // all kBits, once more than kSmallBits were valid
  std::uint32_t front_ = 0;
  std::uint32_t valid_ = 0;  // PSNs before the front whose bits are meaningful (<= kBits)
};

}  // namespace rdmadiag::decode
