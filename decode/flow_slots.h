// A bounded table of live per-flow states for the stateful analysis passes
// (IB/RoCE transport analysis, congestion, pause stalls, NVMe-oF, iWARP TCP
// connections): states live in slots that are reused, a key index finds a
// flow's slot in O(1) (flow_table.h), idle flows are retired, and past a cap
// of live flows the least recently active are retired to make room. The table counts what the
// sharded analysis must know (AnalyzerMerge::bounds_reached): the peak of live
// flows and whether the cap ever forced a retirement. What a retired flow
// leaves behind (a summary) is the owner's business: retirement calls back.
//
// Memory: one slot (key + pointer) and one index entry per live flow, and up to
// max_live/8 reset states kept for reuse; never anything per packet.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "decode/flow_table.h"

namespace rdmadiag::decode {

// Key: equality-comparable, default-constructible; Hash: Key -> std::size_t;
// State: any type (held by pointer, so references to it stay valid while live).
template <class Key, class Hash, class State>
class FlowSlots {
 public:
  static constexpr std::uint32_t kNone = FlowTable<Key, Hash>::kNone;

  explicit FlowSlots(std::size_t max_live) : max_live_(max_live) {}

  std::size_t size() const { return index_.size(); }
  std::size_t peak() const { return peak_; }
  // The cap on live flows forced the retirement of flows still in use.
  bool cap_reached() const { return cap_reached_; }

  std::uint32_t find(const Key& k) const { return index_.find(k); }
  std::uint32_t find(const Key& k, std::uint64_t hash) const { return index_.find(k, hash); }
  static std::uint64_t hash_of(const Key& k) { return FlowTable<Key, Hash>::hash_of(k); }

  // A State{} for a new flow: one a retired flow left (already reset), else a
  // new one. Where flows come and go this saves a heap allocation per flow.
  std::unique_ptr<State> acquire() {
    if (spare_.empty()) return std::make_unique<State>();
    std::unique_ptr<State> s = std::move(spare_.back());
    spare_.pop_back();
    return s;
  }
  State* at(std::uint32_t slot) { return slot < slots_.size() ? slots_[slot].state.get() : nullptr; }
  const State* at(std::uint32_t slot) const { return slot < slots_.size() ? slots_[slot].state.get() : nullptr; }

  // Adds a flow for `k` (not present). At the cap, first retires the least
  // recently active eighth (by `last_active(const State&)`), through `on_retire`.
  template <class LastActive, class OnRetire>
  std::uint32_t insert(const Key& k, std::unique_ptr<State> state, LastActive last_active, OnRetire on_retire) {
    if (index_.size() >= max_live_) {
      cap_reached_ = true;
      retire_least_recent(last_active, on_retire);
    }
    std::uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[slot] = Slot{k, std::move(state)};
    index_.insert(k, slot);
    peak_ = std::max(peak_, index_.size());
    return slot;
  }

  // Retires every live flow for which `idle(const State&)` holds, in slot order.
  // on_retire(slot, State&) runs before the slot is freed.
  template <class Idle, class OnRetire>
  void retire_if(Idle idle, OnRetire on_retire) {
    for (std::uint32_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].state && idle(*slots_[s].state)) retire(s, on_retire);
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
    for (std::uint32_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].state) f(s, *slots_[s].state);
  }

  void clear() {
    slots_.clear();
    spare_.clear();
    free_.clear();
    index_.clear();
  }

 private:
  struct Slot {
    Key key{};
    std::unique_ptr<State> state;
  };

  template <class OnRetire>
  void retire(std::uint32_t s, OnRetire& on_retire) {
    on_retire(s, *slots_[s].state);
    index_.erase(slots_[s].key);
    if constexpr (std::is_move_assignable_v<State> && std::is_default_constructible_v<State>) {
      if (spare_.size() < max_live_ / 8 + 1) {
        *slots_[s].state = State{};  // frees what it held now, not when reused
        spare_.push_back(std::move(slots_[s].state));
      }
    }
    slots_[s].state.reset();
    free_.push_back(s);
  }

  template <class LastActive, class OnRetire>
  void retire_least_recent(LastActive& last_active, OnRetire& on_retire) {
    std::vector<std::pair<double, std::uint32_t>> by_age;
    for (std::uint32_t s = 0; s < slots_.size(); ++s)
      if (slots_[s].state) by_age.emplace_back(last_active(*slots_[s].state), s);
    if (by_age.empty()) return;
    const std::size_t n = std::max<std::size_t>(by_age.size() / 8, 1);
    std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(n - 1), by_age.end());
    for (std::size_t i = 0; i < n; ++i) retire(by_age[i].second, on_retire);
  }

  std::size_t max_live_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::vector<std::unique_ptr<State>> spare_;  // reset states of retired flows (at most an eighth of max_live)
  FlowTable<Key, Hash> index_;
  std::size_t peak_ = 0;
  bool cap_reached_ = false;
};

}  // namespace rdmadiag::decode
