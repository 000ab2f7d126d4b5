// A set of 64-bit keys for per-packet membership counts (the distinct queue
// pairs of CaptureSummary): open addressing with linear probing over one flat
// array of keys, at most half full, no deletion. A look-up is one multiply and,
// typically, one cache line; std::unordered_set costs a node and a pointer
// chase per look-up (18 % of the CPU time with 16K queue pairs, perf).
// Memory: 8 bytes per slot, at most 4 slots per key.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "decode/prefetch.h"

namespace rdmadiag::decode {

class KeySet {
 public:
  std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }

  // Adds `k`; true if it was new.
  bool insert(std::uint64_t k) {
    if (k == 0) {  // 0 marks an empty slot: kept aside
      const bool added = !has_zero_;
      has_zero_ = true;
      return added;
    }
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::uint64_t& s = slot_for(k);
    if (s == k) return false;
    s = k;
    ++size_;
    return true;
  }

  // Starts loading the line where a look-up of `k` begins (a key about to be inserted).
  void prefetch(std::uint64_t k) const {
    if (!slots_.empty()) prefetch_line(&slots_[home(k)]);
  }

  // Calls f(key) for every key (in no particular order).
  template <class F>
  void for_each(F f) const {
    if (has_zero_) f(std::uint64_t{0});
    for (std::uint64_t k : slots_)
      if (k) f(k);
  }

 private:
  // The slot holding `k`, or the empty one where it belongs.
  std::uint64_t& slot_for(std::uint64_t k) {
    std::size_t i = home(k);
    while (slots_[i] != 0 && slots_[i] != k) i = (i + 1) & mask_;
    return slots_[i];
  }

  std::size_t home(std::uint64_t k) const { return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ULL) >> 20) & mask_; }

  void grow() {
    const std::vector<std::uint64_t> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, 0);
    mask_ = slots_.size() - 1;
    for (std::uint64_t k : old)
      if (k) slot_for(k) = k;
  }

  std::vector<std::uint64_t> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  bool has_zero_ = false;
};

}  // namespace rdmadiag::decode
