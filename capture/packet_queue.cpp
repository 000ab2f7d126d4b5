#include "capture/packet_queue.h"

#include <bit>
#include <cstring>

namespace rdmadiag::capture {

PacketQueue::PacketQueue(std::size_t slots, std::size_t arena_bytes)
    : slots_(std::bit_ceil(std::max<std::size_t>(slots, 2))),
      mask_(slots_.size() - 1),
      arena_(std::make_unique<std::uint8_t[]>(arena_bytes)),  // zeroed now: no page faults mid-capture
      arena_size_(arena_bytes) {}

bool PacketQueue::push(const Record& rec, std::uint32_t source) {
  const std::uint64_t head = head_.load(std::memory_order_relaxed);
  const std::uint64_t tail = tail_.load(std::memory_order_acquire);
  if (head - tail > mask_) return false;  // every slot in use
  const std::size_t len = rec.data.size();
  // The bytes in use run from the oldest queued packet's offset up to
  // write_pos_, possibly wrapping round the end of the arena. A packet's bytes
  // are kept contiguous; write_pos_ never catches up with the oldest offset
  // from behind, so "equal" always means "empty".
  std::size_t at = 0;
  if (head == tail) {
    if (len > arena_size_) return false;
    at = len <= arena_size_ - write_pos_ ? write_pos_ : 0;
  } else {
    const std::size_t oldest = slots_[tail & mask_].offset;
    if (write_pos_ >= oldest) {
      if (len <= arena_size_ - write_pos_) at = write_pos_;
      else if (len < oldest) at = 0;
      else return false;
    } else {
      if (write_pos_ + len < oldest) at = write_pos_;
      else return false;
    }
  }
  if (len) std::memcpy(arena_.get() + at, rec.data.data(), len);
  Slot& s = slots_[head & mask_];
  s.ts_sec = rec.ts_sec;
  s.ts_nsec = rec.ts_nsec;
  s.caplen = rec.caplen;
  s.wirelen = rec.wirelen;
  s.source = source;
  s.offset = at;
  s.length = len;
  write_pos_ = at + len;
  head_.store(head + 1, std::memory_order_seq_cst);
  return true;
}

void PacketQueue::notify() {
  // Pairs with wait(): either the consumer saw the new head before sleeping,
  // or it announced it sleeps and is woken here.
  if (sleeping_.load(std::memory_order_seq_cst)) {
    { std::lock_guard lock(wake_mutex_); }
    wake_.notify_one();
  }
}

bool PacketQueue::front(Record& rec, std::uint32_t& source) const {
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (head_.load(std::memory_order_acquire) == tail) return false;
  const Slot& s = slots_[tail & mask_];
  rec.ts_sec = s.ts_sec;
  rec.ts_nsec = s.ts_nsec;
  rec.caplen = s.caplen;
  rec.wirelen = s.wirelen;
  rec.data = std::span<const std::uint8_t>(arena_.get() + s.offset, s.length);
  source = s.source;
  return true;
}

void PacketQueue::pop() { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

void PacketQueue::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(wake_mutex_);
  sleeping_.store(true, std::memory_order_seq_cst);
  if (head_.load(std::memory_order_seq_cst) == tail_.load(std::memory_order_relaxed)) wake_.wait_for(lock, timeout);
  sleeping_.store(false, std::memory_order_relaxed);
}

}  // namespace rdmadiag::capture
