// cli/heap_prefault: after poll(), the pages the heap grew by are in memory, so
// writing them costs no page fault (counted by the kernel: getrusage's minor
// faults, not timed).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "cli/heap_prefault.h"

namespace {
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
// A HeapPrefault made while the switch `var` is "0" (read only at construction).
rdmadiag::cli::HeapPrefault made_with_zero(const char* var) {
  ::setenv(var, "0", 1);
  rdmadiag::cli::HeapPrefault heap;
  ::unsetenv(var);
  return heap;
}
}  // namespace

TEST(HeapPrefault, GrownHeapIsWrittenWithoutFaults) {
  rdmadiag::cli::HeapPrefault heap = made_with_zero("RDMADIAG_HUGE_PAGES");  // the 4 KiB way, whatever the THP mode
  if (!heap.on()) GTEST_SKIP() << "malloc is not glibc's (sanitizer build) or RDMADIAG_HEAP_PREFAULT=0";
  ASSERT_FALSE(heap.huge());
  // 16 blocks of 64 KiB: below glibc's mmap threshold, so from the brk heap; 1 MiB in all,
  // within one growth of the heap (M_TOP_PAD 2 MiB).
  std::vector<char*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(static_cast<char*>(std::malloc(64 << 10)));
  heap.poll();
  ASSERT_GT(heap.populated_bytes(), 0u) << "the heap grew but poll() populated nothing";
  const long before = minor_faults();
  for (char* b : blocks) std::memset(b, 0xa5, 64 << 10);
  const long faults = minor_faults() - before;
  // Without the prefault: one fault per 4 KiB page, 256. A few are allowed for the test's own pages.
  EXPECT_LT(faults, 16) << "writing 1 MiB of populated heap faulted " << faults << " times";
  for (char* b : blocks) std::free(b);
}

TEST(HeapPrefault, SwitchedOffByTheEnvironment) {
  rdmadiag::cli::HeapPrefault heap = made_with_zero("RDMADIAG_HEAP_PREFAULT");
  EXPECT_FALSE(heap.on());
  heap.poll();
  EXPECT_EQ(heap.populated_bytes(), 0u);
}

// THP mode "madvise": the heap grows by 64 MiB at a time, poll() marks its whole
// 2 MiB blocks MADV_HUGEPAGE, and writing them is a fault per 2 MiB, not per
// 4 KiB; the kernel's own AnonHugePages count shows them.
TEST(HeapPrefault, HugeModeGivesTheGrownHeapHugePages) {
  if (rdmadiag::cli::thp_mode() != "madvise") GTEST_SKIP() << "THP mode is '" << rdmadiag::cli::thp_mode() << "'";
  rdmadiag::cli::HeapPrefault heap;
  if (!heap.on()) GTEST_SKIP() << "malloc is not glibc's (sanitizer build) or RDMADIAG_HEAP_PREFAULT=0";
  ASSERT_TRUE(heap.huge());
  const long huge_before = rdmadiag::cli::anon_huge_pages_kb();
  ASSERT_GE(huge_before, 0) << "no /proc/self/smaps_rollup";
  // 32 MiB in 64 KiB blocks (below glibc's mmap threshold, and mmap is off in this mode
  // anyway). poll() right after the heap grew, as analyze calls it every 256 frames:
  // malloc writes a header at the start of every block it hands out, and a 2 MiB
  // block written before it was marked stays in 4 KiB pages.
  std::vector<char*> blocks;
  std::vector<char> grown(1 << 20);  // the heap grows now (M_TOP_PAD: by 64 MiB more)
  heap.poll();
  ASSERT_GE(heap.huge_bytes(), std::uint64_t{32} << 20) << "poll() marked too little of the grown heap";
  const long before = minor_faults();
  for (int i = 0; i < 512; ++i) blocks.push_back(static_cast<char*>(std::malloc(64 << 10)));
  for (char* b : blocks) std::memset(b, 0xa5, 64 << 10);
  const long faults = minor_faults() - before;
  // In 4 KiB pages: 8,192 faults (the allocations and the writes). Allowed: the
  // partial 2 MiB block before the first marked one (512).
  EXPECT_LT(faults, 1024) << "writing 32 MiB of marked heap faulted " << faults << " times";
  const long huge_after = rdmadiag::cli::anon_huge_pages_kb();
  EXPECT_GE(huge_after - huge_before, 16 << 10) << "AnonHugePages " << huge_before << " -> " << huge_after << " kB";
  for (char* b : blocks) std::free(b);
}

TEST(HeapPrefault, HugePagesSwitchedOffByTheEnvironment) {
  rdmadiag::cli::HeapPrefault heap = made_with_zero("RDMADIAG_HUGE_PAGES");
  EXPECT_FALSE(heap.huge());
}
