#include "cli/heap_prefault.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

namespace rdmadiag::cli {

namespace {
constexpr std::uintptr_t kPage = 4096;
std::uintptr_t heap_end() { return reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(kPage - 1); }
bool env_is_zero(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}
}  // namespace

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");  // "always [madvise] never"
  std::string word;
  while (f >> word)
    if (word.size() > 2 && word.front() == '[' && word.back() == ']') return word.substr(1, word.size() - 2);
  return "";
}

long anon_huge_pages_kb() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string key;
  long kb = 0;
  while (f >> key) {
    if (key == "AnonHugePages:" && f >> kb) return kb;
    f.ignore(1 << 10, '\n');
  }
  return -1;
}

HeapPrefault::HeapPrefault() {
  if (env_is_zero("RDMADIAG_HEAP_PREFAULT")) return;
  const bool want_huge = !env_is_zero("RDMADIAG_HUGE_PAGES") && thp_mode() == "madvise";
  // mallopt returns 1 on success; a malloc that is not glibc's (a sanitizer's) may not
  // take it or grow with brk at all: then nothing is done.
  on_ = mallopt(M_TOP_PAD, static_cast<int>(want_huge ? kHugeTopPad : kTopPad)) == 1;
  huge_ = on_ && want_huge;
  // And every block from the heap, the large ones too (glibc maps a block of 128 KiB
  // to 32 MiB on its own, in 4 KiB pages unless marked): the retired flows' summaries
  // (a 53 MB vector) were 85 % of the page faults left with 1M connections.
  if (huge_) mallopt(M_MMAP_MAX, 0);
  done_ = heap_end();
}

void HeapPrefault::poll() {
  if (!on_) return;
  const std::uintptr_t end = heap_end();  // sbrk(0): glibc's cached break, no system call
  if (end <= done_) {
    done_ = end;  // the heap shrank (trimmed): go on from there when it grows again
    return;
  }
  if (huge_) return mark_huge(end);
  if (madvise(reinterpret_cast<void*>(done_), end - done_, MADV_POPULATE_WRITE) == 0) populated_ += end - done_;
  else if (errno == EINVAL) on_ = false;  // a kernel without MADV_POPULATE_WRITE
  done_ = end;
}

// The whole 2 MiB blocks the heap grew by. The block the break ends in waits for
// the next growth (its start may be written by then: that one stays in 4 KiB pages).
void HeapPrefault::mark_huge(std::uintptr_t end) {
  const std::uintptr_t from = (done_ + kHugePage - 1) & ~(kHugePage - 1), to = end & ~(kHugePage - 1);
  if (to <= from) return;
  if (madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE) == 0) {
    huge_bytes_ += to - from;
    done_ = to;
    return;
  }
  huge_ = false;  // no THP after all: pre-fault in 4 KiB pages from here on
  mallopt(M_TOP_PAD, static_cast<int>(kTopPad));
  mallopt(M_MMAP_MAX, 65536);  // glibc's default
  done_ = end;
}

}  // namespace rdmadiag::cli
