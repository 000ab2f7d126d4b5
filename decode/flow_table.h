// The index from a flow's key to its slot, for the per-packet flow lookup:
// open addressing with linear probing over one flat array of (hash, key, slot)
// entries, at most half full, with backward-shift deletion (no tombstones).
// A lookup is one hash and, typically, one cache line; std::unordered_map costs
// a bucket array, a node and a pointer chase per lookup.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdmadiag::decode {

// Key: equality-comparable; Hash: returns std::size_t.
template <class Key, class Hash>
class FlowTable {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;

  explicit FlowTable(std::size_t expected = 256) { rehash(capacity_for(expected)); }

  std::size_t size() const { return size_; }

  // The slot stored for `k`, or kNone.
  std::uint32_t find(const Key& k) const { return find(k, hash_of(k)); }
  // The same with `h` = hash_of(k), computed once for several tables of one key.
  std::uint32_t find(const Key& k, std::uint64_t h) const {
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.value == kNone) return kNone;
      if (e.hash == h && e.key == k) return e.value;
    }
  }

  // Sets the slot stored for `k` (present).
  void assign(const Key& k, std::uint32_t value) {
    const std::uint64_t h = hash_of(k);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      Entry& e = entries_[i];
      if (e.value == kNone) return;
      if (e.hash == h && e.key == k) {
        e.value = value;
        return;
      }
    }
  }

  // Adds `k` (not present) -> `value`.
  void insert(const Key& k, std::uint32_t value) {
    if ((size_ + 1) * 2 > entries_.size()) rehash(entries_.size() * 2);
    place(Entry{hash_of(k), k, value});
    ++size_;
  }

  void erase(const Key& k) {
    const std::uint64_t h = hash_of(k);
    std::size_t i = h & mask_;
    for (;; i = (i + 1) & mask_) {
      if (entries_[i].value == kNone) return;
      if (entries_[i].hash == h && entries_[i].key == k) break;
    }
    // Backward shift: move later entries of the probe run into the hole when that keeps them reachable.
    for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      Entry& e = entries_[j];
      if (e.value == kNone) break;
      const std::size_t home = e.hash & mask_;
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        entries_[i] = e;
        i = j;
      }
    }
    entries_[i].value = kNone;
    --size_;
  }

  void clear() {
    for (Entry& e : entries_) e.value = kNone;
    size_ = 0;
  }

 private:
  struct Entry {
    std::uint64_t hash = 0;
    Key key{};
    std::uint32_t value = kNone;
  };

  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
 public:
  static std::uint64_t hash_of(const Key& k) { return static_cast<std::uint64_t>(Hash{}(k)); }

 private:

  void place(const Entry& e) {
    std::size_t i = e.hash & mask_;
    while (entries_[i].value != kNone) i = (i + 1) & mask_;
    entries_[i] = e;
  }

  void rehash(std::size_t cap) {
    std::vector<Entry> old;
    old.swap(entries_);
    entries_.assign(cap, Entry{});
    mask_ = cap - 1;
    for (const Entry& e : old)
      if (e.value != kNone) place(e);
  }

  std::vector<Entry> entries_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace rdmadiag::decode
