// Faults in the heap's new pages in bulk while `analyze` (-j 1) builds its flow
// state. With many queue pairs every new flow touches fresh heap pages (16K
// QPs: ~28,000 page faults for 120 MB); on a VM each fault is a trap to the
// hypervisor (~7 us measured here, docs/performance.md, session 16). glibc
// grows its heap with brk by M_TOP_PAD beyond each request (set to 2 MiB
// here); poll() hands what the heap grew by since the last call to the kernel
// in one madvise(MADV_POPULATE_WRITE) (Linux 5.14), so those pages fault
// once per 2 MiB instead of once per 4 KiB. 2 MiB, not more: pages zeroed far
// ahead of their use push the flows' hot lines out of the cache (16 MiB
// measured slower). RDMADIAG_HEAP_PREFAULT=0 switches it off (experiments).
#pragma once
#include <cstddef>
#include <cstdint>

namespace rdmadiag::cli {

class HeapPrefault {
 public:
  static constexpr std::size_t kTopPad = std::size_t{2} << 20;

  HeapPrefault();
  // Cheap (no system call unless the heap grew): call every few hundred frames.
  void poll();
  bool on() const { return on_; }
  std::uint64_t populated_bytes() const { return populated_; }

 private:
  std::uintptr_t done_ = 0;  // the heap's end, up to which pages are populated
  std::uint64_t populated_ = 0;
  bool on_ = false;
};

}  // namespace rdmadiag::cli
