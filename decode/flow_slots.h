// A bounded table of live per-flow states for the stateful analysis passes
// (IB/RoCE transport analysis, congestion, pause stalls, NVMe-oF, iWARP TCP
// connections): states live in slots that are reused, a key index finds a
// flow's slot in O(1) (flow_table.h), idle flows are retired, and past a cap
// of live flows the least recently active are retired to make room. The table counts what the
// sharded analysis must know (AnalyzerMerge::bounds_reached): the peak of live
// flows and whether the cap ever forced a retirement. What a retired flow
// leaves behind (a summary) is the owner's business: retirement calls back.
//
// The states are built in place in chunks of slots that never move (so
// references stay valid while a flow is live) and whose address follows from
// the slot number: a packet goes from the index entry straight to its state,
// one trip to memory fewer than through a pointer per slot when there are more
// flows than the caches hold, and no heap allocation per flow.
//
// Memory: one cell (state + key) per slot up to the peak of live flows, in
// chunks of ~64 KiB, and one index entry per live flow; never anything per packet.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "decode/flow_table.h"
#include "decode/prefetch.h"

namespace rdmadiag::decode {

// Key: equality-comparable, default-constructible; Hash: Key -> std::size_t;
// State: any destructible type, built in place by emplace().
template <class Key, class Hash, class State>
class FlowSlots {
 public:
  static constexpr std::uint32_t kNone = SlotIndex::kNone;

  explicit FlowSlots(std::size_t max_live) : max_live_(max_live) {}
  FlowSlots(const FlowSlots&) = delete;
  FlowSlots& operator=(const FlowSlots&) = delete;
  ~FlowSlots() { clear(); }

  std::size_t size() const { return index_.size(); }
  // The bytes of the cells handed out (the states a look-up may have to load).
  std::size_t cell_bytes() const { return std::size_t{used_} * sizeof(Cell); }
  std::size_t peak() const { return peak_; }
  // The cap on live flows forced the retirement of flows still in use.
  bool cap_reached() const { return cap_reached_; }

  std::uint32_t find(const Key& k) const { return find(k, hash_of(k)); }
  // The key of the live flow in `slot` (which must be live: at() is not nullptr).
  const Key& key_of(std::uint32_t slot) const { return cell(slot)->key; }
  // `slot` holds the live flow of `k`: checks a slot remembered elsewhere (a
  // hint that may have gone stale) with one look at its cell, no index probe.
  bool holds(std::uint32_t slot, const Key& k) const {
    const Cell* c = cell(slot);
    return c && c->live && c->key == k;
  }
  std::uint32_t find(const Key& k, std::uint64_t hash) const {
    return index_.find(hash, [&](std::uint32_t slot) { return cell(slot)->key == k; });
  }
  [[gnu::always_inline]] static std::uint64_t hash_of(const Key& k) { return FlowTable<Key, Hash>::hash_of(k); }

  // Starts loading the cell of `slot` (if handed out) into the cache: for a
  // caller that knows the slot a while before it reads the state.
  void prefetch(std::uint32_t slot) const {
    if (slot >= used_) return;
    const auto* c = reinterpret_cast<const char*>(&chunks_[slot >> kChunkShift][slot & kChunkMask]);
    for (std::size_t off = 0; off < sizeof(Cell); off += 64) prefetch_line(c + off);
  }

  // Batched look-ups (a frame read ahead of its analysis, cli/): the first
  // step starts loading the index line of `hash`, the second, once that line
  // is in, the cells of the slots that may hold the key. The look-up itself
  // (find) then reads only lines already on their way.
  void prefetch_index(std::uint64_t hash) const { index_.prefetch(hash); }
  void prefetch_candidates(std::uint64_t hash) const {
    index_.each_candidate(hash, [&](std::uint32_t slot) { prefetch(slot); });
  }

  // The live state in `slot`, else nullptr.
  State* at(std::uint32_t slot) {
    Cell* c = cell(slot);
    return c && c->live ? &c->state : nullptr;
  }
  const State* at(std::uint32_t slot) const {
    const Cell* c = cell(slot);
    return c && c->live ? &c->state : nullptr;
  }

  // Adds a flow for `k` (not present) with a State built from `args`, and
  // returns its slot. At the cap, first retires the least recently active
  // eighth (by `last_active(const State&)`), through `on_retire(slot, State&)`.
  template <class LastActive, class OnRetire, class... Args>
  std::uint32_t emplace(const Key& k, LastActive last_active, OnRetire on_retire, Args&&... args) {
    return emplace_hashed(k, hash_of(k), last_active, on_retire, std::forward<Args>(args)...);
  }
  // The same with `hash` = hash_of(k), which the failed find() before it had.
  template <class LastActive, class OnRetire, class... Args>
  std::uint32_t emplace_hashed(const Key& k, std::uint64_t hash, LastActive last_active, OnRetire on_retire,
                               Args&&... args) {
    if (index_.size() >= max_live_) {
      cap_reached_ = true;
      retire_least_recent(last_active, on_retire);
    }
    std::uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = used_++;
      if ((slot & kChunkMask) == 0) chunks_.push_back(std::make_unique<Cell[]>(kChunkCells));
    }
    // The flow made after this one takes the slot retired last: its cell starts
    // loading now, a packet or more before it is written (a capture with more
    // flows than the cap makes one every other packet, each a miss without this).
    if (!free_.empty()) prefetch(free_.back());
    Cell& c = *cell(slot);
    std::construct_at(&c.state, std::forward<Args>(args)...);
    c.key = k;
    c.live = true;
    index_.insert(hash, slot);
    peak_ = std::max(peak_, index_.size());
    return slot;
  }

