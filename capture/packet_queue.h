// A bounded single-producer / single-consumer queue of captured packets
// between the capture thread (which writes the file and must never wait on
// the analysis while reading a live source) and the analysis thread.
// Everything is allocated once: a ring of packet slots plus a byte arena the
// packet bytes are copied into, so queuing a packet is one copy and no
// allocation. Packets leave in the order they came.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "capture/file_reader.h"

namespace rdmadiag::capture {

class PacketQueue {
 public:
  // slots: rounded up to a power of two; arena_bytes: room for the packet bytes.
  PacketQueue(std::size_t slots, std::size_t arena_bytes);
  PacketQueue(const PacketQueue&) = delete;
  PacketQueue& operator=(const PacketQueue&) = delete;

  // Producer. Copies the packet in; false (nothing queued) when the slots or
  // the arena are full.
  bool push(const Record& rec, std::uint32_t source);
  // Producer, after a batch of pushes: wakes the consumer if it sleeps.
  void notify();

  // Consumer. The oldest packet; its bytes stay valid until pop(). False when empty.
  bool front(Record& rec, std::uint32_t& source) const;
  void pop();
  // Consumer: sleeps until a packet may be queued, at most `timeout`.
  void wait(std::chrono::milliseconds timeout);

  bool empty() const { return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire); }

 private:
  struct Slot {
    std::int64_t ts_sec = 0;
    std::uint32_t ts_nsec = 0;
    std::uint32_t caplen = 0;
    std::uint32_t wirelen = 0;
    std::uint32_t source = 0;
    std::size_t offset = 0;  // of the bytes in the arena
    std::size_t length = 0;
  };
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::unique_ptr<std::uint8_t[]> arena_;
  std::size_t arena_size_ = 0;
  std::size_t write_pos_ = 0;  // producer only: where the next packet's bytes go
  alignas(64) std::atomic<std::uint64_t> head_{0};  // packets pushed
  alignas(64) std::atomic<std::uint64_t> tail_{0};  // packets popped
  std::mutex wake_mutex_;
  std::condition_variable wake_;
  std::atomic<bool> sleeping_{false};
};

}  // namespace rdmadiag::capture
