// A global operator new that counts, for the zero-allocation tests (the
// project rule: no heap allocation per packet). Include it in exactly one
// translation unit of a test binary: it replaces the program's operator
// new/delete. Not for sanitizer builds, which own the allocator.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace rdmadiag::bench {
inline std::atomic<std::uint64_t> g_allocations{0};
// Set on a thread while it does work the test does not count (e.g. generating input).
inline thread_local bool t_not_counted = false;
}  // namespace rdmadiag::bench

// gcc 12 inlines these into callers and then takes the malloc/free pair for a
// mismatch with new/delete; they are the matching pair by construction.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (!rdmadiag::bench::t_not_counted) rdmadiag::bench::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