  // Retires every live flow for which `idle(const State&)` holds, in slot order.
  // on_retire(slot, State&) runs before the slot is freed.
  template <class Idle, class OnRetire>
  void retire_if(Idle idle, OnRetire on_retire) {
    for (std::uint32_t s = 0; s < used_; ++s)
      if (State* st = at(s); st && idle(*st)) retire(s, on_retire);
  }

  // Retires one live flow (one that ended on its own, e.g. a closed TCP
  // connection); on_retire(slot, State&) runs before the slot is freed.
  template <class OnRetire>
  void erase(std::uint32_t slot, OnRetire on_retire) {
    if (at(slot)) retire(slot, on_retire);
  }

  // Calls f(slot, State&) for every live flow, in slot order.
  template <class F>
  void for_each(F f) {
    for (std::uint32_t s = 0; s < used_; ++s)
      if (State* st = at(s)) f(s, *st);
  }

  void clear() {
    for (std::uint32_t s = 0; s < used_; ++s) destroy(s);
    chunks_.clear();
    free_.clear();
    used_ = 0;
    index_.clear();
  }

 private:
  // A slot: the state (built and destroyed by hand, the union keeps it
  // unconstructed while the slot is free) and its key, for the index.
  // The key and the live flag first: the index has no keys, so a look-up
  // compares the one in the cell, and the state's first bytes share its line.
  struct CellBody {
    CellBody() {}
    ~CellBody() {}
    Key key{};
    bool live = false;
    union {
      State state;
    };
  };
  // Cells start on a cache line when that costs at most an eighth more
  // memory: the key and a state's first fields, which every packet reads,
  // then never straddle one line more than they need (a 376-byte transport
  // cell at any 8-byte offset spanned 4 lines for its first 168 bytes half
  // of the time; at 384 bytes on a line, 3).
  static constexpr std::size_t kLine = 64;
  static constexpr std::size_t kLinePadding = (kLine - sizeof(CellBody) % kLine) % kLine;
  struct alignas(kLinePadding * 8 <= sizeof(CellBody) ? kLine : alignof(CellBody)) Cell : CellBody {
    Cell() {}  // user-provided: a new chunk is not zeroed whole first (only keys and live flags are written)
  };
  static constexpr std::size_t kChunkCells = std::max<std::size_t>(16, std::bit_floor(65536 / sizeof(Cell)));
  static constexpr std::uint32_t kChunkShift = std::countr_zero(kChunkCells);
  static constexpr std::uint32_t kChunkMask = kChunkCells - 1;

  Cell* cell(std::uint32_t slot) {
    return slot < used_ ? &chunks_[slot >> kChunkShift][slot & kChunkMask] : nullptr;
  }
  const Cell* cell(std::uint32_t slot) const {
    return slot < used_ ? &chunks_[slot >> kChunkShift][slot & kChunkMask] : nullptr;
  }

  void destroy(std::uint32_t s) {
    Cell& c = *cell(s);
    if (!c.live) return;
    std::destroy_at(&c.state);
    c.live = false;
  }

  template <class OnRetire>
  void retire(std::uint32_t s, OnRetire& on_retire) {
    Cell& c = *cell(s);
    on_retire(s, c.state);
    index_.erase(hash_of(c.key), s);
    destroy(s);
    free_.push_back(s);
  }

  template <class LastActive, class OnRetire>
  void retire_least_recent(LastActive& last_active, OnRetire& on_retire) {
    std::vector<std::pair<double, std::uint32_t>> by_age;
    for (std::uint32_t s = 0; s < used_; ++s)
      if (const State* st = at(s)) by_age.emplace_back(last_active(*st), s);
    if (by_age.empty()) return;
    const std::size_t n = std::max<std::size_t>(by_age.size() / 8, 1);
    std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(n - 1), by_age.end());
    // Thousands of flows in no order of memory: each one's cell, then its index
    // line (found from the key in the cell), is loaded a few flows ahead of its turn.
    constexpr std::size_t kCellAhead = 8, kIndexAhead = 4;
    for (std::size_t i = 0; i < std::min(n, kCellAhead); ++i) prefetch(by_age[i].second);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kCellAhead < n) prefetch(by_age[i + kCellAhead].second);
      if (i + kIndexAhead < n) index_.prefetch(hash_of(cell(by_age[i + kIndexAhead].second)->key));
      retire(by_age[i].second, on_retire);
    }
  }

  std::size_t max_live_;
  std::vector<std::unique_ptr<Cell[]>> chunks_;  // kChunkCells cells each; cells never move
  std::uint32_t used_ = 0;                       // slots ever handed out (the high-water mark)
  std::vector<std::uint32_t> free_;              // retired slots, reused first
  SlotIndex index_;
  std::size_t peak_ = 0;
  bool cap_reached_ = false;
};

}  // namespace rdmadiag::decode
