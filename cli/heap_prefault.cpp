#include "cli/heap_prefault.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

namespace rdmadiag::cli {

namespace {
constexpr std::uintptr_t kPage = 4096;
std::uintptr_t heap_end() { return reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(kPage - 1); }
}  // namespace

HeapPrefault::HeapPrefault() {
  const char* env = std::getenv("RDMADIAG_HEAP_PREFAULT");
  if (env && std::strcmp(env, "0") == 0) return;
  // mallopt returns 1 on success; a malloc that is not glibc's (a sanitizer's) may not
  // take it or grow with brk at all: then nothing is done.
  on_ = mallopt(M_TOP_PAD, static_cast<int>(kTopPad)) == 1;
  done_ = heap_end();
}

void HeapPrefault::poll() {
  if (!on_) return;
  const std::uintptr_t end = heap_end();  // sbrk(0): glibc's cached break, no system call
  if (end <= done_) {
    done_ = end;  // the heap shrank (trimmed): populate from there when it grows again
    return;
  }
  if (madvise(reinterpret_cast<void*>(done_), end - done_, MADV_POPULATE_WRITE) == 0) populated_ += end - done_;
  else if (errno == EINVAL) on_ = false;  // a kernel without MADV_POPULATE_WRITE
  done_ = end;
}

}  // namespace rdmadiag::cli
