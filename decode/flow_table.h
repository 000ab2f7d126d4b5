// The index from a flow's key to its slot, for the per-packet flow lookup:
// open addressing with linear probing over one flat array of (hash, key, slot)
// entries, at most half full, with backward-shift deletion (no tombstones).
// A lookup is one hash and, typically, one cache line; std::unordered_map costs
// a bucket array, a node and a pointer chase per lookup.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "decode/prefetch.h"

namespace rdmadiag::decode {

namespace detail {

// Linear probing over one flat array of entries, each with a `hash` and a
// `value` (kNone: the entry is empty), at most half full, with backward-shift
// deletion (no tombstones). The two indexes below differ only in what an
// entry holds besides.
template <class Entry>
class ProbeTable {
 public:
  static constexpr std::uint32_t kNone = UINT32_MAX;
  std::size_t size() const { return size_; }
  void clear() {
    for (Entry& e : entries_) e.value = kNone;
    size_ = 0;
  }

 protected:
  explicit ProbeTable(std::size_t expected) { rehash(capacity_for(expected)); }

  // The position of the entry with hash `h` for which `match(entry)` holds, or SIZE_MAX.
  template <class Match>
  std::size_t position(std::uint64_t h, Match match) const {
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.value == kNone) return SIZE_MAX;
      if (e.hash == static_cast<decltype(e.hash)>(h) && match(e)) return i;
    }
  }
  // Starts loading the line where a look-up of hash `h` begins.
  void prefetch(std::uint64_t h) const { prefetch_line(&entries_[h & mask_]); }
  // Calls fn(entry) for each entry of the probe run of `h` whose hash matches,
  // without checking keys (a caller prefetching what a look-up will read).
  template <class Fn>
  void each_candidate(std::uint64_t h, Fn fn) const {
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.value == kNone) return;
      if (e.hash == static_cast<decltype(e.hash)>(h)) fn(e);
    }
  }
  void add(const Entry& e) {
    if ((size_ + 1) * 2 > entries_.size()) rehash(entries_.size() * 2);
    place(e);
    ++size_;
  }
  void remove_at(std::size_t i) {
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

  std::vector<Entry> entries_;

 private:
  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
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

  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

template <class Key>
struct KeyedEntry {
  std::uint64_t hash = 0;
  Key key{};
  std::uint32_t value = UINT32_MAX;
};

// The hash's low 32 bits are enough: they place the entry (tables stay far
// below 2^32 entries) and filter candidates, and the key in the slot's cell
// decides. 8 bytes: the index of 16K flows fits a core's L2 cache.
struct SlotEntry {
  std::uint32_t hash = 0;
  std::uint32_t value = UINT32_MAX;  // the slot
};
static_assert(sizeof(SlotEntry) == 8);

}  // namespace detail

// Key: equality-comparable; Hash: returns std::size_t.
template <class Key, class Hash>
class FlowTable : public detail::ProbeTable<detail::KeyedEntry<Key>> {
  using Base = detail::ProbeTable<detail::KeyedEntry<Key>>;
  using Entry = detail::KeyedEntry<Key>;

 public:
  using Base::kNone;
  explicit FlowTable(std::size_t expected = 256) : Base(expected) {}

  [[gnu::always_inline]] static std::uint64_t hash_of(const Key& k) { return static_cast<std::uint64_t>(Hash{}(k)); }

  // Starts loading the line where a look-up of `k` begins.
  void prefetch(const Key& k) const { Base::prefetch(hash_of(k)); }
  // The slot stored for `k`, or kNone.
  std::uint32_t find(const Key& k) const { return find(k, hash_of(k)); }
  // The same with `h` = hash_of(k), computed once for several tables of one key.
  std::uint32_t find(const Key& k, std::uint64_t h) const {
    const std::size_t i = this->position(h, [&](const Entry& e) { return e.key == k; });
    return i == SIZE_MAX ? kNone : this->entries_[i].value;
  }
  // Sets the slot stored for `k` (present).
  void assign(const Key& k, std::uint32_t value) {
    const std::size_t i = this->position(hash_of(k), [&](const Entry& e) { return e.key == k; });
    if (i != SIZE_MAX) this->entries_[i].value = value;
  }
  // Adds `k` (not present) -> `value`.
  void insert(const Key& k, std::uint32_t value) { this->add(Entry{hash_of(k), k, value}); }
  void erase(const Key& k) {
    const std::size_t i = this->position(hash_of(k), [&](const Entry& e) { return e.key == k; });
    if (i != SIZE_MAX) this->remove_at(i);
  }
};

// The index of FlowSlots: hash -> slot, in 8-byte entries (eight to a cache
// line, never across two). The key is not kept here: a candidate is checked
// against the key in its slot's cell, the line a packet reads next anyway.
// With many flows the index is a quarter of FlowTable's size (FlowKey: 56-byte
// entries), and a look-up reads one line of it instead of one or two.
class SlotIndex : public detail::ProbeTable<detail::SlotEntry> {
  using Base = detail::ProbeTable<detail::SlotEntry>;

 public:
  explicit SlotIndex(std::size_t expected = 256) : Base(expected) {}

  // The slot with hash `h` for which `same(slot)` holds, or kNone.
  template <class Same>
  std::uint32_t find(std::uint64_t h, Same same) const {
    const std::size_t i = position(h, [&](const detail::SlotEntry& e) { return same(e.value); });
    return i == SIZE_MAX ? kNone : entries_[i].value;
  }
  using Base::prefetch;
  // Calls fn(slot) for each slot whose entry has hash `h` (keys unchecked).
  template <class Fn>
  void each_candidate(std::uint64_t h, Fn fn) const {
    Base::each_candidate(h, [&](const detail::SlotEntry& e) { fn(e.value); });
  }
  // Adds `slot` (not present) under hash `h`.
  void insert(std::uint64_t h, std::uint32_t slot) { add(detail::SlotEntry{static_cast<std::uint32_t>(h), slot}); }
  // Removes `slot`, stored under hash `h` (if present).
  void erase(std::uint64_t h, std::uint32_t slot) {
    const std::size_t i = position(h, [&](const detail::SlotEntry& e) { return e.value == slot; });
    if (i != SIZE_MAX) remove_at(i);
  }
};

}  // namespace rdmadiag::decode
