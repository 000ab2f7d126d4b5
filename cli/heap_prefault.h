// Faults in the heap's new pages in bulk while `analyze` (-j 1) builds its flow
// state. With many queue pairs every new flow touches fresh heap pages (16K
// QPs: ~28,000 page faults for 120 MB); on a VM each fault is a trap to the
// hypervisor (~7 us measured here, docs/performance.md, session 16), and every
// packet reaches its flow somewhere in those 100+ MB (a TLB miss per look-up
// in 4 KiB pages).
//
// Two ways, chosen once by the kernel's transparent huge page (THP) mode:
// - "madvise" (the kernel gives 2 MiB pages only where asked): glibc's heap
//   grows by brk at least 64 MiB at a time (M_TOP_PAD), serves large blocks
//   from there too instead of mmap (M_MMAP_MAX 0), and poll() marks the
//   whole 2 MiB blocks of what it grew by MADV_HUGEPAGE, mostly before malloc
//   hands them out: the kernel then faults them in 2 MiB at a time as the flows
//   need them (untouched, they cost nothing). Marking from inside, not glibc's
//   own `glibc.malloc.hugetlb=1`: that tunable is read only at program start,
//   and starting `analyze` again to set it cost 7 ms per run (docs/performance.md,
//   session 17).
// - otherwise ("always", "never", no THP): the heap grows by at least 2 MiB
//   (M_TOP_PAD) and poll() hands what it grew by to the kernel in one
//   madvise(MADV_POPULATE_WRITE) (Linux 5.14): one call per ~2 MiB instead of a
//   trap per 4 KiB. 2 MiB, not more: pages zeroed far ahead of their use push
//   the flows' hot lines out of the cache (16 MiB measured slower).
// RDMADIAG_HEAP_PREFAULT=0 switches both off, RDMADIAG_HUGE_PAGES=0 the first
// (then the second is used).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace rdmadiag::cli {

class HeapPrefault {
 public:
  static constexpr std::size_t kTopPad = std::size_t{2} << 20;
  static constexpr std::size_t kHugeTopPad = std::size_t{64} << 20;
  static constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;

  HeapPrefault();
  // Cheap (no system call unless the heap grew): call every few hundred frames.
  void poll();
  bool on() const { return on_; }
  bool huge() const { return huge_; }
  std::uint64_t populated_bytes() const { return populated_; }
  std::uint64_t huge_bytes() const { return huge_bytes_; }

 private:
  void mark_huge(std::uintptr_t end);

  std::uintptr_t done_ = 0;  // the heap's end, up to which pages are populated (or marked)
  std::uint64_t populated_ = 0, huge_bytes_ = 0;
  bool on_ = false, huge_ = false;
};

// The THP mode of /sys/kernel/mm/transparent_hugepage/enabled ("always",
// "madvise", "never"), or "" without THP.
std::string thp_mode();
// This process' AnonHugePages (kB, /proc/self/smaps_rollup; -1 if unreadable):
// the kernel's own count, for the tests and RDMADIAG_HUGE_PAGES_STATE.
long anon_huge_pages_kb();

}  // namespace rdmadiag::cli
