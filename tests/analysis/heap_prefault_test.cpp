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
}  // namespace

TEST(HeapPrefault, GrownHeapIsWrittenWithoutFaults) {
  rdmadiag::cli::HeapPrefault heap;
  if (!heap.on()) GTEST_SKIP() << "malloc is not glibc's (sanitizer build) or RDMADIAG_HEAP_PREFAULT=0";
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
  ::setenv("RDMADIAG_HEAP_PREFAULT", "0", 1);
  rdmadiag::cli::HeapPrefault heap;
  ::unsetenv("RDMADIAG_HEAP_PREFAULT");
  EXPECT_FALSE(heap.on());
  heap.poll();
  EXPECT_EQ(heap.populated_bytes(), 0u);
}
